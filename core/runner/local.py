"""The local runner: each run an asyncio task in the bot process, over its engine.

The run's task is started from the caller's task, so it carries the caller's context
(the conversation's lease, which fences the run's commits, and the log context); its
commits are streamed back as they are made (:attr:`core.run.state.Run.watch`). A
caller that leaves the stream (its task cancelled: a stop) cancels the run's task
and waits for its end, as a stop did when the engine ran in the caller's own task.
docs/architecture.md, "Runners".
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

from core.run.engine import Engine
from core.runner.protocol import RunEnded, RunItem, RunKind, RunRequest, RunUpdate
from core.vocabulary.inputs import Inbox
from core.vocabulary.journal import Change
from core.vocabulary.lifecycle import Lifecycle

InboxFor = Callable[[str], Inbox]
"""``inbox_for(conversation_id)``: the messages that come while that conversation's run works."""


class LocalRunner:
    """Carries out runs with ``engine`` in this process (:class:`core.runner.protocol.Runner`).

    ``inbox_for`` gives each run the messages that arrive while it works (taken as
    notes at its turn boundaries); without it, none.
    """

    def __init__(self, engine: Engine, *, inbox_for: InboxFor | None = None) -> None:
        self._engine = engine
        self._inbox_for = inbox_for
        self._runs: dict[str, asyncio.Task[bool]] = {}

    async def run(self, request: RunRequest) -> AsyncIterator[RunItem]:
        """Carry out ``request`` (see :class:`core.runner.protocol.Runner`); raises what
        the run raised once its updates are out."""
        updates: asyncio.Queue[RunUpdate] = asyncio.Queue()
        last: list[Lifecycle] = []

        def watch(change: Change) -> None:
            lifecycle = change.status.lifecycle if change.status is not None else None
            if lifecycle is not None:
                last.append(lifecycle)
            updates.put_nowait(RunUpdate(events=change.events, lifecycle=lifecycle))

        task = asyncio.create_task(self._timed(request, watch), name=f"run-{request.run_id}")
        self._runs[request.run_id] = task
        try:
            while not task.done() or not updates.empty():
                async for update in _drained(updates, task):
                    yield update
            deadline_passed = task.result()  # raises what the run raised
            yield RunEnded(lifecycle=last[-1] if last else None, deadline_passed=deadline_passed)
        finally:
            self._runs.pop(request.run_id, None)
            if not task.done():
                await _ended(task)

    async def cancel(self, run_id: str) -> bool:
        """Cancel the run's task (its model call, its command) and wait for its end."""
        task = self._runs.get(run_id)
        if task is None or task.done():
            return False
        await _ended(task)
        return True

    async def suspend(self) -> None:
        """The engine starts no new step (:meth:`core.run.engine.Engine.suspend`)."""
        self._engine.suspend()

    async def _timed(self, request: RunRequest, watch: Callable[[Change], None]) -> bool:
        """Carry out ``request`` within its deadline; True when the deadline cut it (its
        calls still running are then recorded ``interrupted``)."""
        try:
            async with asyncio.timeout(request.deadline) as deadline:
                await self._carry_out(request, watch)
        except TimeoutError:
            if not deadline.expired():
                raise  # the run's own, not the deadline
            reason = f"the run passed its deadline of {request.deadline:g} s"
            await self._engine.interrupt(request.conversation_id, reason, watch=watch)
            return True
        return False

    async def _carry_out(self, request: RunRequest, watch: Callable[[Change], None]) -> None:
        engine, cid = self._engine, request.conversation_id
        inbox = self._inbox_for(cid) if self._inbox_for is not None else None
        match request.kind:
            case RunKind.START:
                assert request.message is not None  # the request's validator checks it
                await engine.start(
                    cid, request.message, inbox, snapshot=request.snapshot, watch=watch
                )
            case RunKind.REPLY:
                assert request.message is not None
                await engine.reply(
                    cid, request.message, inbox, answers=request.answers, watch=watch
                )
            case RunKind.GO_ON:
                await engine.run(cid, inbox, snapshot=request.snapshot, watch=watch)
            case RunKind.EXPIRE:
                assert request.request_id is not None
                await engine.expire(cid, request.request_id, inbox, watch=watch)
            case RunKind.INTERRUPT:
                await engine.interrupt(cid, request.reason, watch=watch)


async def _drained(
    updates: asyncio.Queue[RunUpdate], task: asyncio.Task[bool]
) -> AsyncIterator[RunUpdate]:
    """The updates queued now, else the next one or the task's end, whichever comes first."""
    while not updates.empty():
        yield updates.get_nowait()
    if task.done():
        return
    getting = asyncio.ensure_future(updates.get())
    try:
        await asyncio.wait({getting, task}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        if not getting.done():
            getting.cancel()
    if getting.done() and not getting.cancelled():
        yield getting.result()


async def _ended(task: asyncio.Task[bool]) -> None:
    """Cancel ``task`` and wait for its end (what it raised stays with it)."""
    task.cancel()
    await asyncio.wait({task})
