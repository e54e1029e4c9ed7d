"""An input whose store read or write fails once is tried again, not dropped (issue 22).

On a loaded machine a conversation's job raised before its run could record
anything (a pooled connection not had within SQLAlchemy's 30 s); the conversation
queue logged "input failed" and went on, and the mention never got its answer until
the bot was restarted. Here the real SQL store fails once, where a job meets it
first, with the error it raises then: a mention's first commit (SQLite's "database
is locked" when another process writes for longer than its busy timeout), a commit
whose answer was lost after it went through, and for a new request in the thread
of an ended conversation, taking its lease and its first read (the pool's checkout
timeout). Each time the mention still gets its answer
through the bolt app and the Slack fake, and its request is journaled once.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, Literal

import pytest
from sqlalchemy.exc import OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from bot.settings import Settings
from conversations.store.sql import SqlStore
from core.models.scripted import ScriptedCall, ScriptedModel, ScriptedTurn
from core.vocabulary.entries import UserText
from core.vocabulary.lifecycle import Lifecycle
from tests.conftest import wait_for
from tests.slack_harness import slack_workspace

Where = Literal["its first commit", "after its commit"]
Later = Literal["lease", "first read"]

LOCKED = OperationalError("BEGIN IMMEDIATE", {}, Exception("database is locked"))
POOL = PoolTimeout("QueuePool limit of size 5 overflow 10 reached, connection timed out")


def failing_once(
    call: Callable[..., Awaitable[Any]], error: Exception, *, after: bool = False
) -> Callable[..., Awaitable[Any]]:
    """``call`` that raises ``error`` the first time: instead of running, or ``after`` it
    ran (a write that went through, whose answer was lost)."""
    failed = False

    async def once(*args: Any, **kwargs: Any) -> Any:
        nonlocal failed
        if failed:
            return await call(*args, **kwargs)
        failed = True
        if after:
            await call(*args, **kwargs)
        raise error

    return once


@pytest.mark.parametrize("where", ["its first commit", "after its commit"])
async def test_a_mention_whose_store_call_fails_once_still_gets_its_answer(
    sqlite_settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    where: Where,
) -> None:
    """A mention's run meets the store first at its first commit: the conversation was
    opened with its lease, and the run starts from it as opened (no read)."""
    finish = ScriptedTurn(calls=[ScriptedCall("finish", {"answer": "Found it."})])
    async with slack_workspace(sqlite_settings, ScriptedModel([finish])) as ws:
        store = ws.app.store
        assert isinstance(store, SqlStore)
        error, after = (LOCKED, False) if where == "its first commit" else (POOL, True)
        monkeypatch.setattr(
            store.journal, "commit", failing_once(store.journal.commit, error, after=after)
        )

        with caplog.at_level(logging.ERROR):
            root = await ws.mention("where is the flaky test?", settle=False)

            def answered() -> bool:
                return any(m["text"].startswith("✅ Found it.") for m in ws.posts(root))

            await wait_for(answered)

            async def done() -> bool:  # the answer is shown as it streams, before its commit
                return (await ws.snapshot(root)).status.lifecycle is Lifecycle.DONE

            await wait_for(done)

        snapshot = await ws.snapshot(root)
        said = [r.entry for r in snapshot.journal if isinstance(r.entry, UserText)]
        assert [(e.role, e.text) for e in said] == [("request", "where is the flaky test?")]
        assert [m["text"].split("\n")[0] for m in ws.posts(root)] == ["✅ Found it."]
        assert "trying again in 1 s" in caplog.text


@pytest.mark.parametrize("where", ["lease", "first read"])
async def test_a_new_request_in_a_thread_whose_store_call_fails_once_still_gets_its_answer(
    sqlite_settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    where: Later,
) -> None:
    """A message in the thread of an ended conversation starts a run that takes the
    lease and reads the conversation: each fails once, and the run still answers."""
    turns = [
        ScriptedTurn(calls=[ScriptedCall("finish", {"answer": "Found it."})]),
        ScriptedTurn(calls=[ScriptedCall("finish", {"answer": "Fixed it."})]),
    ]
    async with slack_workspace(sqlite_settings, ScriptedModel(turns)) as ws:
        store = ws.app.store
        assert isinstance(store, SqlStore)
        root = await ws.mention("where is the flaky test?")
        if where == "lease":
            failing = failing_once(store.leases.acquire_lease, LOCKED)
            monkeypatch.setattr(store.leases, "acquire_lease", failing)
        else:
            monkeypatch.setattr(store.journal, "load", failing_once(store.journal.load, POOL))

        with caplog.at_level(logging.ERROR):
            await ws.reply(root, "now fix it")

            def answered() -> bool:
                return any(m["text"].startswith("✅ Fixed it.") for m in ws.posts(root))

            await wait_for(answered)

        snapshot = await ws.snapshot(root)
        assert snapshot.status.lifecycle is Lifecycle.DONE
        said = [r.entry for r in snapshot.journal if isinstance(r.entry, UserText)]
        assert [(e.role, e.text) for e in said] == [
            ("request", "where is the flaky test?"),
            ("request", "now fix it"),
        ]
        firsts = [m["text"].split("\n")[0] for m in ws.posts(root)]
        assert firsts == ["✅ Found it.", "✅ Fixed it."]
        assert "trying again in 1 s" in caplog.text
