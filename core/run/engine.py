"""The run engine's entry points: a run goes until it finishes or must wait for a person.

Waiting ends the run; the pending request is in the store and the person's
answer starts the next run from the journal (docs/architecture.md, "Conversation
lifecycle and workflow position"). The engine holds nothing between runs, so a run
after a human answer and a run after a crash take the same path: :meth:`Engine.run`
reads the conversation and goes on while its status is ``running``
(:mod:`core.run.turn`).

Calls are made one at a time per conversation by the caller (the hub's queue);
:meth:`Engine.stop` is the exception and is called after the caller cancelled the
conversation's task. Each entry point is one run (:class:`core.run.state.Run`): it
asks for the conversation's settings once, opens the run's span, loads the
conversation once (or starts from the snapshot its caller hands in: a conversation
just opened, or as a decision left it, :class:`core.run.state.Handover`) and keeps it
in memory while it goes on, folding in each change it commits
(:mod:`core.run.live`); an entry point that hands over to another (a start to the
turns that follow) hands over its run. What the run uses is the
engine's :class:`core.run.deps.RunDeps`. The time and new ids come from the
engine's run context (:mod:`core.context`).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator, Callable, Sequence

from core.context import WALL, RunContext, random_id
from core.faults import NO_FAULTS, Faults
from core.files import FileReader
from core.models.base import Model
from core.outputs import OutputCache
from core.policy import policy
from core.requests.decide import decision_change, refused_decision
from core.run import live, messages
from core.run import workflow as run_workflow
from core.run.close_calls import aimed_outcome, interrupt_running, stopped, stopped_before_start
from core.run.deps import Composer, RunDeps
from core.run.live import CountingJournal
from core.run.preview import NO_PREVIEW, AnswerPreview
from core.run.scope import Scope
from core.run.settings import ChannelSpend, EngineSettings, SettingsLookup
from core.run.slots import UNLIMITED, StepSlots
from core.run.state import Handover, Run, Watch
from core.run.states import expiry
from core.run.turn import Turns
from core.secrets import NO_SECRETS, Redactor
from core.tools.base import Toolbox
from core.tools.workspaces import GitWorkspaces, Workspaces
from core.tracing import Tracing
from core.vocabulary.approvals import RulesInForce
from core.vocabulary.audit import Means
from core.vocabulary.errors import AlreadyHandled, RequestConflict
from core.vocabulary.inputs import DecideOutcome, Decision, Inbox, StopOutcome, ThreadMessage
from core.vocabulary.journal import Change, Journal
from core.vocabulary.people import Person
from core.vocabulary.run_events import Reminder
from core.vocabulary.snapshot import ConversationSnapshot
from core.workflows.loading import WorkflowLibrary, shipped_library


class Engine:
    """Runs conversations of one workflow with one model and one toolbox.

    ``context`` gives the time and new ids (the wall clock and random ids unless
    a test sets them). ``settings`` (with ``tool_policy``, when given, as its
    policy) apply to every conversation, unless ``settings_for`` gives a
    conversation its own (asked once per run; see :mod:`core.run.settings`).
    ``channel_spend`` tells what a conversation's channel spent today, for the
    channel's daily budget (without it, only this conversation's calls count);
    ``rules`` the approvals remembered for a run or a channel (none without it).
    ``outputs`` keeps tool outputs longer than ``output_limit`` whole, the model
    reading a preview and paging with ``read_output`` (:mod:`core.outputs`; without
    it such an output is cut to its head and tail).
    ``redactor`` replaces the bot's secrets in every tool result and progress note
    before it is committed (:mod:`core.secrets`; none by default).
    ``tracing`` makes each run a span, with its model calls and tool calls as child
    spans (:mod:`core.tracing`; by default to the global tracer provider, a no-op
    unless one was set). ``compose`` builds the steps a run goes through
    (:mod:`core.run.compose`; by default the agent of :mod:`core.run.agent`).
    ``slots`` holds a slot around each model call and command (:mod:`core.run.slots`).
    ``preview`` is told the answer while the model writes it (:mod:`core.run.preview`).
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
        workflows: WorkflowLibrary | None = None,
        settings: EngineSettings | None = None,
        tool_policy: policy.ToolPolicy | None = None,
        settings_for: SettingsLookup | None = None,
        channel_spend: ChannelSpend | None = None,
        rules: RulesInForce | None = None,
        outputs: OutputCache | None = None,
        faults: Faults = NO_FAULTS,
        context: RunContext = WALL,
        redactor: Redactor = NO_SECRETS,
        workspaces: Workspaces | None = None,
        tracing: Tracing | None = None,
        compose: Composer | None = None,
        slots: StepSlots = UNLIMITED,
        preview: AnswerPreview = NO_PREVIEW,
    ) -> None:
        self._journal = CountingJournal(journal)
        default = settings or EngineSettings()
        if tool_policy is not None:
            default = dataclasses.replace(default, tool_policy=tool_policy)
        self._default = default
        self._settings_for = settings_for
        self._context = context
        self._tracing = tracing or Tracing()
        self._suspended = False
        workspaces = workspaces or GitWorkspaces()
        self._deps = RunDeps(
            journal=self._journal,
            model=model,
            toolbox=toolbox,
            workflows=workflows or shipped_library(),
            outputs=outputs,
            files=FileReader(workspaces=workspaces, redactor=redactor),
            workspaces=workspaces,
            redactor=redactor,
            faults=faults,
            channel_spend=channel_spend,
            rules=rules,
            suspended=lambda: self._suspended,
            compose=compose,
            slots=slots,
            preview=preview,
        )

    @property
    def loads(self) -> int:
        """How many times a run read a conversation from the store, since the engine was built."""
        return self._journal.loads

    def suspend(self) -> None:
        """Start no new step: each run ends after the step it is in (the process stops).

        A model call or tool call in flight finishes and commits its result; the
        run then returns, leaving the conversation ``running``, so the next start
        goes on from the store (:meth:`run`). There is no way back: build a new
        engine to run again.
        """
        self._suspended = True

    @contextlib.asynccontextmanager
    async def _opened(
        self,
        entry: str,
        conversation_id: str,
        snapshot: ConversationSnapshot | None = None,
        watch: Watch | None = None,
    ) -> AsyncIterator[Run]:
        """One run of ``conversation_id`` by the entry point ``entry``: its settings (asked
        once), its span, its conversation (loaded once, unless ``snapshot`` is handed in:
        the caller vouches that it is the conversation as stored now); ``watch`` is told
        what it commits."""
        if self._settings_for is None:
            settings = self._default
        else:
            settings = await self._settings_for(conversation_id)
        run_id = random_id(16)  # not from the context's ids: those number requests in tests
        async with self._tracing.run(entry, conversation_id, run_id) as span:
            if snapshot is None:
                snapshot = await self._journal.load(conversation_id)
            workflow = run_workflow.journaled(snapshot.journal)
            if workflow is None:
                workflow = self._deps.workflows[run_workflow.DEFAULT]
            yield Run(
                conversation_id=conversation_id,
                snapshot=snapshot,
                settings=settings,
                run_id=run_id,
                entry=entry,
                span=span,
                context=self._context,
                scope=Scope.root(settings, self._deps.outputs, workflow.workflow),
                workflow=workflow,
                watch=watch,
            )

    async def _commit(self, run: Run, change: Change) -> None:
        await live.commit(run, self._journal, change)

    async def run(
        self,
        conversation_id: str,
        inbox: Inbox | None = None,
        *,
        snapshot: ConversationSnapshot | None = None,
        watch: Watch | None = None,
    ) -> None:
        """Go on while the conversation is ``running`` (see :meth:`core.run.turn.Turns.go`).

        ``snapshot``: the conversation as stored now, handed over by the run before
        (:class:`core.run.state.Handover`, checked by the caller); None: it is read.
        ``watch`` is told each change the run commits (:attr:`core.run.state.Run.watch`).
        Raises :class:`core.vocabulary.errors.LeaseLost` when another process took the
        conversation over; any other failure ends the run ``failed``.
        """
        async with self._opened("run", conversation_id, snapshot, watch) as run:
            await Turns(run, self._deps).go(inbox)

    async def interrupt(
        self, conversation_id: str, reason: str, *, watch: Watch | None = None
    ) -> int:
        """Record the calls still running as ``interrupted`` after their run was cancelled.

        For a shutdown that could not wait for a command (the caller cancelled the
        run's task, which killed the command): each running call gets its one
        result saying ``reason``, and the conversation stays ``running``; the next
        start goes on and the model reads the results. Returns how many calls.
        """
        async with self._opened("interrupt", conversation_id, watch=watch) as run:
            closing = interrupt_running(run.snap, reason, self._deps.toolbox.read_only)
            if closing.records:
                await self._commit(run, Change(entries=closing.results, tool_calls=closing.records))
            return len(closing.records)

    # --- inputs ------------------------------------------------------------------

    async def start(
        self,
        conversation_id: str,
        message: ThreadMessage,
        inbox: Inbox | None = None,
        *,
        snapshot: ConversationSnapshot | None = None,
        watch: Watch | None = None,
    ) -> None:
        """Begin a run with a new request; from an ended run, the history is kept.

        After a stop, a request by someone who may not go on is kept as a note and
        refused (:mod:`core.run.restart`). ``snapshot``: the conversation as stored
        now (one just opened), handed in by the caller; None: it is read.
        (:func:`core.run.messages.start`; ``watch``: as for :meth:`run`.)
        """
        async with self._opened("start", conversation_id, snapshot, watch) as run:
            await messages.start(run, self._deps, message, inbox)

    async def reply(
        self,
        conversation_id: str,
        message: ThreadMessage,
        inbox: Inbox | None = None,
        *,
        answers: str | None = None,
        watch: Watch | None = None,
    ) -> None:
        """A message in the thread: answers a question, revises a plan, goes on, or is a note.

        What it does to the open request is :func:`core.requests.decide.reply_change`;
        a reply to no request, to a tool approval, or to a request decided
        meanwhile is kept as a note; so is one whose ``answers`` names a request that is
        not the one pending (:func:`core.run.messages.reply`).
        """
        async with self._opened("reply", conversation_id, watch=watch) as run:
            await messages.reply(run, self._deps, message, inbox, answers)

    async def decide(
        self,
        conversation_id: str,
        decision: Decision,
        *,
        handover: Callable[[Handover], None] | None = None,
    ) -> DecideOutcome:
        """Decide a pending request once (compare-and-set); the run goes on via :meth:`run`.

        ``handover`` is called with the conversation as the decision left it, when it
        was decided, for :meth:`run` to start from (:class:`core.run.state.Handover`).

        Returns what became of it (:class:`~core.vocabulary.inputs.DecideOutcome`);
        nothing is written unless ``DECIDED`` (after ``EXPIRED`` the caller queues
        :meth:`expire`).
        """
        async with self._opened("decide", conversation_id) as run:
            snap, scopes = run.snap, run.settings.approval_scopes
            refused = refused_decision(snap, decision, run.context.now(), scopes)
            if refused is not None:
                return refused
            request = next(r for r in snap.requests if r.id == decision.request_id)
            workflow = run.workflow
            change = decision_change(snap, request, decision, workflow, run.opening)
            if change is None:
                return DecideOutcome.ALREADY_DECIDED
            try:
                await self._commit(run, change)
            except RequestConflict:
                return DecideOutcome.ALREADY_DECIDED
            handed = run.handover()
            if handover is not None and handed is not None:
                handover(handed)
            return DecideOutcome.DECIDED

    async def stop(
        self,
        conversation_id: str,
        by_name: str,
        by_id: str,
        *,
        run: int | None = None,
        notes: Sequence[ThreadMessage] = (),
        means: Means | None = None,
    ) -> StopOutcome:
        """Close everything open after the caller cancelled the run's task: every
        ``tool_use`` without a result gets one (``interrupted`` if it was running, else
        ``cancelled``), every open request is cancelled, and the conversation ends
        ``cancelled``. ``run``: the run the stop was aimed at (:meth:`running`; None:
        whatever is active); any other run is left alone, and the outcome says why
        (:func:`core.run.close_calls.aimed_outcome`). ``notes``: messages sent during the
        run that it had not read, journaled with the stop as notes (none otherwise).
        ``means``: how the person stopped it, for the audit trail."""
        by = Person(id=by_id, name=by_name)
        async with self._opened("stop", conversation_id) as opened:
            for _attempt in range(3):
                snap = await live.current(opened, self._journal)
                if (outcome := aimed_outcome(snap, run)) is not None:
                    return outcome
                try:
                    read_only = self._deps.toolbox.read_only
                    await self._commit(opened, stopped(snap, by, read_only, notes, means))
                except RequestConflict:
                    continue
                return StopOutcome.STOPPED
            snap = await live.reload(opened, self._journal)
            return aimed_outcome(snap, run) or StopOutcome.NOTHING_ACTIVE

    async def stop_outcome(self, conversation_id: str, run: int) -> StopOutcome | None:
        """What a stop aimed at ``run`` would do now (no write): None when that run is
        active (the caller cancels its job, then calls :meth:`stop`), else why not."""
        return aimed_outcome(await self._journal.load(conversation_id), run)

    async def running(self, conversation_id: str) -> int | None:
        """The run working or waiting for a person (its request's ``seq``), None when
        none is active: a stop sent now is aimed at it."""
        snap = await self._journal.load(conversation_id)
        return snap.run if snap.status.active else None

    async def stop_queued(
        self, conversation_id: str, message: ThreadMessage, by: Person, means: Means | None
    ) -> bool:
        """A stop by ``by`` (by ``means``) of ``message``'s run, which waited for its slot and
        never started, in a conversation that was not active
        (:func:`core.run.close_calls.stopped_before_start`); False when the message was
        journaled meanwhile."""
        async with self._opened("stop", conversation_id) as run:
            try:
                await self._commit(run, stopped_before_start(message, by, means))
            except AlreadyHandled:
                return False
            return True

    async def remind(self, conversation_id: str, request_id: str) -> None:
        """Post the one reminder of an open request (the sweeper calls this at half-life)."""
        async with self._opened("remind", conversation_id) as run:
            request = next((r for r in run.snap.open_requests if r.id == request_id), None)
            if request is not None:
                event = Reminder(request_id=request.id, prompt=request.prompt)
                await self._commit(run, Change(events=(event,)))

    async def expire(
        self,
        conversation_id: str,
        request_id: str,
        inbox: Inbox | None = None,
        *,
        watch: Watch | None = None,
    ) -> bool:
        """A request ``request_id`` waited too long (the sweeper found its time passed).

        At a workflow state with a ``timeout`` transition, or for a wait's timer, the
        request becomes ``expired`` (compare-and-set: it fires once) and the run goes on
        where ``timeout`` leads (:func:`core.run.states.timed_out`). Otherwise the
        conversation ends: open calls get a result, open requests become ``expired``, and
        it ends ``cancelled`` with a message. False when the request was no longer open.
        ``inbox``: the messages that come while the run goes on (None: none).
        """
        async with self._opened("expire", conversation_id, watch=watch) as run:
            snap = run.snap
            request = next((r for r in snap.open_requests if r.id == request_id), None)
            if request is None:
                return False
            change, moves_on = expiry(run, request, self._deps.toolbox.read_only)
            try:
                await self._commit(run, change)
            except RequestConflict:
                return False
            if moves_on:
                await Turns(run, self._deps).go(inbox)
            return True
