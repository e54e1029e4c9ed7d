"""The run engine's entry points: a run goes until it finishes or must wait for a person.

Waiting ends the run; the pending request is in the store and the person's
answer starts the next run from the journal (docs/architecture.md, "Conversation
lifecycle and workflow position"). The engine holds nothing between runs, so a run
after a human answer and a run after a crash take the same path: :meth:`Engine.run`
reads the conversation and goes on while its status is ``running``
(:mod:`core.run.turn`).

Calls are made one at a time per conversation by the caller (the hub's queue);
:meth:`Engine.stop` is the exception and is called after the caller cancelled the
conversation's task. Every change is one :meth:`core.vocabulary.journal.Journal.commit`;
the time and new ids come from the engine's run context (:mod:`core.context`).
Each entry point is one run for the journal: it loads its conversation once and
keeps it in memory while it goes on (:mod:`core.run.live`).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Awaitable, Callable
from typing import Concatenate, ParamSpec, TypeVar

from core.context import WALL, RunContext, random_id
from core.faults import NO_FAULTS, Faults
from core.models.base import Model
from core.outputs import OutputCache
from core.policy import policy
from core.requests.closing import requests_closed
from core.requests.common import Opening
from core.requests.decide import answered_in_words, decision_change, reply_change
from core.run.close_calls import close_open_calls, interrupt_running
from core.run.live import LiveJournal
from core.run.restart import refused_restart
from core.run.settings import ChannelSpend, EngineSettings, RunSettings, SettingsLookup
from core.run.turn import RunLoop
from core.secrets import NO_SECRETS, Redactor
from core.tools.base import Toolbox
from core.tools.workspaces import Workspaces
from core.tracing import Tracing
from core.vocabulary import lifecycle
from core.vocabulary.entries import StopEntry, UserText
from core.vocabulary.errors import RequestConflict
from core.vocabulary.inputs import DecideOutcome, Decision, Inbox, ThreadMessage, delivery_keys
from core.vocabulary.journal import Change, Journal, RequestResolution
from core.vocabulary.lifecycle import Lifecycle
from core.vocabulary.people import Person
from core.vocabulary.requests import RequestState, ToolApproval
from core.vocabulary.run_events import Expired, Reminder, RunEvent, Stopped
from core.vocabulary.snapshot import ConversationSnapshot
from core.workflow import Transition, Workflow

P = ParamSpec("P")
R = TypeVar("R")


def _one_run(
    method: Callable[Concatenate[Engine, str, P], Awaitable[R]],
) -> Callable[Concatenate[Engine, str, P], Awaitable[R]]:
    """An entry point is one run: it reads its conversation from the store once, at
    its first read, and keeps it in memory after that (:mod:`core.run.live`); it
    asks for the conversation's settings once, at its start (:class:`RunSettings`); it
    is one run span (:meth:`core.tracing.Tracing.run`)."""

    @functools.wraps(method)
    async def entry(self: Engine, conversation_id: str, /, *args: P.args, **kwargs: P.kwargs) -> R:
        settings = await self._settings.of(conversation_id)
        run_id = random_id(16)  # not from the context's ids: those number requests in tests
        with self._journal.run(), self._settings.use(conversation_id, settings, run_id):
            async with self._tracing.run(method.__name__, conversation_id, run_id):
                return await method(self, conversation_id, *args, **kwargs)

    return entry


class Engine:
    """Runs conversations of one workflow with one model and one toolbox.

    ``context`` gives the time and new ids (the wall clock and random ids unless
    a test sets them). ``settings`` (with ``tool_policy``, when given, as its
    policy) apply to every conversation, unless ``settings_for`` gives a
    conversation its own (asked once per run; see :mod:`core.run.settings`).
    ``channel_spend`` tells what a conversation's channel spent today, for the
    channel's daily budget (without it, only this conversation's calls count).
    ``outputs`` keeps tool outputs longer than ``output_limit`` whole, the model
    reading a preview and paging with ``read_output`` (:mod:`core.outputs`; without
    it such an output is cut to its head and tail).
    ``redactor`` replaces the bot's secrets in every tool result and progress note
    before it is committed (:mod:`core.secrets`; none by default).
    ``tracing`` makes each run a span, with its model calls and tool calls as child
    spans (:mod:`core.tracing`; by default to the global tracer provider, a no-op
    unless one was set).
    Raises :class:`core.vocabulary.errors.ConversationNotFound` (from the journal) for an
    unknown conversation id; model failures end the run ``failed`` with a message
    in the thread rather than raising.
    """

    def __init__(
        self,
        *,
        journal: Journal,
        model: Model,
        toolbox: Toolbox,
        workflow: Workflow,
        settings: EngineSettings | None = None,
        tool_policy: policy.ToolPolicy | None = None,
        settings_for: SettingsLookup | None = None,
        channel_spend: ChannelSpend | None = None,
        outputs: OutputCache | None = None,
        faults: Faults = NO_FAULTS,
        context: RunContext = WALL,
        redactor: Redactor = NO_SECRETS,
        workspaces: Workspaces | None = None,
        tracing: Tracing | None = None,
    ) -> None:
        self._journal = LiveJournal(journal)
        self._workflow = workflow
        default = settings or EngineSettings()
        if tool_policy is not None:
            default = dataclasses.replace(default, tool_policy=tool_policy)
        self._settings = RunSettings(default, settings_for)
        self._context = context
        self._tracing = tracing or Tracing()
        self._opening = Opening(context=context, ttl=lambda: self._settings.get().request_ttl)
        self._suspended = False
        self._loop = RunLoop(
            journal=self._journal,
            model=model,
            toolbox=toolbox,
            workflow=workflow,
            settings=self._settings,
            opening=self._opening,
            faults=faults,
            suspended=lambda: self._suspended,
            redactor=redactor,
            workspaces=workspaces,
            channel_spend=channel_spend,
            outputs=outputs,
        )

    @property
    def loads(self) -> int:
        """How many times a run read a conversation from the store, since the engine was built."""
        return self._journal.loads

    @property
    def workflow(self) -> Workflow:
        """The workflow new conversations start in."""
        return self._workflow

    def suspend(self) -> None:
        """Start no new step: each run ends after the step it is in (the process stops).

        A model call or tool call in flight finishes and commits its result; the
        run then returns, leaving the conversation ``running``, so the next start
        goes on from the store (:meth:`run`). There is no way back: build a new
        engine to run again.
        """
        self._suspended = True

    @_one_run
    async def run(self, conversation_id: str, inbox: Inbox | None = None) -> None:
        """Go on while the conversation is ``running`` (see :meth:`core.run.turn.RunLoop.run`).

        Raises :class:`core.vocabulary.errors.LeaseLost` when another process took the
        conversation over; any other failure ends the run ``failed``.
        """
        await self._loop.run(conversation_id, inbox)

    @_one_run
    async def interrupt(self, conversation_id: str, reason: str) -> int:
        """Record the calls still running as ``interrupted`` after their run was cancelled.

        For a shutdown that could not wait for a command (the caller cancelled the
        run's task, which killed the command): each running call gets its one
        result saying ``reason``, and the conversation stays ``running``; the next
        start goes on and the model reads the results. Returns how many calls.
        """
        snap = await self._journal.load(conversation_id)
        closing = interrupt_running(snap, reason, self._loop.tools.read_only)
        if closing.records:
            await self._journal.commit(
                conversation_id, Change(entries=closing.results, tool_calls=closing.records)
            )
        return len(closing.records)

    # --- inputs ------------------------------------------------------------------

    @_one_run
    async def start(
        self, conversation_id: str, request: ThreadMessage, inbox: Inbox | None = None
    ) -> None:
        """Begin a run with a new request; from an ended run, the history is kept.

        After a stop, a request by someone who may not go on is kept as a note and
        refused (:mod:`core.run.restart`).
        """
        snap = await self._journal.load(conversation_id)
        if snap.status.active:
            await self.reply(conversation_id, request, inbox)
            return
        request = await self._loop.files.read(snap, request)
        refused = refused_restart(snap, request)
        if refused is not None:
            await self._journal.commit(conversation_id, refused)
            return
        position = self._next_position(snap, request)
        step = self._workflow.entered(snap.position, position, first=not snap.journal)
        await self._journal.commit(
            conversation_id,
            Change(
                entries=(
                    *step,
                    UserText(
                        author=request.author,
                        text=request.text,
                        role="request",
                        files=request.blocks,
                    ),
                ),
                status=lifecycle.move(snap.status, lifecycle.RUNNING),
                position=position,
                handled=delivery_keys(request),
            ),
        )
        await self.run(conversation_id, inbox)

    def _next_position(self, snap: ConversationSnapshot, request: ThreadMessage) -> str:
        """Where a new request starts: a stopped run, or someone else's retry, re-plans."""
        if not snap.journal:
            return self._workflow.start
        if snap.status.lifecycle is Lifecycle.FAILED and request.may_continue:
            return snap.position  # carry on from where it failed
        if snap.status.lifecycle in (Lifecycle.CANCELLED, Lifecycle.FAILED):
            return self._workflow.start  # no approval outlives a stop
        return self._workflow.next(snap.position, Transition.NEW_MESSAGE)

    @_one_run
    async def reply(
        self, conversation_id: str, reply: ThreadMessage, inbox: Inbox | None = None
    ) -> None:
        """A message in the thread: answers a question, revises a plan, goes on, or is a note.

        What it does to the open request is :func:`core.requests.decide.reply_change`;
        a reply to no request, to a tool approval, or to a request decided
        meanwhile is kept as a note.
        """
        snap = await self._journal.load(conversation_id)
        if not snap.status.active:
            await self.start(conversation_id, reply, inbox)
            return
        reply = await self._loop.files.read(snap, reply)
        request = snap.open_requests[-1] if snap.open_requests else None
        change = reply_change(snap, request, reply, self._workflow) if request else None
        if change is None:
            await self._note(conversation_id, reply)
            return
        try:
            await self._journal.commit(
                conversation_id, change.model_copy(update={"handled": delivery_keys(reply)})
            )
        except RequestConflict:  # decided meanwhile: the words are kept as a note
            await self._note(conversation_id, reply)
            return
        await self.run(conversation_id, inbox)

    async def _note(
        self, conversation_id: str, reply: ThreadMessage, events: tuple[RunEvent, ...] = ()
    ) -> None:
        note = UserText(author=reply.author, text=reply.text, role="note", files=reply.blocks)
        await self._journal.commit(
            conversation_id, Change(entries=(note,), handled=delivery_keys(reply), events=events)
        )

    @_one_run
    async def decide(self, conversation_id: str, decision: Decision) -> DecideOutcome:
        """Decide a pending request once (compare-and-set); the run goes on via :meth:`run`.

        Returns ``ALREADY_DECIDED`` when another decision won, ``EXPIRED`` when its time
        ran out (nothing written: the caller queues :meth:`expire`), ``NOT_OPEN`` when the
        request is unknown, superseded, cancelled, expired or answered in words,
        ``NO_SUCH_CALL`` for a call number the request does not have.
        """
        snap = await self._journal.load(conversation_id)
        request = next((r for r in snap.requests if r.id == decision.request_id), None)
        if request is None:
            return DecideOutcome.NOT_OPEN
        if request.state is RequestState.DECIDED:
            return DecideOutcome.ALREADY_DECIDED
        if request.state is not RequestState.OPEN or answered_in_words(request):
            return DecideOutcome.NOT_OPEN  # a question is answered in words, not reactions
        if request.expires_at is not None and self._context.now() >= request.expires_at:
            # The sweeper had not come by yet. Expire it in the conversation's turn, not
            # here: a run may still hold the conversation, its calls running.
            return DecideOutcome.EXPIRED
        calls = request.tool_use_ids if isinstance(request, ToolApproval) else ()
        if decision.call is not None and not 1 <= decision.call <= len(calls):
            return DecideOutcome.NO_SUCH_CALL
        change = decision_change(snap, request, decision, self._workflow, self._opening)
        if change is None:
            return DecideOutcome.ALREADY_DECIDED
        try:
            await self._journal.commit(conversation_id, change)
        except RequestConflict:
            return DecideOutcome.ALREADY_DECIDED
        return DecideOutcome.DECIDED

    @_one_run
    async def stop(self, conversation_id: str, by_name: str, by_id: str) -> bool:
        """Close everything open after the caller cancelled the run's task.

        Every ``tool_use`` without a result gets one (``interrupted`` if it was
        running, else ``cancelled``), every open request is cancelled, and the
        conversation ends ``cancelled``. Returns False when nothing was active.
        """
        by = Person(id=by_id, name=by_name)
        for _attempt in range(3):
            snap = await self._journal.load(conversation_id)
            if not snap.status.active:
                return False
            closing = close_open_calls(snap, by_name, self._loop.tools.read_only)
            change = Change(
                entries=(StopEntry(by=by), *closing.results),
                tool_calls=closing.records,
                resolve=tuple(
                    RequestResolution(request_id=r.id, state=RequestState.CANCELLED, by=by)
                    for r in snap.open_requests
                ),
                status=lifecycle.move(snap.status, lifecycle.CANCELLED),
                events=(
                    *requests_closed(snap, snap.open_requests, "stopped", by=by),
                    Stopped(
                        by_name=by_name,
                        cancelled_calls=closing.cancelled,
                        interrupted_calls=closing.interrupted,
                    ),
                ),
            )
            try:
                await self._journal.commit(conversation_id, change)
            except RequestConflict:
                continue
            return True
        return False

    @_one_run
    async def remind(self, conversation_id: str, request_id: str) -> None:
        """Post the one reminder of an open request (the sweeper calls this at half-life)."""
        snap = await self._journal.load(conversation_id)
        request = next((r for r in snap.open_requests if r.id == request_id), None)
        if request is not None:
            event = Reminder(request_id=request.id, prompt=request.prompt)
            await self._journal.commit(conversation_id, Change(events=(event,)))

    @_one_run
    async def expire(self, conversation_id: str, request_id: str) -> bool:
        """End a conversation whose request ``request_id`` waited too long.

        Open calls get a result, open requests become ``expired`` (compare-and-set),
        and the conversation ends ``cancelled`` with a message. False when the
        request was no longer open.
        """
        snap = await self._journal.load(conversation_id)
        if not any(r.id == request_id for r in snap.open_requests):
            return False
        closing = close_open_calls(snap, "expiry of the request", self._loop.tools.read_only)
        try:
            await self._journal.commit(
                conversation_id,
                Change(
                    entries=closing.results,
                    tool_calls=closing.records,
                    resolve=tuple(
                        RequestResolution(request_id=r.id, state=RequestState.EXPIRED)
                        for r in snap.open_requests
                    ),
                    status=lifecycle.move(snap.status, lifecycle.CANCELLED),
                    events=(
                        *requests_closed(snap, snap.open_requests, "expired"),
                        Expired(request_id=request_id),
                    ),
                ),
            )
        except RequestConflict:
            return False
        return True
