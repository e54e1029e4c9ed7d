"""Who may ask the run inspector (docs/architecture.md, "The run inspector"): a request
without a session gets 401, one with a wrong ``Host`` 421, a POST without the CSRF token
403; an operator signs in with their token (refused ones audited too), the session
cookie is HttpOnly and SameSite=Strict, holds on another instance of the same database,
ends at sign-out and at its expiry; everything served is redacted.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from aiohttp import web
from pydantic import ValidationError

from bot.inspector.routes import inspector_address
from bot.settings import Settings
from conversations.store import Store
from core.secrets import Redactor
from tests.inspector_harness import OPERATOR, TOKEN, inspector_served, with_operator
from tests.test_store_contract import sqlite_store


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    async with sqlite_store(tmp_path) as opened:
        yield opened


@pytest.fixture
def inspecting(settings: Settings) -> Settings:
    return with_operator(settings)


async def audit_of(store: Store) -> list[tuple[str | None, str, str | None, str]]:
    return [(e.request_kind, e.user_id, e.means, e.outcome) for e in await store.audit.entries()]


async def test_without_a_session_every_page_is_401_with_a_way_to_sign_in(
    store: Store, inspecting: Settings
) -> None:
    async with inspector_served(store, inspecting) as served:
        client = await served.client(signed_in=False)
        for path in ("/inspector/", "/inspector/conversations/x", "/inspector/usage"):
            page = await client.get(path)
            assert page.status == 401, path
            assert 'href="/inspector/sign-in?next=' in page.text
        assert (await client.post("/inspector/sign-out", csrf=False)).status == 401
        # the static files and the sign-in form need no session; the operations paths are
        # not the inspector's
        assert (await client.get("/inspector/static/inspector.css")).status == 200
        assert (await client.get("/inspector/sign-in")).status == 200
        assert (await client.get("/healthz")).status == 200


async def test_a_wrong_host_is_421_signed_in_or_not(store: Store, inspecting: Settings) -> None:
    async with inspector_served(store, inspecting) as served:
        signed_in = await served.client()
        signed_in.host = "rebound.attacker.example:9464"
        for path in ("/inspector/", "/inspector/sign-in", "/inspector/static/inspector.css"):
            assert (await signed_in.get(path)).status == 421, path
        assert (await signed_in.post("/inspector/sign-out")).status == 421
        # a name the settings list, with or without a port, is served
        signed_in.host = "localhost:9464"
        assert (await signed_in.get("/inspector/nothing-here")).status == 404
        signed_in.host = "127.0.0.1"
        assert (await signed_in.get("/inspector/nothing-here")).status == 404
    named = with_operator(inspecting, inspector_hosts=["threadbot.internal.example"])
    async with inspector_served(store, named) as served:
        client = await served.client(signed_in=False, host="threadbot.internal.example")
        assert (await client.sign_in()).status == 303
        client.host = "localhost"
        assert (await client.get("/inspector/")).status == 421


async def test_signing_in_sets_a_strict_httponly_cookie_and_is_audited(
    store: Store, inspecting: Settings
) -> None:
    async with inspector_served(store, inspecting) as served:
        client = await served.client(signed_in=False)
        refused = await client.sign_in(token="not-" + TOKEN)
        assert refused.status == 401
        assert "is not an operator with this token" in refused.text
        assert TOKEN not in refused.text
        assert (await client.get("/inspector/nothing")).status == 401
        unknown = await client.sign_in(operator="mallory")
        assert unknown.status == 401
        page = await client.sign_in()
        assert page.status == 303
        assert page.headers["Location"] == "/inspector/"
        cookie = page.headers["Set-Cookie"]
        assert "HttpOnly" in cookie
        assert "SameSite=Strict" in cookie
        assert "Path=/inspector" in cookie
        assert TOKEN not in cookie
        assert (await client.get("/inspector/nothing")).status == 404
    assert await audit_of(store) == [
        ("sign_in", f"operator:{OPERATOR}", "inspector", "refused"),
        ("sign_in", "operator:mallory", "inspector", "refused"),
        ("sign_in", f"operator:{OPERATOR}", "inspector", "signed_in"),
    ]


async def test_a_post_needs_the_sessions_csrf_token(store: Store, inspecting: Settings) -> None:
    async with inspector_served(store, inspecting) as served:
        client = await served.client()
        other = await served.client()
        assert (await client.post("/inspector/sign-out", csrf=False)).status == 403
        assert (await client.post("/inspector/sign-out", {"csrf": other.csrf})).status == 403
        assert (await client.get("/inspector/nothing")).status == 404  # still signed in
        by_header = await client.post(
            "/inspector/sign-out", csrf=False, headers={"X-CSRF-Token": client.csrf}
        )
        assert by_header.status == 303
        assert by_header.headers["Location"] == "/inspector/sign-in"
        assert (await client.get("/inspector/nothing")).status == 401
        assert (await other.get("/inspector/nothing")).status == 404  # a session of its own
    assert (await audit_of(store))[-1] == (
        "sign_in",
        f"operator:{OPERATOR}",
        "inspector",
        "signed_out",
    )


async def test_a_session_holds_on_another_instance_and_ends_everywhere_at_sign_out(
    tmp_path: Path, inspecting: Settings
) -> None:
    async with sqlite_store(tmp_path) as one, sqlite_store(tmp_path) as two:
        async with (
            inspector_served(one, inspecting) as first,
            inspector_served(two, inspecting) as second,
        ):
            client = await first.client()
            client.address = second.address  # the load balancer sends it elsewhere
            assert (await client.get("/inspector/nothing")).status == 404
            assert (await client.post("/inspector/sign-out")).status == 303
            client.address = first.address
            assert (await client.get("/inspector/nothing")).status == 401


async def test_a_session_ends_at_its_expiry(store: Store, inspecting: Settings) -> None:
    now = [datetime(2026, 12, 6, 9, 0, tzinfo=UTC)]
    settings = with_operator(inspecting, inspector_session_hours=1.0)
    async with inspector_served(store, settings, clock=lambda: now[0]) as served:
        client = await served.client()
        now[0] += timedelta(minutes=59)
        assert (await client.get("/inspector/nothing")).status == 404
        now[0] += timedelta(minutes=1)
        assert (await client.get("/inspector/nothing")).status == 401


async def test_after_signing_in_the_browser_goes_back_only_to_an_inspector_page(
    store: Store, inspecting: Settings
) -> None:
    async with inspector_served(store, inspecting) as served:
        client = await served.client(signed_in=False)
        form = {"operator": OPERATOR, "token": TOKEN}
        back = await client.post("/inspector/sign-in", {**form, "next": "/inspector/usage"})
        assert back.headers["Location"] == "/inspector/usage"
        for elsewhere in ("https://evil.example/", "//evil.example/x", "/healthz"):
            page = await client.post("/inspector/sign-in", {**form, "next": elsewhere})
            assert page.headers["Location"] == "/inspector/", elsewhere
        cross_site = await client.post(
            "/inspector/sign-in", form, csrf=False, headers={"Origin": "https://evil.example"}
        )
        assert cross_site.status == 403


async def test_everything_served_is_redacted(store: Store, inspecting: Settings) -> None:
    secret = "xoxb-1234567890-abcdefghijkl"
    redactor = Redactor({"SLACK_BOT_TOKEN": secret})
    async with inspector_served(store, inspecting, redactor=redactor) as served:
        inspector = served.inspector
        assert secret not in inspector.page(None, "not_found.html", what=f"token {secret}")
        response = inspector.json({"said": f"the token is {secret}"})
        assert isinstance(response, web.Response) and response.text is not None
        assert secret not in response.text and "said" in response.text


def test_the_inspector_needs_an_operator(settings: Settings) -> None:
    with pytest.raises(ValidationError, match=r"no operator may sign in"):
        Settings(**{**settings.model_dump(), "inspector": True})
    assert Settings().inspector is False  # off by default


def test_the_address_said_at_start_is_one_a_browser_may_use(settings: Settings) -> None:
    inspecting = with_operator(settings, inspector_hosts=["bot.internal.example", "localhost"])
    said = inspector_address(inspecting, "http://0.0.0.0:9464")
    assert said == "http://bot.internal.example:9464/inspector/"
    assert inspector_address(inspecting, "http://[::]:9464").startswith("http://bot.internal")
    assert inspector_address(inspecting, "http://127.0.0.1:9464") == (
        "http://127.0.0.1:9464/inspector/"
    )
