"""Slack multi-workspace installs (docs/architecture.md, "Several instances"), end to end
with the real slack-bolt and slack-sdk against the local Slack fake.

A person installs the app in a second workspace through Slack's OAuth v2 flow, driven over
HTTP as a browser does (``/slack/install``, Slack's consent page, ``/slack/oauth_redirect``
with the state and a code): the install is stored with its token sealed (the raw row holds
no plain token); that workspace's mentions are answered with its own token (the fake records
which token each call carried, and refuses a channel to another workspace's token), while
the workspace of ``SLACK_BOT_TOKEN`` keeps its own; the new token is redacted from a tool's
output and the model's text from the moment it is stored. ``app_uninstalled`` removes the
install (its tokens dropped), and the workspace's events are then ignored. A forged or
replayed state installs nothing. In Socket Mode the two paths are on the operations address.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import sqlite3
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from pydantic import SecretStr

from adapters.slack.oauth import BOT_SCOPES
from bot.engines import default_toolbox
from bot.ops import Operations
from bot.settings import Settings
from conversations.sealing import Sealer, new_key
from conversations.sweeper import utc_now
from core.models.base import ToolKind, ToolSpec
from core.models.scripted import ScriptedCall, ScriptedModel, ScriptedTurn
from core.tools.base import Toolbox, ToolContext, ToolOutput
from core.vocabulary.entries import ToolResultEntry
from tests.conftest import wait_for
from tests.fakes.slack_api import TEAM_ID, FakeSlackApi
from tests.fakes.slack_installs import CLIENT_ID, CLIENT_SECRET, FakeWorkspace
from tests.slack_harness import CHANNEL, WAIT, Workspace, event_body, slack_workspace

T2 = "T0SECOND01"
C2 = "C0SECOND01"
MARK = "[redacted SLACK_BOT_TOKEN T0SECOND01]"


class Printenv:
    """A read-only tool whose output holds the second workspace's token (as a command
    that prints its environment would)."""

    def __init__(self, api: FakeSlackApi) -> None:
        self.api = api
        self.spec = ToolSpec(
            name="printenv",
            description="prints the environment",
            input_schema={"type": "object"},
            kind=ToolKind.READ_ONLY,
        )

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
        token = self.api.installs.workspaces[T2].token
        return ToolOutput(content=f"SLACK_BOT_TOKEN={token}\nHOME=/home/bot\n", note="env")


def finish(answer: str) -> ScriptedTurn:
    return ScriptedTurn(calls=[ScriptedCall("finish", {"answer": answer})])


def with_installs(settings: Settings) -> Settings:
    """``settings`` with the app's OAuth credentials and a key; the chat workflow."""
    settings.slack_client_id = CLIENT_ID
    settings.slack_client_secret = SecretStr(CLIENT_SECRET)
    settings.token_keys = SecretStr(new_key())
    settings.workflow = "chat"
    return settings


@pytest.fixture
def install_settings(sqlite_settings: Settings) -> Settings:
    """SQLite settings with installs (:func:`with_installs`)."""
    return with_installs(sqlite_settings)


@contextlib.asynccontextmanager
async def two_workspaces(
    settings: Settings, model: ScriptedModel, transport: str = "http"
) -> AsyncIterator[tuple[Workspace, FakeWorkspace]]:
    """The bot (``SLACK_BOT_TOKEN`` for the fake's workspace, and installs), and a second
    workspace of the fake, not installed yet, whose channel ``C2`` is its own."""
    async with contextlib.AsyncExitStack() as stack:
        api = await stack.enter_async_context(FakeSlackApi())
        second = api.add_workspace(T2, channels=(C2,))
        api.installs.channel_teams[CHANNEL] = TEAM_ID
        toolbox = Toolbox([*default_toolbox(), Printenv(api)])
        ws = await stack.enter_async_context(
            slack_workspace(settings, model, api=api, toolbox=toolbox, transport=transport)  # type: ignore[arg-type]
        )
        yield ws, second


async def install(ws: Workspace, base: str) -> aiohttp.ClientResponse:
    """A browser installs the app in ``T2``: ``base`` + ``/slack/install``, Slack's consent
    page, the redirect with the state and a code; the last response (read)."""
    ws.api.consent(T2)
    ws.api.installs.redirect_url = f"{base}/slack/oauth_redirect"
    jar = aiohttp.CookieJar(unsafe=True, treat_as_secure_origin=base)
    async with aiohttp.ClientSession(cookie_jar=jar) as browser:
        async with asyncio.timeout(WAIT):
            response = await browser.get(f"{base}/slack/install")
            await response.read()
    return response


