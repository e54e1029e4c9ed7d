"""Who may ask the run inspector (docs/architecture.md, "The run inspector"): a request
without a session gets 401, one with a wrong ``Host`` 421, a POST without the CSRF token
403; an operator signs in with their token (refused ones audited too, with the client's
address, a name that is no operator's never as typed; past five refusals a minute, 429),
the session cookie is HttpOnly and SameSite=Strict, holds on another instance of the
same database, ends at sign-out, at its expiry, and when its operator is removed or
given a new token; every answer carries the security headers; everything served is
redacted.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import unquote

import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request
from pydantic import ValidationError

from bot.inspector.guard import HEADERS
from bot.inspector.refusals import Refusals
from bot.inspector.routes import inspector_address, static_file
from bot.operators import Operator, token_sha256
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
        assert by_header.headers["Location"] == "/inspector/sign-in?signed-out"
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


async def test_a_session_ends_at_its_expiry_and_is_dropped_then(
    store: Store, inspecting: Settings
) -> None:
    start = datetime(2026, 12, 6, 9, 0, tzinfo=UTC)
    now = [start]
    settings = with_operator(inspecting, inspector_session_hours=1.0)
    async with inspector_served(store, settings, clock=lambda: now[0]) as served:
        client = await served.client()
        kept = token_sha256(client.session_id)
        now[0] += timedelta(minutes=59)
        assert (await client.get("/inspector/nothing")).status == 404
        now[0] += timedelta(minutes=1)
        assert (await client.get("/inspector/nothing")).status == 401
        # gone from the store, not merely refused: no new sign-in was needed to drop it
        assert await store.operator_sessions.find(kept, at=start) is None


async def test_a_session_ends_when_its_operator_is_removed_or_given_a_new_token(
    store: Store, inspecting: Settings
) -> None:
    new_token = "dana-new-operator-token-98765"
    rotated = inspecting.model_copy(
        update={"operators": {OPERATOR: Operator(token_sha256=token_sha256(new_token))}}
    )
    erin = Operator(token_sha256=token_sha256("erin-operator-token-0123456789"))
    removed = inspecting.model_copy(update={"operators": {"erin": erin}})
    async with inspector_served(store, inspecting) as served:
        client = await served.client()
        assert (await client.get("/inspector/nothing")).status == 404

        served.inspector.settings = rotated  # the settings as a restart reads them
        assert (await client.get("/inspector/nothing")).status == 401
        forked = await client.post("/inspector/conversations/x/fork", {"at": "1"})
        assert forked.status == 401
        assert (await client.sign_in()).status == 401  # the old token is refused too
        assert (await client.sign_in(token=new_token)).status == 303
        assert (await client.get("/inspector/nothing")).status == 404

        served.inspector.settings = removed
        assert (await client.get("/inspector/nothing")).status == 401
        assert (await client.post("/inspector/sign-out")).status == 401


async def test_refused_sign_ins_are_limited_and_the_limit_is_audited_once(
    store: Store, inspecting: Settings
) -> None:
    now = [datetime(2026, 12, 6, 9, 0, tzinfo=UTC)]
    wrong = "not-" + TOKEN
    async with inspector_served(store, inspecting, clock=lambda: now[0]) as served:
        client = await served.client(signed_in=False)
        for _ in range(5):
            assert (await client.sign_in(token=wrong)).status == 401
        limited = await client.sign_in()  # the right token: not even checked
        assert limited.status == 429
        assert limited.headers["Retry-After"] == "60"
        assert "try again in 60 s" in limited.text
        now[0] += timedelta(seconds=30)
        for _ in range(20):
            again = await client.sign_in(token=wrong)
            assert again.status == 429
            assert again.headers["Retry-After"] == "30"
        assert (await client.get("/inspector/nothing")).status == 401
        now[0] += timedelta(seconds=30)
        assert (await client.sign_in()).status == 303  # the minute is over
        # a success forgets the refusals: four more are not five
        for _ in range(4):
            assert (await client.sign_in(token=wrong)).status == 401
        assert (await client.sign_in()).status == 303
    entries = await store.audit.entries()
    refused = [e for e in entries if e.outcome == "refused"]
    assert len(refused) == 5 + 1 + 4  # the refusals, the limit once, the refusals after
    assert all(e.user_id == f"operator:{OPERATOR}" for e in refused)
    assert all("(from 127.0.0.1)" in e.reason for e in refused[:5])
    assert refused[5].reason.startswith("sign-ins limited for 60 s: 5 refused within 60 s")
    assert "from 127.0.0.1" in refused[5].reason


def test_refusals_are_counted_per_address_and_per_name_and_forgotten_past_the_window() -> None:
    at = datetime(2026, 12, 6, 9, 0, tzinfo=UTC)
    refusals = Refusals(limit=2, window=timedelta(minutes=1), keys=3)
    refusals.refused(["address a", "operator dana"], at)
    refusals.refused(["address b", "operator dana"], at + timedelta(seconds=10))
    # the name is limited from any address; another name from the same address is not
    assert refusals.wait(["address c", "operator dana"], at + timedelta(seconds=20)) == 40
    assert refusals.wait(["address a", "operator erin"], at) is None
    assert refusals.first_told(["address c", "operator dana"], at) is True
    assert refusals.first_told(["address c", "operator dana"], at) is False
    assert refusals.wait(["operator dana"], at + timedelta(seconds=60)) is None
    refusals.refused(["operator erin"], at)
    refusals.refused(["operator erin"], at)
    refusals.succeeded(["operator erin"])
    assert refusals.wait(["operator erin"], at) is None
    # past three keys, those refused longest ago are forgotten
    for n in range(5):
        refusals.refused([f"address x{n}"] * 2, at)
    assert refusals.wait(["address x0"], at) is None
    assert refusals.wait(["address x4"], at) == 60


async def test_a_name_that_is_no_operator_name_is_never_recorded_as_typed(
    store: Store, inspecting: Settings
) -> None:
    evil = "evil\x1b[2J\x1b[Hdana signed in\nfake line"
    async with inspector_served(store, inspecting) as served:
        client = await served.client(signed_in=False)
        page = await client.sign_in(operator=evil)
        assert page.status == 401
        assert "not an operator name" in page.text
        assert "\x1b" not in page.text
        kept = await client.sign_in(operator="mallory")
        assert 'name="operator" value="mallory"' in kept.text  # the name typed is kept
    (first, second) = await store.audit.entries()
    assert first.user_id == "operator:?"
    assert first.reason == "refused: not an operator name (from 127.0.0.1)"
    assert second.user_id == "operator:mallory"
    assert second.reason == "refused: 'mallory' is not an operator with this token (from 127.0.0.1)"


async def test_every_answer_under_the_inspector_carries_the_security_headers(
    store: Store, inspecting: Settings
) -> None:
    async with inspector_served(store, inspecting) as served:
        client = await served.client()
        stranger = await served.client(signed_in=False)
        elsewhere = await served.client(signed_in=False, host="rebound.attacker.example")
        answers = {
            "page": await client.get("/inspector/"),
            "json": await client.get("/inspector/usage.json?by=day"),
            "not found": await client.get("/inspector/nothing"),
            "static": await client.get("/inspector/static/inspector.css"),
            "sign-in": await stranger.get("/inspector/sign-in"),
            "401": await stranger.get("/inspector/"),
            "403": await client.post("/inspector/sign-out", csrf=False),
            "421": await elsewhere.get("/inspector/"),
            "303": await stranger.sign_in(),
        }
        assert [a.status for a in answers.values()] == [200, 200, 404, 200, 200, 401, 403, 421, 303]
        for what, answer in answers.items():
            assert {k: answer.headers.get(k) for k in HEADERS} == HEADERS, what
            cached = answer.headers.get("Cache-Control")
            assert cached == (None if what == "static" else "no-store"), what
        assert "X-Frame-Options" not in (await client.get("/healthz")).headers


async def test_the_small_things_a_person_meets(store: Store, inspecting: Settings) -> None:
    async with inspector_served(store, inspecting) as served:
        client = await served.client()
        wrong = await client.post("/inspector/sign-out", {"csrf": "0" * 64})
        assert wrong.status == 403 and "missing or wrong" in wrong.text
        # after a sign-out the form says so; it says how long a token is
        out = await client.post("/inspector/sign-out", redirects=True)
        assert out.status == 200 and '<p class="notice" id="notice">Signed out.</p>' in out.text
        assert "16 characters at least" in out.text
        assert "Signed out." not in (await client.get("/inspector/sign-in")).text
        # every page links a favicon that is served; a file that is not there: plain 404
        icon = re.search(r'<link rel="icon" href="([^"]+)"', out.text)
        assert icon is not None
        favicon = await client.get(icon.group(1))
        assert favicon.status == 200 and favicon.headers["Content-Type"] == "image/svg+xml"
        missing = await client.get("/inspector/static/no-such-file.js")
        assert missing.status == 404
        assert missing.headers["Content-Type"].startswith("text/plain")
        # an action's address asked by GET leads, after the sign-in, to its conversation
        cid = "0123456789abcdef0123456789abcdef"
        page = await client.get(f"/inspector/conversations/{cid}/stop")
        assert page.status == 401
        back = re.search(r'href="/inspector/sign-in\?next=([^"]+)"', page.text)
        assert back is not None
        form = {"operator": OPERATOR, "token": TOKEN, "next": unquote(back.group(1))}
        signed_in = await client.post("/inspector/sign-in", form, csrf=False)
        assert signed_in.headers["Location"] == f"/inspector/conversations/{cid}/stop"
        for action in ("stop", "fork"):
            there = await client.get(f"/inspector/conversations/{cid}/{action}", redirects=False)
            assert there.status == 303, action
            assert there.headers["Location"] == f"/inspector/conversations/{cid}"


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


async def test_a_static_path_outside_the_static_folder_is_404() -> None:
    for path in ("../guard.py", "../../../../etc/hostname", "/etc/hostname", "vendor", "vendor/"):
        request = make_mocked_request("GET", "/inspector/static/x", match_info={"path": path})
        answer = await static_file(request)
        assert answer.status == 404, path
        assert isinstance(answer, web.Response) and answer.content_type == "text/plain", path
    request = make_mocked_request("GET", "/", match_info={"path": "vendor/uplot/LICENSE"})
    assert isinstance(await static_file(request), web.FileResponse)


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
