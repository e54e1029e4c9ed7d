"""An input whose store read or write fails once is tried again, not dropped (issue 22).

On a loaded machine a conversation's job raised before its run could record
anything (a pooled connection not had within SQLAlchemy's 30 s); the conversation
queue logged "input failed" and went on, and the mention never got its answer until
the bot was restarted. Here the real SQL store fails once, where a job meets it
first, with the error it raises then: taking the conversation's lease (SQLite's
"database is locked" when another process writes for longer than its busy
timeout), the run's first read (the pool's checkout timeout), and a commit whose
answer was lost after it went through. Each time the mention still gets its answer
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

Where = Literal["lease", "first read", "after its commit"]

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


@pytest.mark.parametrize("where", ["lease", "first read", "after its commit"])
async def test_a_mention_whose_store_call_fails_once_still_gets_its_answer(
    sqlite_settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    where: Where,
) -> None:
    finish = ScriptedTurn(calls=[ScriptedCall("finish", {"answer": "Found it."})])
    async with slack_workspace(sqlite_settings, ScriptedModel([finish])) as ws:
        store = ws.app.store
        assert isinstance(store, SqlStore)
        if where == "lease":
            failing = failing_once(store.leases.acquire_lease, LOCKED)
            monkeypatch.setattr(store.leases, "acquire_lease", failing)
        elif where == "first read":
            monkeypatch.setattr(store.journal, "load", failing_once(store.journal.load, POOL))
        else:
            failing = failing_once(store.journal.commit, POOL, after=True)
            monkeypatch.setattr(store.journal, "commit", failing)

        with caplog.at_level(logging.ERROR):
            root = await ws.mention("where is the flaky test?", settle=False)

            def answered() -> bool:
                return any(m["text"].startswith("✅ Found it.") for m in ws.posts(root))

            await wait_for(answered)

        snapshot = await ws.snapshot(root)
        assert snapshot.status.lifecycle is Lifecycle.DONE
        said = [r.entry for r in snapshot.journal if isinstance(r.entry, UserText)]
        assert [(e.role, e.text) for e in said] == [("request", "where is the flaky test?")]
        assert [m["text"].split("\n")[0] for m in ws.posts(root)] == ["✅ Found it."]
        assert "trying again in 1 s" in caplog.text
