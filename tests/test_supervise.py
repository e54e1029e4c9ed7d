"""Supervised background work: a failing task is restarted with backoff, and gives up loudly.

The wrapper on its own (a fake clock and sleep record the pauses), the real
deliverer restarted after its store call failed, and a real bot process whose
deliverer keeps failing: it ends non-zero and names the task.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.exc import OperationalError

from bot.errors import GaveUp
from bot.supervise import Backoff, supervised
from conversations.events import OutboundAction, PlatformRef, PostReply
from conversations.store import Outgoing
from conversations.store.sql.failures import unreachable
from core.models.scripted import ScriptedModel
from core.vocabulary.people import Person
from tests import forkserver
from tests.conftest import wait_for

ROOT = Path(__file__).resolve().parents[1]


class FakeTime:
    """A clock that moves only when the supervised code sleeps."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def failing(times: int, then: Callable[[], Awaitable[None]] | None = None) -> Any:
    calls = {"n": 0}

    async def task() -> None:
        calls["n"] += 1
        if calls["n"] <= times:
            raise RuntimeError(f"failure {calls['n']}")
        if then is not None:
            await then()

    task.calls = calls  # type: ignore[attr-defined]
    return task


async def test_a_failing_task_is_restarted_with_growing_pauses_until_it_succeeds() -> None:
    time = FakeTime()
    task = failing(3)

    await supervised(
        "sweeper",
        task,
        Backoff(first=0.5, factor=2, longest=1.5, limit=5),
        clock=time.clock,
        sleep=time.sleep,
    )

    assert task.calls["n"] == 4
    assert time.sleeps == [0.5, 1.0, 1.5]


async def test_a_database_outage_is_retried_as_long_as_it_lasts_and_never_counts() -> None:
    time = FakeTime()
    calls = {"n": 0}

    async def deliverer() -> None:
        calls["n"] += 1
        if calls["n"] <= 20:  # a long outage: far past the limit of 2 restarts
            raise OperationalError("SELECT 1", {}, ConnectionRefusedError(111, "refused"))
        if calls["n"] <= 22:
            raise RuntimeError("the bot's own failure")  # these count again

    await supervised(
        "deliverer",
        deliverer,
        Backoff(first=1, factor=2, longest=30, limit=2, window=60),
        clock=time.clock,
        sleep=time.sleep,
        transient=unreachable,
    )

    assert calls["n"] == 23
    assert time.sleeps[:6] == [1, 2, 4, 8, 16, 30] and max(time.sleeps) == 30


async def test_too_many_restarts_within_the_window_give_up_naming_the_task() -> None:
    time = FakeTime()
    task = failing(100)

    with pytest.raises(GaveUp) as raised:
        await supervised(
            "deliverer",
            task,
            Backoff(first=1, limit=3, window=60),
            clock=time.clock,
            sleep=time.sleep,
        )

    assert task.calls["n"] == 4  # three restarts, then the fourth failure gives up
    assert "the deliverer task failed 4 times within 60 s" in str(raised.value)
    assert isinstance(raised.value.__cause__, RuntimeError)


async def test_failures_further_apart_than_the_window_never_give_up() -> None:
    time = FakeTime()

    async def slow_failure() -> None:
        time.now += 100  # up for 100 s, then fails
        if len(time.sleeps) < 10:
            raise RuntimeError("once in a while")

    await supervised(
        "lease renewal",
        slow_failure,
        Backoff(first=1, limit=2, window=60),
        clock=time.clock,
        sleep=time.sleep,
    )

    assert time.sleeps == [1] * 10  # healthy between failures: the pause starts over


async def test_cancelling_a_supervised_task_is_not_a_failure() -> None:
    started = asyncio.Event()

    async def forever() -> None:
        started.set()
        await asyncio.Event().wait()

    task = asyncio.create_task(supervised("sweeper", forever, Backoff()))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


class Recorder:
    platform = "test"

    def __init__(self) -> None:
        self.sent: list[OutboundAction] = []

    async def send(
        self, action: OutboundAction, *, idempotency_key: str, maybe_sent: bool = False
    ) -> str | None:
        self.sent.append(action)
        return f"m{len(self.sent)}"


@pytest.fixture
def settings(sqlite_settings: Any) -> Any:
    """SQLite: the test below makes the database itself fail."""
    return sqlite_settings


async def test_the_deliverer_restarts_after_its_store_failed_and_delivers_the_next_row(
    make_app,
) -> None:
    app = await make_app(ScriptedModel([]))
    app.backoff = Backoff(first=0.01, limit=5)
    sender = Recorder()
    app.add_sender(sender)
    failures = {"left": 1}

    def fail_once(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if "FROM outbox" in statement and failures["left"]:
            failures["left"] -= 1
            raise sqlite3.OperationalError("disk I/O error")

    event.listen(app.store.engine.sync_engine, "before_cursor_execute", fail_once)
    cid = await app.store.threads.open_conversation(
        delivery_key="k",
        binding=PlatformRef(platform="test", channel="c", thread="t"),
        requester=Person(id="U1", name="alice"),
        workspace_root=Path("workspaces"),
        position="planning",
    )
    assert cid is not None
    await app.start()
    await app.store.outbox.enqueue(
        cid,
        [
            Outgoing(
                PostReply(
                    ref=PlatformRef(platform="test", channel="c", thread="t"),
                    text="after the failure",
                )
            )
        ],
    )

    await wait_for(lambda: sender.sent)
    assert [a.text for a in sender.sent if isinstance(a, PostReply)] == ["after the failure"]
    assert failures["left"] == 0 and app.failure is None


def test_a_bot_whose_deliverer_keeps_failing_exits_non_zero_naming_it(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "THREADBOT_"))}
    env |= {
        "PYTHONPATH": str(ROOT),
        "THREADBOT_CONSOLE_WAIT": "no",
        "THREADBOT_RESTART_LIMIT": "2",
    }
    proc = forkserver.Popen(
        [sys.executable, "-m", "bot", "run"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env=env,
    )
    try:
        assert proc.stdout is not None
        assert "demo model" in proc.stdout.readline()  # started: the schema exists
        with sqlite3.connect(tmp_path / ".threadbot" / "threadbot.db") as db:
            db.execute("alter table outbox rename to outbox_gone")
        assert proc.stdin is not None
        proc.stdin.write("hello\n")  # the plan's outbox row cannot be written or read
        proc.stdin.flush()
        code = proc.wait(timeout=120)  # a loaded CI machine starts Python slowly
    finally:
        proc.kill()
    stderr = proc.stderr.read() if proc.stderr else ""
    assert code == 1, stderr
    assert "threadbot: the deliverer task failed 3 times" in stderr
