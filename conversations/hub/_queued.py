"""A run waits for its slot before it starts, and its thread is told while it waits.

(docs/architecture.md, "Limits and priorities".) Each run the hub asks of the runner
first holds a ``run`` slot (:meth:`Queueing.slot`, around the run in
:mod:`conversations.hub._runs`); the slot is freed when the run ends, fails or is
cancelled. The slot counts under the limits in force: this process's ``max_runs``,
the cluster's ``cluster_max_runs`` (:class:`conversations.slots.SlotLimits`), and the
channel's ``workspace_runs`` and ``user_runs`` (the latter when
``user_runs_over = "queue"``), by the conversation's workspace (``platform:workspace``)
and requester (``platform:user id``), at the channel's priority plus its workflow's.
Where no limit applies the run asks nothing and starts at once. An interruption
(a shutdown's record of the calls it cut) asks no slot.

A run that waits only briefly says nothing. One that has waited ``after`` seconds
(``queued_after``) says so in its thread, once: ``⏳ Queued: 3 runs ahead of this one.``
(an outbox row of purpose :data:`conversations.render.QUEUED`), then the same message
is edited as the count moves, at most once per ``edit_every`` seconds
(``queued_edit_every``: Slack's ``chat.update`` is a Tier 3 method, about 50 calls a
minute per workspace, https://api.slack.com/methods/chat.update, and a burst of queued
runs shares it), showing the newest count; once the run starts, a message that was
posted says ``▶️ Started after waiting 1m 05s in the queue.``. The runs ahead are
counted only when the message is due to be posted or edited
(:class:`conversations.slots.Watcher`). The message's rows share a request id named
after the wait (:func:`wait_name`: the inbound message the run starts from, else the
conversation's last commit), so a run that asks again after its process restarted,
or after another instance took it over, edits the message posted before instead of
posting a second one, and says there that it started (one read of the store for a run
that did not post the message itself, two when an earlier one did); a message that
already says its run started or left is left as it is. A run stopped while it waits (a stop cancels
the waiting job like a running one: :mod:`conversations.stopping`) turns a posted
message into :data:`conversations.render.LEFT_QUEUE` (none posted: nothing to turn); a
start stopped so, in a conversation that was not active, is recorded as stopped before
it started (its message kept as a note, its delivery handled, ``Stopped`` said:
:meth:`Queueing.stop_queued`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable

from conversations.channels import ChannelLookup, ChannelSettings
from conversations.events import PlatformRef, PostReply, UpdateMessage
from conversations.hub._settings import HubSettings, WorkflowPriority
from conversations.render import (
    LEFT_QUEUE,
    QUEUED,
    is_queued_count,
    queued_id,
    queued_text,
    started_text,
)
from conversations.slots import Slots
from conversations.store import ConversationInfo, Outbox, Outgoing, Store, Threads
from conversations.store.leases import Leases
from conversations.store.slots import Category, Limits, SlotAsk, Standing
from core.run.engine import Engine
from core.runner.protocol import RunKind, RunRequest
from core.vocabulary.audit import Means
from core.vocabulary.people import Person

log = logging.getLogger("conversations.hub")


class Queueing:
    """Holds a run's slot around it, and tells the thread while it waits.

    ``slots``: this process's (None: no run waits); ``engine`` records a stop of a
    request that never started; ``channels``: each channel's limits and priority
    (None: none per channel); ``workflow_priority``: a workflow's own priority (None:
    0); ``after``: seconds a run waits before its queued message is posted;
    ``edit_every``: seconds between two edits of it; ``clock``: seconds, monotonic (how
    long a run waited)."""

    def __init__(
        self,
        *,
        slots: Slots | None,
        threads: Threads,
        outbox: Outbox,
        engine: Engine,
        channels: ChannelLookup | None = None,
        workflow_priority: WorkflowPriority | None = None,
        after: float = 2.0,
        edit_every: float = 15.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._slots = slots
        self._threads = threads
        self._outbox = outbox
        self._engine = engine
        self._left: dict[str, RunRequest] = {}
        """Starts cancelled while they waited for their slot, by conversation: a stop
        that finds nothing running stops them (:meth:`stop_queued`)."""
        self._channels = channels
        self._workflow_priority = workflow_priority
        self._after = after
        self._edit_every = edit_every
        self._clock = clock

    @contextlib.asynccontextmanager
    async def slot(self, request: RunRequest) -> AsyncIterator[None]:
        """Hold the ``run`` slot of ``request``'s run for the block (see the module
        docstring); raises what the store raises."""
        self._left.pop(request.conversation_id, None)
        slots = self._slots
        asked = await self._ask(request, slots) if slots is not None else None
        if asked is None or slots is None:
            yield
            return
        ask, wait = asked
        told = _Told(
            conversation_id=ask.conversation_id,
            request_id=queued_id(wait),
            threads=self._threads,
            outbox=self._outbox,
            after=self._after,
            edit_every=self._edit_every,
            clock=self._clock,
        )
        try:
            async with slots.held(ask, told):
                await told.started()
                yield
        except asyncio.CancelledError:
            if not told.began and request.kind is RunKind.START:
                self._left[request.conversation_id] = request
            await asyncio.shield(told.left())
            raise

    async def stop_queued(
        self, conversation: ConversationInfo, by: Person, means: Means | None = None
    ) -> bool:
        """A stop (by ``by``, by ``means``) found nothing running: if the conversation's
        start was cancelled while it waited for its slot (the stop cancelled it), its
        request is recorded as stopped before it started
        (:meth:`core.run.engine.Engine.stop_queued`); whether it was."""
        request = self._left.pop(conversation.id, None)
        if request is None or request.message is None:
            return False
        return await self._engine.stop_queued(conversation.id, request.message, by, means)

    async def _ask(self, request: RunRequest, slots: Slots) -> tuple[SlotAsk, str] | None:
        """The slot ``request``'s run asks for and the name of its wait
        (:func:`wait_name`), or None when no limit applies to it."""
        if request.kind is RunKind.INTERRUPT:
            return None
        conversation = await self._threads.find(request.conversation_id)
        if conversation is None:
            return None
        where = conversation.binding
        channel = self._channels(where) if self._channels is not None else ChannelSettings()
        limits = slots.limits
        user_runs = channel.user_runs if channel.user_runs_over == "queue" else None
        ask = SlotAsk(
            conversation_id=conversation.id,
            category=Category.RUN,
            limits=Limits(
                cluster=limits.cluster_max_runs,
                process=limits.max_runs,
                workspace=channel.workspace_runs,
                user=user_runs,
            ),
            workspace=f"{where.platform}:{where.workspace}",
            user=f"{where.platform}:{conversation.requester.id}",
            priority=channel.priority + await self._workflow(conversation, request),
        )
        return (ask, wait_name(request, conversation)) if ask.limits.any else None

    async def _workflow(self, conversation: ConversationInfo, request: RunRequest) -> int:
        if self._workflow_priority is None:
            return 0
        text = request.message.text if request.kind is RunKind.START and request.message else None
        return await self._workflow_priority(conversation, text)


def wait_name(request: RunRequest, conversation: ConversationInfo) -> str:
    """What names ``request``'s wait for its slot in ``conversation`` across restarts of
    the process that waits: the inbound message the run starts from (its delivery key:
    the same message is handled again after a restart), else the conversation's last
    commit (a run that goes on from the journal commits nothing before its slot), else
    the run's own id."""
    message = request.message
    if message is not None and message.delivery_key:
        return f"message:{message.delivery_key}"
    if conversation.changed_at is not None:
        return f"commit:{conversation.changed_at.isoformat()}"
    return f"run:{request.run_id}"


