"""The audit trail and ``threadbot audit`` (issue 33, "Audit"; docs/architecture.md, "The
audit trail").

On Slack, with the real bolt app and slack-sdk against the fake and the store on a SQLite
file: Bob, who may not approve, reacts ✅ to Alice's plan and is refused, and his ``/stop``
stops nothing; Alice approves it with ✅, picks an option of the question with its button,
and stops the run with ``/stop``; Bob then asks for something himself, revises his plan
with a reply, reacts ✅ to the replaced version and is refused, and rejects the new one
with its button.
``threadbot audit --json``, the command in its own process, lists all of it oldest first,
each entry with its means, the refused ones with their reasons; ``--since``,
``--conversation`` and ``--channel`` filter, the lines are aligned, and the command leaves
the database file as it was (it opens it read-only). Slack's own stop button is a
``native_stop``; the same story on Slack, Discord and the console says button where each
has buttons and reaction where the console has none; the console's ``+✅ N.K`` is a
reaction.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from adapters.console import ConsoleAdapter
from bot.app import build
from bot.audit_report import HEAD
from conversations.store import migrate
from conversations.store.sql import create_engine
from conversations.store.sql.database import create_read_only_engine
from core.models.scripted import ScriptedCall, ScriptedModel, ScriptedTurn
from core.vocabulary.requests import RequestKind
from tests.cli_harness import threadbot
from tests.conftest import wait_for
from tests.platform_threads import PEOPLE, on
from tests.slack_harness import ALICE, BOB, CHANNEL, WAIT, slack_workspace
from tests.test_decided_messages import gated_pair, proposes
from tests.test_discord_story import _restore_discord_py  # noqa: F401  (restores discord.py)
from tests.test_slack_sessions import stopped_body
from tests.test_slack_story import plan_buttons

FIELDS = ("request_kind", "version", "user_id", "means", "outcome", "reason")


def asks(question: str, options: list[str] | None = None) -> ScriptedTurn:
    said: dict[str, Any] = {"question": question}
    if options is not None:
        said["options"] = options
    return ScriptedTurn(calls=[ScriptedCall("ask_user", said)])


def audit(cwd: Path, url: str, *args: str) -> Any:
    """``threadbot audit --json ARGS`` in its own process against ``url``: the list."""
    done = threadbot(cwd, "audit", "--json", *args, env={"THREADBOT_DATABASE_URL": url})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def shown(entries: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [tuple(e[f] for f in FIELDS) for e in entries]


def fingerprint(file: Path) -> tuple[str, int]:
    return hashlib.sha256(file.read_bytes()).hexdigest(), file.stat().st_mtime_ns


# --- the Slack story ----------------------------------------------------------------------


async def test_threadbot_audit_lists_the_story_s_decisions_and_refusals_in_order(
    sqlite_settings, tmp_path: Path
) -> None:
    url = sqlite_settings.database_url
    model = ScriptedModel(
        [
            proposes("Reproduce the flaky login test", "Fix the fixture"),
            asks("Staging or production database?", ["staging", "prod"]),
            asks("Anything else to check?"),
            proposes("Clean the build"),
            proposes("Clean the build on staging"),
        ]
    )
    async with slack_workspace(sqlite_settings, model) as ws:
        first = await ws.mention("please fix the flaky login test")
        plan = ws.post(first, "📋 Plan (v1)")
        await ws.react(plan["ts"], by=BOB)  # not the requester, and no approver
        assert f"Only the requester or an approver can decide this, <@{BOB}>." in [
            m["text"] for m in ws.posts(first)
        ]
        await ws.slash("/stop", by=BOB)  # nothing here is his to stop
        [told] = ws.calls("chat.postEphemeral")
        assert told.args["text"] == "Nothing you may stop is running here."
        await ws.react(plan["ts"], by=ALICE)
        question = ws.post(first, "❓ Staging or production database?")
        await ws.press(question, plan_buttons(question)["1) staging"], by=ALICE)
        ws.post(first, "❓ Anything else to check?")
        await ws.slash("/stop", by=ALICE)
        ws.post(first, f"⏹ Stopped by <@{ALICE}>.")

        second = await ws.mention("please clean the build", by=BOB)
        replaced = ws.post(second, "📋 Plan (v1)")
        await ws.reply(second, "on staging only", by=BOB)
        newer = ws.post(second, "📋 Plan (v2)")
        await ws.react(replaced["ts"], by=BOB)
        assert "That plan was replaced by a newer version." in [m["text"] for m in ws.posts(second)]
        await ws.press(newer, plan_buttons(newer)["Reject"], by=BOB)
        ws.post(second, "❓ What should change in plan v2?")

        a, b = await ws.snapshot(first), await ws.snapshot(second)
        plan_a, asked = a.requests[0], a.requests[1]
        v1, v2 = [r for r in b.requests if r.kind is RequestKind.PLAN_APPROVAL]

    everything = audit(tmp_path, url)
    assert shown(everything) == [
        ("plan_approval", 1, BOB, "reaction", "refused", "not an approver"),
        ("stop", None, BOB, "command", "refused", "nothing they may stop here"),
        ("plan_approval", 1, ALICE, "reaction", "approved", "run resumed"),
        ("question", None, ALICE, "button", "chose", "option 1; run resumed"),
        ("stop", None, ALICE, "command", "stopped", "run stopped"),
        ("plan_approval", 1, BOB, "reply", "revised", "run resumed"),
        ("plan_approval", 1, BOB, "reaction", "refused", "stale version"),
        ("plan_approval", 2, BOB, "button", "rejected", "asked what should change"),
    ]
    assert [(e["conversation"], e["request_id"]) for e in everything] == [
        (a.id, plan_a.id),
        (None, None),  # a /stop in the channel, about no conversation
        (a.id, plan_a.id),
        (a.id, asked.id),
        (a.id, None),
        (b.id, v1.id),
        (b.id, v1.id),
        (b.id, v2.id),
    ]
    assert {(e["platform"], e["workspace"], e["channel"]) for e in everything} == {
        ("slack", "T0AGT00001", CHANNEL)
    }
    ats = [e["at"] for e in everything]
    times = [datetime.fromisoformat(at) for at in ats]  # ISO 8601, UTC
    assert times == sorted(times) and {t.utcoffset() for t in times} == {timedelta(0)}

    assert audit(tmp_path, url, "--since", ats[3]) == everything[3:]
    assert audit(tmp_path, url, "--conversation", b.id) == everything[5:]
    assert audit(tmp_path, url, "--conversation", a.id, "--since", ats[4]) == [everything[4]]
    assert audit(tmp_path, url, "--channel", CHANNEL) == everything
    assert audit(tmp_path, url, "--channel", "C0ELSEWHERE") == []

    database = Path(url.removeprefix("sqlite+aiosqlite:///"))
    before = fingerprint(database)
    done = threadbot(tmp_path, "audit", env={"THREADBOT_DATABASE_URL": url})
    assert done.returncode == 0, done.stderr
    assert fingerprint(database) == before  # it only read
    header, *lines = done.stdout.splitlines()
    assert header.split() == [*HEAD, "reason"]
    assert len(lines) == len(everything)
    starts = [header.index(column) for column in (*HEAD[1:], "reason")]
    for line in lines:  # every column starts where its heading does
        assert all(line[s - 2 : s] == "  " and line[s] != " " for s in starts), line
    assert lines[0].split()[1:] == [
        a.id,
        CHANNEL,
        "plan_approval",
        plan_a.id,
        "v1",
        BOB,
        "reaction",
        "refused",
        "not",
        "an",
        "approver",
    ]
    assert lines[1].split()[1:4] == ["-", CHANNEL, "stop"]  # no conversation
    assert lines[4].split()[1:4] == [a.id, CHANNEL, "stop"]
    assert lines[4].split()[4:7] == ["-", ALICE, "command"]  # a stop names no version


async def test_slack_s_own_stop_button_is_a_native_stop_for_both_who_may_and_who_may_not(
    settings,
) -> None:
    gate = asyncio.Event()
    working = ScriptedTurn(calls=[ScriptedCall("list_files", {})], gate=gate)
    async with slack_workspace(settings, ScriptedModel([working])) as ws:
        root = await ws.mention("please fix the flaky login test", settle=False)
        await asyncio.wait_for(working.started.wait(), WAIT)  # the run is in the model

        await ws.deliver("events_api", stopped_body(root, by=BOB))
        await wait_for(
            lambda: any("Only the requester" in t for t in ws.api.posted_texts(CHANNEL, root))
        )
        await ws.deliver("events_api", stopped_body(root, by=ALICE))
        await ws.settle()
        gate.set()
        await ws.settle()

        snap = await ws.snapshot(root)
        entries = await ws.app.store.audit.entries(conversation_id=snap.id)
    assert [(e.request_kind, e.user_id, e.means, e.outcome, e.reason) for e in entries] == [
        ("stop", BOB, "native_stop", "refused", "not an approver"),
        ("stop", ALICE, "native_stop", "stopped", "run stopped"),
    ]


# --- each platform's means ----------------------------------------------------------------


@pytest.mark.parametrize("platform", ["slack", "discord", "console"])
async def test_each_platform_records_how_each_decision_was_made(platform, settings) -> None:
    model = ScriptedModel([proposes("Clean up"), gated_pair()])
    async with on(platform, settings, model) as t:
        await t.mention("please clean up the build")
        await t.approve_button(t.message("📋 Plan (v1)"), by="bob")  # the console: its ✅
        approval = t.message("🔐 May I run these?")
        await t.decide_call(approval, 1, True, by="alice")
        await t.stop(by="alice")
        assert t.posts()[-1].startswith("⏹ Stopped by")

        entries = await t.app.store.audit.entries()
    people = PEOPLE.get(platform, {"alice": "console:alice", "bob": "console:bob"})
    pressed = "reaction" if platform == "console" else "button"  # the console has no buttons
    assert [(e.request_kind, e.user_id, e.means, e.outcome, e.reason) for e in entries] == [
        ("plan_approval", people["bob"], pressed, "approved", "run resumed"),
        (
            "tool_approval",
            people["alice"],
            pressed,
            "allowed",
            "call 1; waiting for the other calls",
        ),
        ("stop", people["alice"], "command", "stopped", "run stopped"),
    ]


async def test_the_console_s_reaction_on_one_call_is_recorded_as_a_reaction(make_app) -> None:
    app = await make_app(ScriptedModel([proposes("Clean up"), gated_pair()]))
    out = io.StringIO()
    lines = "please clean up the build\n/as bob\n+✅ 2\n/as alice\n+✅ 2\n+❌ 4.2\n>1 stop\n"
    console = ConsoleAdapter(
        input=io.StringIO(lines), output=out, user="alice", wait_between_lines=True
    )
    app.add_sender(console)
    await app.start()
    assert await console.run(app.hub, settled=app.hub.settled) == 0

    transcript = out.getvalue()
    assert "[3] ↳1 threadbot: Only the requester or an approver can decide this, bob." in transcript
    assert "[4] ↳1 threadbot: 🔐 May I run these?" in transcript, transcript
    entries = await app.store.audit.entries()
    assert [(e.request_kind, e.user_id, e.means, e.outcome, e.reason) for e in entries] == [
        ("plan_approval", "console:bob", "reaction", "refused", "not an approver"),
        ("plan_approval", "console:alice", "reaction", "approved", "run resumed"),
        (
            "tool_approval",
            "console:alice",
            "reaction",
            "denied",
            "call 2; waiting for the other calls",
        ),
        ("stop", "console:alice", "reply", "stopped", "run stopped"),  # `stop` in the thread
    ]


# --- reading without writing ---------------------------------------------------------------


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
async def test_the_audit_s_engine_cannot_write(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    if backend == "sqlite":
        url = f"sqlite+aiosqlite:///{tmp_path / 'threadbot.db'}"
    else:
        url = request.getfixturevalue("postgres_url")
    writer = create_engine(url)
    await migrate.upgrade(writer)
    await writer.dispose()

    engine = create_read_only_engine(url)
    try:
        async with engine.connect() as connection:
            assert (await connection.execute(text("SELECT count(*) FROM audit"))).scalar() == 0
        with pytest.raises(DBAPIError, match=r"read-?only"):
            async with engine.begin() as connection:
                await connection.execute(
                    text("UPDATE conversations SET lifecycle = 'done' WHERE id = 'x'")
                )
    finally:
        await engine.dispose()


def test_a_missing_database_and_memory_are_said_and_exit_2(tmp_path: Path) -> None:
    gone = f"sqlite+aiosqlite:///{tmp_path / 'nothing.db'}"
    done = threadbot(tmp_path, "audit", env={"THREADBOT_DATABASE_URL": gone})
    assert (done.returncode, done.stdout) == (2, "")
    assert "no database there" in done.stderr
    assert not (tmp_path / "nothing.db").exists()  # nothing was made either

    done = threadbot(tmp_path, "audit", env={"THREADBOT_DATABASE_URL": "memory://"})
    assert done.returncode == 2
    assert "memory:// keeps no audit trail" in done.stderr


async def test_an_empty_trail_says_so(sqlite_settings, tmp_path: Path) -> None:
    app = await build(sqlite_settings, model=ScriptedModel([]))  # migrates the new file
    await app.close()
    url = sqlite_settings.database_url
    done = threadbot(tmp_path, "audit", env={"THREADBOT_DATABASE_URL": url})
    assert (done.returncode, done.stdout) == (0, "no decisions recorded\n")
    assert audit(tmp_path, url) == []