def raw_row(settings: Settings, team: str) -> tuple[str, str, str]:
    """``(bot_token, removed_why, scopes)`` of ``team``'s install as the database file
    holds it, read with ``sqlite3`` (not through the store)."""
    path = settings.database_url.removeprefix("sqlite+aiosqlite:///")
    with contextlib.closing(sqlite3.connect(path)) as db:
        row = db.execute(
            "SELECT bot_token, removed_why, scopes FROM installations WHERE team = ?", (team,)
        ).fetchone()
    assert row is not None, f"no install of {team}"
    return row


def second_mention(second: FakeWorkspace, ts: str, text: str) -> dict[str, Any]:
    """An ``app_mention`` in ``C2`` of the second workspace (no Enterprise Grid)."""
    body = event_body("app_mention")
    body.pop("enterprise_id", None)
    body.update(team_id=T2, authorizations=[{"team_id": T2, "user_id": second.bot_user_id}])
    body["event"].update(
        text=f"<@{second.bot_user_id}> {text}", user="U0CAROL001", ts=ts, event_ts=ts
    )
    body["event"].update(team=T2, channel=C2)
    body["event"].pop("blocks", None)
    return body


def app_event(kind: str, team: str, **event: Any) -> dict[str, Any]:
    """An Events API body of ``kind`` for ``team`` (app_uninstalled, tokens_revoked)."""
    body = copy.deepcopy(event_body("app_mention"))
    body.pop("enterprise_id", None)
    body.pop("authorizations", None)
    body.update(team_id=team, event={"type": kind, **event})
    return body


async def posted_answer(ws: Workspace, channel: str, thread: str, text: str) -> dict[str, Any]:
    """The bot's message holding ``text`` in ``thread`` of ``channel``, once it is there."""
    found: list[dict[str, Any]] = []

    def there() -> bool:
        found[:] = [m for m in ws.api.thread(channel, thread) if text in m.get("text", "")]
        return bool(found)

    await wait_for(there)
    return found[-1]


async def test_an_install_through_slacks_flow_answers_that_workspace_with_its_own_token(
    install_settings: Settings,
) -> None:
    model = ScriptedModel(
        [
            finish("Answered in the first workspace."),
            ScriptedTurn(calls=[ScriptedCall("printenv", {})]),
            finish("Your token is xoxb-t0second01-fake-installed-token-0002, keep it safe."),
        ]
    )
    async with two_workspaces(install_settings, model) as (ws, second):
        base = f"http://127.0.0.1:{ws.adapter.port}"
        response = await install(ws, base)

        assert (response.status, response.url.path) == (200, "/slack/oauth_redirect")
        [visit] = ws.api.installs.authorize_visits
        assert visit["client_id"] == CLIENT_ID and visit["state"]
        assert visit["scope"].split(",") == list(BOT_SCOPES)
        [access] = ws.api.calls_of("oauth.v2.access")
        assert access.ok and access.args["code"].startswith("fake-code-")
        sealed, removed, _scopes = raw_row(install_settings, T2)
        assert second.token not in sealed and not removed  # sealed at rest
        keys = install_settings.sealing_keys()
        assert Sealer(keys).open(sealed) == second.token

        # The first workspace's mention is answered with SLACK_BOT_TOKEN, as before.
        first = await ws.mention("what is up?")
        await posted_answer(ws, CHANNEL, first, "Answered in the first workspace.")
        # The second workspace's mention is answered there, with its own token.
        ts = str(ws.api.add_message(C2, "hi", user="U0CAROL001")["ts"])
        delivery = await ws.deliver("events_api", second_mention(second, ts, "print the env"))
        assert delivery.status == 200
        await ws.settle()
        answer = await posted_answer(ws, C2, ts, "keep it safe")

        assert answer["user"] == second.bot_user_id
        in_second = [c for c in ws.api.calls if c.args.get("channel") == C2]
        in_first = [c for c in ws.api.calls if c.args.get("channel") == CHANNEL]
        assert in_second and {c.token for c in in_second} == {second.token}
        assert in_first and {c.token for c in in_first} == {"xoxb-test"}
        assert all(c.ok for c in in_second + in_first)
        # The new token is redacted, in the tool's output and in the model's text.
        assert answer["text"].startswith(f"✅ Your token is {MARK}, keep it safe.")
        assert not any(second.token in m.get("text", "") for m in ws.api.messages(C2))
        assert "SLACK_BOT_TOKEN=" + MARK in repr(model.requests[2].messages)
        assert second.token not in repr(model.requests[2].messages)
        for conversation in await ws.app.store.threads.conversations():
            snapshot = await ws.app.store.journal.load(conversation.id)
            results = [r.entry for r in snapshot.journal if isinstance(r.entry, ToolResultEntry)]
            assert second.token not in repr(results)  # stored redacted
        assert any(MARK in repr(r) for r in results)