class _Told:
    """The queued message of one waiting run (a :class:`conversations.slots.Watcher`):
    posted once the run has waited ``after`` seconds, then edited at most every
    ``edit_every`` seconds. ``request_id``: its rows' (:func:`conversations.render.queued_id`);
    a message an earlier life of the run posted with it is edited, not posted again."""

    def __init__(
        self,
        *,
        conversation_id: str,
        request_id: str,
        threads: Threads,
        outbox: Outbox,
        after: float,
        edit_every: float,
        clock: Callable[[], float],
    ) -> None:
        self._conversation_id = conversation_id
        self._threads = threads
        self._outbox = outbox
        self._after = after
        self._edit_every = edit_every
        self._clock = clock
        self._since = clock()
        self._request_id = request_id
        self._posted: bool | None = None
        """Whether the message is posted (None: not known yet; an earlier life of the
        run may have posted it)."""
        self._shown: int | None = None
        self._at = 0.0
        self.began = False
        """The run started (its slot was granted)."""
        self._where: ConversationInfo | None = None

    def wants_count(self) -> bool:
        """Whether a count would be shown now: the message is due to be posted (the run
        has waited ``after`` seconds), or to be edited (its last edit is ``edit_every``
        seconds old)."""
        now = self._clock()
        if not self._posted:
            return now - self._since >= self._after
        return now - self._at >= self._edit_every

    async def moved(self, standing: Standing) -> None:
        """Where the run stands now: post the message once it is due, or edit it when the
        count moved and the last edit is ``edit_every`` seconds old."""
        if standing.ahead is None or standing.ahead == self._shown or not self.wants_count():
            return  # a later look shows the newest count
        text = queued_text(standing.ahead)
        if await self._was_posted():
            await self._send(lambda ref: UpdateMessage(ref=ref, text=text))
        else:
            self._posted = True
            await self._send(lambda ref: PostReply(ref=ref, text=text))
        self._shown = standing.ahead
        self._at = self._clock()

    async def started(self) -> None:
        """The run starts: its message, if it was posted, says after how long it waited."""
        self.began = True
        if await self._was_posted():
            text = started_text(self._clock() - self._since)
            await self._send(lambda ref: UpdateMessage(ref=ref, text=text))

    async def left(self) -> None:
        """The run was cancelled: a message posted says it left the queue, unless the
        run had started."""
        if not self.began and await self._was_posted():
            await self._send(lambda ref: UpdateMessage(ref=ref, text=LEFT_QUEUE))

    async def _was_posted(self) -> bool:
        """Whether the message is posted, by this run or by an earlier life of it (read
        from the outbox once: :meth:`_posted_before`)."""
        if self._posted is None:
            self._posted = await self._posted_before()
        return self._posted

    async def _posted_before(self) -> bool:
        """Whether an earlier life of this run posted the message and it still says the
        run waits: its post not failed, and its newest row a count, not the started or
        left line (a wait of the same name that ended keeps its message as it is). One
        read; a second, of the conversation's rows, only when there is such a post. A
        store that fails here counts as no message: the run goes on, and a message may
        be posted twice."""
        cid, rid = self._conversation_id, self._request_id
        try:
            earlier = await self._outbox.request_message(cid, rid)
            if earlier is None or earlier.state in ("failed", "dropped"):
                return False
            rows = [r for r in await self._outbox.rows(cid) if r.request_id == rid]
        except Exception:  # a courtesy message: never the run's failure
            log.warning("could not read the queued message of %s", cid, exc_info=True)
            return False
        newest = rows[-1].action if rows else earlier.action
        return isinstance(newest, PostReply | UpdateMessage) and is_queued_count(newest.text)

    async def _send(self, action: Callable[[PlatformRef], PostReply | UpdateMessage]) -> None:
        if self._where is None:
            self._where = await self._threads.info(self._conversation_id)
        out = Outgoing(action(self._where.binding), purpose=QUEUED, request_id=self._request_id)
        await self._outbox.enqueue(self._conversation_id, [out])


def queueing(settings: HubSettings, store: Store, leases: Leases, engine: Engine) -> Queueing:
    """The hub's :class:`Queueing`: over ``settings.slots`` (their rows then renewed with
    ``leases``), or, without them, one under which no run waits."""
    slots = settings.slots
    if slots is not None:
        leases.renew_beside(slots.renew_all)
    return Queueing(
        slots=slots,
        threads=store.threads,
        outbox=store.outbox,
        engine=engine,
        channels=settings.channels,
        workflow_priority=settings.workflow_priority,
        after=settings.queued_after,
        edit_every=settings.queued_edit_every,
    )
