"""Slack agent sessions: a thread's session follows its conversation, and Slack's stop button
stops the run (docs/architecture.md, "Agent sessions").

The real bolt app and slack-sdk against the fakes (:mod:`tests.slack_harness`): the
Slack fake records every ``agents.sessions.setStatus``, so each test reads the statuses
a thread's session went through, in order, next to what was posted. The request and
answer shapes are Slack's (``tests/fixtures/slack/agent/``).
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
from pathlib import Path
from typing import Any

import pytest

from adapters.slack.outbound import session_call
from adapters.slack.sessions import AgentSessions
from conversations.events import PlatformRef, SetSessionStatus
from conversations.outbox._redact import redact_action
from conversations.sessions import SessionRows, session_status
from core.models.scripted import ScriptedCall, ScriptedModel, ScriptedTurn
from core.secrets import Redactor
from core.vocabulary import lifecycle
from core.vocabulary.entries import UserText
from core.vocabulary.journal import Change
from core.vocabulary.lifecycle import Lifecycle, Status, WaitKind
from core.vocabulary.people import Person
from tests.conftest import wait_for
from tests.fakes.slack_api import TEAM_ID
from tests.slack_harness import (
    ALICE,
    BOB,
    CHANNEL,
    WAIT,
    Transport,
    Workspace,
    slack_workspace,
)

AGENT = Path(__file__).parent / "fixtures" / "slack" / "agent"
SET_STATUS = "agents.sessions.setStatus"
NO_STOP_BUTTON = "missing_agent_session_stopped_event_subscription"


def agent_fixture(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((AGENT / f"{name}.json").read_text(encoding="utf-8"))
    return data


def plan(gate: asyncio.Event | None = None) -> ScriptedTurn:
    steps = {"steps": ["Reproduce the flaky login test", "Fix the fixture"]}
    return ScriptedTurn(calls=[ScriptedCall("propose_plan", steps)], gate=gate)


def finish(answer: str = "The login test is fixed.") -> ScriptedTurn:
    return ScriptedTurn(calls=[ScriptedCall("finish", {"answer": answer})])


def statuses(ws: Workspace, root: str) -> list[str]:
    return ws.api.session_statuses(CHANNEL, root)


async def sessions_settled(ws: Workspace, root: str, last: str | None) -> None:
    """Wait until the outbox is empty and the thread's session was last set to ``last``
    (None: whatever it was)."""

    async def done() -> bool:
        pending = [r for r in await ws.app.store.outbox.rows() if r.state == "pending"]
        return not pending and (last is None or statuses(ws, root)[-1:] == [last])

    await wait_for(done, seconds=WAIT * 6)


def stopped_body(root: str, *, by: str) -> dict[str, Any]:
    """Slack's ``agent_session_stopped`` (the fixture) for ``root``'s session, from ``by``."""
    body = copy.deepcopy(agent_fixture("agent_session_stopped")["payload"])
    body["team_id"] = TEAM_ID
    body["event_id"] = f"Ev0STOP{root.replace('.', '')}{by}"
    body["event"].update(channel=CHANNEL, thread_ts=root, user=by)
    return body


# --- the story, status by status ------------------------------------------------------


async def test_the_session_follows_the_story_mention_plan_approval_answer(settings) -> None:
    gate = asyncio.Event()
    working = ScriptedTurn(calls=[ScriptedCall("list_files", {})], gate=gate)
    model = ScriptedModel([plan(), working, finish()])
    async with slack_workspace(settings, model) as ws:
        root = await ws.mention("Find why the login test is flaky\nit fails one run in ten")
        plan_message = ws.post(root, "📋 Plan (v1)")
        await sessions_settled(ws, root, "suspended")
        assert statuses(ws, root) == ["processing", "suspended"]

        await ws.deliver("events_api", ws.reaction_body(plan_message["ts"], by=ALICE))
        await asyncio.wait_for(working.started.wait(), WAIT)  # approved: the model works
        await wait_for(lambda: statuses(ws, root)[-1:] == ["processing"])
        assert statuses(ws, root) == ["processing", "suspended", "processing"]

        gate.set()
        await sessions_settled(ws, root, "active")
        ws.post(root, "✅ The login test is fixed.")
        assert statuses(ws, root) == ["processing", "suspended", "processing", "active"]

        calls = ws.calls(SET_STATUS)
        request = agent_fixture("agents_sessions_setStatus_request")["payload"]
        assert set(calls[0].args) == set(request)  # Slack's shape: the fixture's fields
        assert calls[0].args == {
            "channel_id": CHANNEL,
            "thread_ts": root,
            "status": "processing",
            "title": "Find why the login test is flaky",
            "initiator_user_id": ALICE,
        }
        assert all("title" not in c.args for c in calls[1:])  # a title names a new session
        assert ws.api.sessions[(CHANNEL, root)]["title"] == "Find why the login test is flaky"

        # in the thread's order: the plan is posted before the session is suspended,
        # and the answer before it is active
        seq = {c.seq: c for c in ws.api.calls if c.method in (SET_STATUS, "chat.postMessage")}
        shown = [
            c.args["status"] if c.method == SET_STATUS else c.args["text"].split()[0]
            for _, c in sorted(seq.items())
        ]
        assert shown == ["processing", "📋", "suspended", "processing", "⏳", "✅", "active"]


async def test_a_stop_closes_the_session(settings) -> None:
    gate = asyncio.Event()
    first = plan(gate)
    async with slack_workspace(settings, ScriptedModel([first])) as ws:
        root = await ws.mention("please fix the flaky login test", settle=False)
        await asyncio.wait_for(first.started.wait(), WAIT)
        await wait_for(lambda: statuses(ws, root) == ["processing"])

        await ws.slash("/stop")
        gate.set()
        await ws.settle()

        await sessions_settled(ws, root, "closed")
        assert statuses(ws, root) == ["processing", "closed"]
        assert ws.api.posted_texts(CHANNEL, root) == [f"⏹ Stopped by <@{ALICE}>."]


# --- Slack's stop button ---------------------------------------------------------------


@pytest.mark.parametrize("transport", ["http", "socket"])
async def test_the_stop_button_stops_the_run_and_closes_the_session(
    settings, transport: Transport
) -> None:
    gate = asyncio.Event()
    first = plan(gate)
    async with slack_workspace(settings, ScriptedModel([first]), transport=transport) as ws:
        root = await ws.mention("please fix the flaky login test", settle=False)
        await asyncio.wait_for(first.started.wait(), WAIT)  # the run is in the model
        await wait_for(lambda: statuses(ws, root) == ["processing"])

        delivery = await ws.deliver("events_api", stopped_body(root, by=ALICE))
        await ws.settle()  # the stop is carried out while the model still works
        gate.set()

        assert delivery.status == 200  # HTTP answered, or the envelope acked
        snap = await ws.snapshot(root)
        assert snap.status.lifecycle is Lifecycle.CANCELLED
        await sessions_settled(ws, root, "closed")
        assert statuses(ws, root) == ["processing", "closed"]  # out of processing: ours to do
        assert ws.api.posted_texts(CHANNEL, root) == [f"⏹ Stopped by <@{ALICE}>."]


async def test_the_stop_button_from_who_may_not_stop_is_refused(settings) -> None:
    gate = asyncio.Event()
    running = ScriptedTurn(calls=[ScriptedCall("list_files", {})], gate=gate)
    model = ScriptedModel([running, finish()])
    async with slack_workspace(settings, model) as ws:
        root = await ws.mention("please fix the flaky login test", settle=False)
        await asyncio.wait_for(running.started.wait(), WAIT)

        await ws.deliver("events_api", stopped_body(root, by=BOB))
        await wait_for(
            lambda: any("Only the requester" in t for t in ws.api.posted_texts(CHANNEL, root))
        )
        gate.set()

        await sessions_settled(ws, root, "active")
        texts = ws.api.posted_texts(CHANNEL, root)
        assert f"Only the requester or an approver can stop this, <@{BOB}>." in texts
        assert texts[-1].startswith("✅ The login test is fixed.")
        assert not any("Stopped" in t for t in texts)
        assert statuses(ws, root) == ["processing", "active"]


# --- where Slack refuses or warns ---------------------------------------------------------


async def test_a_refused_session_leaves_the_story_working_and_is_logged_once(
    settings, caplog: pytest.LogCaptureFixture
) -> None:
    model = ScriptedModel([finish("first"), finish("second")])
    async with slack_workspace(settings, model) as ws:
        ws.api.fail(SET_STATUS, "not_allowed_token_type", times=5)
        with caplog.at_level(logging.WARNING, logger="adapters.slack.sessions"):
            root = await ws.mention("please fix the flaky login test")
            await wait_for(lambda: len(ws.posts(root)) == 1)
            await ws.reply(root, "and the logout test?")
            await wait_for(lambda: len(ws.posts(root)) == 2)
            await sessions_settled(ws, root, None)

        assert [p["text"].split("\n")[0] for p in ws.posts(root)] == ["✅ first", "✅ second"]
        refused = ws.calls(SET_STATUS)
        assert len(refused) == 1 and not refused[0].ok  # one try, then none in the workspace
        said = [
            r.getMessage() for r in caplog.records if "agent sessions are off" in r.getMessage()
        ]
        assert len(said) == 1 and TEAM_ID in said[0] and "not_allowed_token_type" in said[0]
        rows = await ws.app.store.outbox.rows()
        assert {r.state for r in rows} == {"sent"}  # no "could not deliver" report either
        assert not any("could not" in t for t in ws.api.posted_texts(CHANNEL, root))


async def test_a_missing_stop_subscription_keeps_sessions_and_is_logged_once(
    settings, caplog: pytest.LogCaptureFixture
) -> None:
    answer = agent_fixture("agents_sessions_setStatus_response")["payload"]
    async with slack_workspace(settings, ScriptedModel([plan()])) as ws:
        ws.api.session_warning = answer["warning"]
        with caplog.at_level(logging.WARNING, logger="adapters.slack.sessions"):
            root = await ws.mention("please fix the flaky login test")
            await sessions_settled(ws, root, "suspended")

        assert statuses(ws, root) == ["processing", "suspended"]  # still on
        said = [r.getMessage() for r in caplog.records if NO_STOP_BUTTON in r.getMessage()]
        assert len(said) == 1 and "no stop button" in said[0]


# --- the pieces -----------------------------------------------------------------------------


def test_each_lifecycle_status_has_its_session_status() -> None:
    assert session_status(lifecycle.RUNNING) == "processing"
    for kind in WaitKind:
        assert session_status(Status(lifecycle=Lifecycle.WAITING, wait=kind)) == "suspended"
    assert session_status(lifecycle.DONE) == "active"
    assert session_status(lifecycle.FAILED) == "active"
    assert session_status(lifecycle.CANCELLED) == "closed"
    assert session_status(lifecycle.IDLE) is None


def test_session_rows_only_for_status_changes_on_the_platforms_given() -> None:
    rows = SessionRows(platforms=frozenset({"slack"}))
    slack = PlatformRef(
        platform="slack", workspace=TEAM_ID, channel=CHANNEL, thread="1.2", user="U"
    )
    discord = slack.model_copy(update={"platform": "discord"})
    words = UserText(author=Person(id=ALICE, name="alice"), text="  \n" + "x" * 300)
    start = Change(entries=(words,), status=lifecycle.RUNNING)

    assert rows(slack, Change(entries=(words,))) == ()  # no status: nothing
    assert rows(discord, start) == ()
    [row] = rows(slack, start)
    assert isinstance(row.action, SetSessionStatus)
    assert row.action.status == "processing"
    assert row.action.initiator == ALICE
    assert len(row.action.title) == 100 and row.action.title.endswith("…")
    assert row.action.ref.user is None


def test_the_title_is_redacted_and_the_call_has_slacks_shape() -> None:
    ref = PlatformRef(platform="slack", workspace=TEAM_ID, channel=CHANNEL, thread="1.2")
    action = SetSessionStatus(ref=ref, status="processing", title="use sk-secret-123 here")
    redacted = redact_action(action, Redactor({"MODEL_KEY": "sk-secret-123"}))
    assert isinstance(redacted, SetSessionStatus)
    assert "sk-secret-123" not in redacted.title
    call = session_call(redacted)
    assert call.method == SET_STATUS
    assert call.args == {
        "channel_id": CHANNEL,
        "thread_ts": "1.2",
        "status": "processing",
        "title": redacted.title,
    }


def test_warnings_are_read_from_both_places_and_said_once_per_workspace(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sessions = AgentSessions()
    answer = agent_fixture("agents_sessions_setStatus_response")["payload"]
    with caplog.at_level(logging.WARNING, logger="adapters.slack.sessions"):
        sessions.answered("T1", answer)
        sessions.answered("T1", answer)
        sessions.answered("T2", {"ok": True, "response_metadata": {"warnings": [NO_STOP_BUTTON]}})
        sessions.refused("T3", "not_allowed")
        sessions.refused("T3", "not_allowed")
    said = [r.getMessage() for r in caplog.records]
    assert len([m for m in said if NO_STOP_BUTTON in m]) == 2  # T1 once, T2 once
    assert len([m for m in said if "are off" in m]) == 1
    assert sessions.allowed("T1") and not sessions.allowed("T3")


def test_the_manifest_declares_the_agent_and_subscribes_to_its_stop_button() -> None:
    import yaml

    manifest_path = Path(__file__).parent.parent / "adapters" / "slack" / "manifest.yaml"
    manifest = yaml.safe_load(manifest_path.read_text(encoding="utf-8"))
    assert manifest["features"]["agent_view"]["agent_description"]
    assert "assistant:write" in manifest["oauth_config"]["scopes"]["bot"]
    assert "agent_session_stopped" in manifest["settings"]["event_subscriptions"]["bot_events"]


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
async def test_a_commit_writes_its_session_row_after_its_own_rows(
    backend: str, tmp_path: Path
) -> None:
    from conversations.render import render_event
    from conversations.store import migrate
    from conversations.store.memory import MemoryStore
    from conversations.store.sql import SqlStore, create_engine
    from core.vocabulary.run_events import PlanProposed

    sessions = SessionRows(platforms=frozenset({"slack"}))
    if backend == "memory":
        store: Any = MemoryStore(render=render_event, sessions=sessions)
    else:
        engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'sessions.db'}")
        await migrate.upgrade(engine)
        store = SqlStore(engine=engine, render=render_event, sessions=sessions)
    try:
        thread = PlatformRef(platform="slack", workspace=TEAM_ID, channel=CHANNEL, thread="1.0")
        cid = await store.threads.open_conversation(
            delivery_key="Ev1",
            binding=thread,
            requester=Person(id=ALICE, name="alice"),
            workspace_root=tmp_path,
            position="planning",
        )
        words = UserText(author=Person(id=ALICE, name="alice"), text="Fix the login test")
        await store.journal.commit(cid, Change(entries=(words,), status=lifecycle.RUNNING))
        await store.journal.commit(cid, Change(position="planning"))  # no status: no row
        plan_event = PlanProposed(request_id="r1", version=1, steps=("a",))
        waiting = Status(lifecycle=Lifecycle.WAITING, wait=WaitKind.PLAN_APPROVAL)
        await store.journal.commit(cid, Change(events=(plan_event,), status=waiting))

        rows = await store.outbox.rows(cid)
        shown = [(r.purpose, getattr(r.action, "status", None)) for r in rows]
        assert shown == [("session", "processing"), ("milestone", None), ("session", "suspended")]
        first = rows[0].action
        assert isinstance(first, SetSessionStatus)  # read back whole from the store
        assert (first.title, first.initiator, first.ref.thread) == (
            "Fix the login test",
            ALICE,
            "1.0",
        )
    finally:
        await store.close()