async def test_an_uninstall_removes_the_install_and_that_workspaces_events_are_ignored(
    install_settings: Settings,
) -> None:
    model = ScriptedModel([finish("Still here.")])
    async with two_workspaces(install_settings, model) as (ws, second):
        await install(ws, f"http://127.0.0.1:{ws.adapter.port}")
        assert raw_row(install_settings, T2)[0]

        delivery = await ws.deliver("events_api", app_event("app_uninstalled", T2))
        assert delivery.status == 200
        await ws.settle()
        ws.api.revoke(T2)  # Slack revokes the tokens of an uninstalled app

        assert raw_row(install_settings, T2)[:2] == ("", "app_uninstalled")
        seen = len(ws.api.calls)
        ts = str(ws.api.add_message(C2, "hello?", user="U0CAROL001")["ts"])
        delivery = await ws.deliver("events_api", second_mention(second, ts, "are you there?"))
        await ws.settle()

        assert delivery.status == 200  # acknowledged, and nothing else
        assert await ws.app.store.threads.conversations() == []
        assert [c.method for c in ws.api.calls[seen:]] == []
        assert ws.api.messages(C2) == [
            m for m in ws.api.messages(C2) if m["user"] != second.bot_user_id
        ]
        # The workspace of SLACK_BOT_TOKEN is not touched by it.
        root = await ws.mention("are you still here?")
        await posted_answer(ws, CHANNEL, root, "Still here.")


async def test_a_revoked_bot_token_removes_the_install_too(install_settings: Settings) -> None:
    async with two_workspaces(install_settings, ScriptedModel([])) as (ws, second):
        await install(ws, f"http://127.0.0.1:{ws.adapter.port}")

        revoked = app_event("tokens_revoked", T2, tokens={"bot": [second.bot_user_id]})
        await ws.deliver("events_api", revoked)
        await ws.settle()

        assert raw_row(install_settings, T2)[:2] == ("", "tokens_revoked")
        assert ws.app.installs is not None
        assert [i.team for i in ws.app.installs.known()] == []


async def test_a_forged_or_replayed_state_installs_nothing(install_settings: Settings) -> None:
    async with two_workspaces(install_settings, ScriptedModel([])) as (ws, _second):
        base = f"http://127.0.0.1:{ws.adapter.port}"
        ws.api.installs.redirect_url = f"{base}/slack/oauth_redirect"
        async with aiohttp.ClientSession() as browser:
            forged = await browser.get(
                f"{base}/slack/oauth_redirect",
                params={"code": "stolen", "state": "forged"},
                headers={"Cookie": "slack-app-oauth-state=forged"},
            )
            await forged.read()
        assert forged.status == 401
        assert await install(ws, base) is not None
        [visit] = ws.api.installs.authorize_visits
        async with aiohttp.ClientSession() as browser:  # the same state a second time
            replayed = await browser.get(
                f"{base}/slack/oauth_redirect",
                params={"code": "fake-code-0009", "state": visit["state"]},
                headers={"Cookie": f"slack-app-oauth-state={visit['state']}"},
            )
            await replayed.read()
        assert replayed.status == 401
        assert len(ws.api.calls_of("oauth.v2.access")) == 1  # the real install only


async def test_in_socket_mode_the_install_paths_are_on_the_operations_address(
    install_settings: Settings,
) -> None:
    async with two_workspaces(install_settings, ScriptedModel([]), "socket") as (ws, second):
        assert ws.app.metrics is not None
        ops = Operations(
            host="127.0.0.1",
            port=0,
            health=ws.app.store.health,
            metrics=ws.app.metrics,
            platforms={},
            clock=utc_now,
        )
        for path, page in ws.adapter.oauth_routes.items():
            ops.add_page(path, page)
        address = await ops.start()
        try:
            response = await install(ws, address)
        finally:
            await ops.close()

        assert (response.status, response.url.path) == (200, "/slack/oauth_redirect")
        sealed = raw_row(install_settings, T2)[0]
        assert Sealer(install_settings.sealing_keys()).open(sealed) == second.token


def test_the_install_asks_for_the_manifests_bot_scopes() -> None:
    yaml = pytest.importorskip("yaml")
    manifest = yaml.safe_load(
        (Path(__file__).parents[1] / "adapters" / "slack" / "manifest.yaml").read_text()
    )
    assert tuple(manifest["oauth_config"]["scopes"]["bot"]) == BOT_SCOPES
    events = manifest["settings"]["event_subscriptions"]["bot_events"]
    assert {"app_uninstalled", "tokens_revoked"} <= set(events)
