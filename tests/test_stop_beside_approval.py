"""An approval and a stop that arrive together: the run is stopped or, when it had
already answered, left answered; never both, never stuck, never an error.

In one process the approval's run (its worker takes the conversation's lease) and the
stop (which takes the lease itself when no worker holds it yet) used to take the
lease from each other: this process's own lease counts as takeable in the store, so
each fenced out the other's commits and the stop failed with ``LeaseLost``, leaving
the run going on (or, cancelled mid-acquisition, the conversation ``running`` with
nobody working on it). One holder at a time per conversation in a process
(:class:`conversations.store.leases.Leases`) settles it.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from pathlib import Path

import pytest

from bot.settings import Settings
from core.models.scripted import ScriptedCall, ScriptedModel, ScriptedTurn
from core.vocabulary.lifecycle import Lifecycle
from tests.slack_harness import ALICE, CHANNEL, slack_workspace

CONVERSATIONS = 12


async def test_an_approval_and_a_stop_sent_together_end_every_conversation_stopped(
    sqlite_settings: Settings, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    plan = ScriptedTurn(calls=[ScriptedCall("propose_plan", {"steps": ["look", "answer"]})])
    finish = ScriptedTurn(calls=[ScriptedCall("finish", {"answer": "All done here."})])
    model = ScriptedModel([plan] * CONVERSATIONS + [finish] * CONVERSATIONS)
    caplog.set_level(logging.WARNING)
    async with slack_workspace(sqlite_settings, model, transport="http") as ws:
        roots = [await ws.mention(f"task {i}") for i in range(CONVERSATIONS)]
        plans = [ws.post(root, "📋 Plan (v1)")["ts"] for root in roots]

        async def approve_and_stop(root: str, plan_ts: str) -> None:
            ts = str(ws.api.add_message(CHANNEL, "stop", user=ALICE, thread_ts=root)["ts"])
            await asyncio.gather(
                ws.deliver("events_api", ws.reaction_body(plan_ts, "white_check_mark")),
                ws.deliver("events_api", ws.message_body(ts, "stop", thread=root)),
            )

        await asyncio.gather(*(approve_and_stop(r, p) for r, p in zip(roots, plans, strict=True)))
        await ws.settle()

        for root in roots:
            # the stop ends the run, or came after the (instant) run had answered
            lifecycle = (await ws.snapshot(root)).status.lifecycle
            texts = [m["text"] for m in ws.posts(root)]
            stopped = [t for t in texts if t.startswith("⏹ Stopped by") and "📋" not in t]
            answered = [t for t in texts if t.startswith("✅ All done here.")]
            if lifecycle is Lifecycle.CANCELLED:
                assert (len(stopped), answered) == (1, []), texts
            else:
                assert (lifecycle, stopped, len(answered)) == (Lifecycle.DONE, [], 1), texts
        with sqlite3.connect(tmp_path / "threadbot.db") as db:
            held = db.execute("select count(*) from conversations where lease_owner is not null")
            assert held.fetchall() == [(0,)]
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == []
    assert "lost the lease" not in caplog.text
