"""Runs in this process: one job at a time per conversation, each under its lease.

Inputs for a conversation are handled in order, one after another; only stop jumps
the queue (:class:`conversations.queue.ConversationQueue`). Each job runs holding
the conversation's lease (:class:`conversations.store.leases.Leases`), so its
commits are fenced: a job whose lease was taken over ends at its next commit.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from conversations import logcontext
from conversations.events import MessagePosted
from conversations.hub._chain import person_of
from conversations.queue import ConversationQueue, Job
from conversations.store.leases import Leases
from core.errors import LeaseLost
from core.inputs import Reply, Start
from core.run.engine import Engine

log = logging.getLogger("conversations.hub")


class Runs:
    """Queues the engine's work per conversation; ``queue`` is shared with the stopper."""

    def __init__(self, *, engine: Engine, leases: Leases) -> None:
        self._engine = engine
        self._leases = leases
        self.queue = ConversationQueue(around=self._hold)
        self._shutting_down = False

    def start(self, conversation_id: str, event: MessagePosted) -> None:
        """Queue the first run of a conversation a mention opened."""
        start = Start(
            text=event.text, author=person_of(event.author), delivery_key=event.delivery_key
        )
        self.queue.submit(
            conversation_id,
            Job(lambda: self._engine.start(conversation_id, start, self._inbox(conversation_id))),
        )

    def reply(self, conversation_id: str, reply: Reply) -> None:
        """Queue a reply in the thread (a run at work takes it as a note instead)."""
        self.queue.submit(
            conversation_id,
            Job(
                lambda: self._engine.reply(conversation_id, reply, self._inbox(conversation_id)),
                reply=reply,
            ),
        )

    def run(self, conversation_id: str) -> None:
        """Queue a run that goes on from the journal (after a decision, or a crash)."""
        self.queue.submit(
            conversation_id,
            Job(lambda: self._engine.run(conversation_id, self._inbox(conversation_id))),
        )

    def expire(self, conversation_id: str, request_id: str) -> None:
        """Queue the expiry of a request."""

        async def expire() -> None:
            await self._engine.expire(conversation_id, request_id)

        self.queue.submit(conversation_id, Job(expire))

    async def shutdown(self, grace: float) -> None:
        """Runs end at their next commit; those still going after ``grace`` seconds are
        cancelled (a running command is killed and recorded ``interrupted``)."""
        self._shutting_down = True
        self._engine.suspend()
        self.queue.pause()
        try:
            await asyncio.wait_for(self.queue.idle(), grace)
        except TimeoutError:
            log.warning("runs still going after %s s of shutdown; cancelling them", grace)
            await self.queue.close()

    def _inbox(self, conversation_id: str) -> Callable[[], list[Reply]]:
        return lambda: self.queue.take_replies(conversation_id)

    async def _hold(self, conversation_id: str, work: Callable[[], Awaitable[None]]) -> None:
        """Run one job of the conversation under its lease (the queue's ``around``)."""
        logcontext.conversation.set(conversation_id)  # this task runs only this job
        try:
            async with self._leases.held(conversation_id):
                try:
                    await work()
                except asyncio.CancelledError:
                    if self._shutting_down:
                        await asyncio.shield(self._interrupted(conversation_id))
                    raise
        except LeaseLost as exc:
            log.warning("%s; the run ended here", exc)

    async def _interrupted(self, conversation_id: str) -> None:
        try:
            await self._engine.interrupt(conversation_id, "the bot was shutting down")
        except LeaseLost as exc:
            log.warning("%s", exc)
