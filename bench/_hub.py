"""threadbot without a platform: the app fed straight through its hub, a sender that keeps
nothing.

For the benchmarks that measure the engine and the store rather than an adapter
(a long conversation, conversations left waiting): :func:`threadbot_on_hub` builds
the app (``bot.app.build``) on a new SQLite file with a :class:`NullSender` for the
``console`` platform, and :func:`mention` / :func:`approve` speak to its hub as an
adapter would.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from bench._agent import ANSWER
from conversations.events import Author, MessagePosted, PlatformRef, PostReply, ReactionChanged

PLATFORM = "console"
CHANNEL = "bench"
ALICE = Author(id="alice", name="alice")

_keys = itertools.count(1)


class NullSender:
    """A :class:`conversations.adapter.Sender` that sends nowhere and keeps nothing.

    A post gets the message id ``m<idempotency key>``. Only while a benchmark
    waits for a thread's answer (:meth:`answer_in`) is there an entry for it.
    """

    platform = PLATFORM

    def __init__(self) -> None:
        self._waiters: dict[str, asyncio.Future[float]] = {}

    def answer_in(self, thread: str) -> asyncio.Future[float]:
        """A future for the answer's post in ``thread``: ``loop.time()`` when it was sent."""
        future: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        self._waiters[thread] = future
        return future

    async def send(
        self, action: Any, *, idempotency_key: str, maybe_sent: bool = False
    ) -> str | None:
        """Return a message id for a post, None for anything else; tell a waiter."""
        if not isinstance(action, PostReply):
            return None
        if self._waiters and ANSWER in action.text and action.ref.thread in self._waiters:
            future = self._waiters.pop(action.ref.thread)
            if not future.done():
                future.set_result(asyncio.get_running_loop().time())
        return f"m{idempotency_key}"


@contextlib.asynccontextmanager
async def threadbot_on_hub(
    root: Path, *, model: Any, toolbox: Any = None, **settings: Any
) -> AsyncIterator[tuple[Any, NullSender]]:
    """The app on ``root / 'threadbot.db'`` and its :class:`NullSender`, started; closed after.

    ``settings`` override :class:`bot.settings.Settings` fields (defaults otherwise).
    """
    from bot.app import build
    from bot.settings import Settings

    config = Settings(
        database_url=f"sqlite+aiosqlite:///{root / 'threadbot.db'}",
        workspace_root=root / "workspaces",
        console_state=root / "console.jsonl",
        **settings,
    )
    app = await build(config, model=model, toolbox=toolbox)
    sender = NullSender()
    app.add_sender(sender)
    try:
        await app.start()
        yield app, sender
    finally:
        await app.close()


async def mention(app: Any, text: str = "please look into it") -> str:
    """Alice mentions the bot at the top of the channel; returns the new thread's id."""
    key = f"mention-{next(_keys)}"
    ref = PlatformRef(platform=PLATFORM, channel=CHANNEL, message=key, user=ALICE.id)
    event = MessagePosted(delivery_key=key, ref=ref, author=ALICE, text=text, mentions_bot=True)
    await app.hub.handle(event)
    return key


async def approve(app: Any, thread: str, plan_message: str) -> None:
    """Alice approves the plan posted as ``plan_message`` in ``thread`` with a reaction."""
    key = f"reaction-{next(_keys)}"
    ref = PlatformRef(
        platform=PLATFORM, channel=CHANNEL, thread=thread, message=plan_message, user=ALICE.id
    )
    event = ReactionChanged(delivery_key=key, ref=ref, author=ALICE, emoji="white_check_mark")
    await app.hub.handle(event)


def plan_messages(db: Path, threads: list[str]) -> dict[str, str]:
    """``{thread: plan message id}`` of open plan approvals, read from the database file."""
    found: dict[str, str] = {}
    with sqlite3.connect(db) as conn:
        for thread in threads:
            row = conn.execute(
                "select r.message_id from pending_requests r "
                "join conversations c on c.id = r.conversation_id "
                "where c.thread = ? and r.state = 'open' and r.kind = 'plan_approval'",
                (thread,),
            ).fetchone()
            if row is not None and row[0]:
                found[thread] = str(row[0])
    return found
