"""The run engine: a run goes until it finishes or must wait for a person.

Waiting ends the run; the pending request is in the store and the person's
answer starts the next run from the journal (DESIGN.md, "Conversation lifecycle
and workflow position"). The engine holds nothing between runs, so a run after a
human answer and a run after a crash take the same path: :meth:`Engine.run`
reads the conversation and goes on while its status is ``running``.

Calls are made one at a time per conversation by the caller (the hub's queue);
:meth:`Engine.stop` is the exception and is called after the caller cancelled the
conversation's task. Every change is one :meth:`core.journal.Journal.commit`.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from core import lifecycle, policy
from core.closing import request_closed, requests_closed
from core.control_changes import request_times
from core.decisions import answer_change, decision_change
from core.errors import LeaseLost, ModelError, RequestConflict
from core.faults import NO_FAULTS, Faults
from core.history import build_messages
from core.inputs import DecideOutcome, Decision, Reply, Start
from core.journal import (
    AssistantTurn,
    Change,
    ConversationSnapshot,
    Journal,
    JournalRecord,
    ModelUsage,
    PendingRequest,
    Person,
    RequestKind,
    RequestResolution,
    RequestState,
    StopEntry,
    ToolCall,
    ToolResultEntry,
    UserText,
)
from core.lifecycle import Lifecycle, WaitKind
from core.model import Model, ModelRequest, TextDelta, ToolCallEvent, TurnEnd, Usage
from core.run_events import (
    Answered,
    ContinueAsked,
    Expired,
    ProgressNote,
    Refused,
    Reminder,
    RunEvent,
    RunFailed,
    RunStats,
    Stopped,
)
from core.stats import request_stats
from core.tool_runner import ToolRunner, TurnOutcome
from core.tools.base import Toolbox
from core.workflow import Transition, Workflow

log = logging.getLogger(__name__)

DEFAULT_SYSTEM_PROMPT = """\
You are threadbot, an agent that works for a team from a chat thread. People talk
to you in the thread; their messages start with their name. Keep messages short
and concrete. Work only inside the conversation's workspace with your tools.
"""

Inbox = Callable[[], Sequence[Reply]]
"""Returns (and removes) replies that arrived while the run works; called at turn boundaries."""


@dataclass(frozen=True, kw_only=True)
class EngineSettings:
    """Limits of a run: model calls per run, tokens per response, tool limits (seconds, chars)."""

    max_turns: int = 30
    max_tokens: int = 4096
    command_timeout: float = 120.0
    output_limit: int = 16_000
    request_ttl: float = 24 * 3600.0
    """Seconds a pending request waits before it expires (a reminder at half)."""
    system_prompt: str = DEFAULT_SYSTEM_PROMPT


class Engine:
    """Runs conversations of one workflow with one model and one toolbox.

    Raises :class:`core.errors.ConversationNotFound` (from the journal) for an
    unknown conversation id; model failures end the run ``failed`` with a
    message in the thread rather than raising.
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
        faults: Faults = NO_FAULTS,
    ) -> None:
        self._journal = journal
        self._model = model
        self._toolbox = toolbox
        self._workflow = workflow
        self._settings = settings or EngineSettings()
        self._faults = faults
        self._suspended = False
        self._tools = ToolRunner(
            journal=journal,
            toolbox=toolbox,
            settings=self._settings,
            tool_policy=tool_policy or policy.default_policy(),
            faults=faults,
            suspended=lambda: self._suspended,
        )

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

    async def interrupt(self, conversation_id: str, reason: str) -> int:
        """Record the calls still running as ``interrupted`` after their run was cancelled.

        For a shutdown that could not wait for a command (the caller cancelled the
        run's task, which killed the command): each running call gets its one
        result saying ``reason``, and the conversation stays ``running``; the next
        start goes on and the model reads the results. Returns how many calls.
        """
        snap = await self._journal.load(conversation_id)
        closing = self._tools.interrupt_running(snap, reason)
        if closing.records:
            await self._journal.commit(
                conversation_id, Change(entries=closing.results, tool_calls=closing.records)
            )
        return len(closing.records)

    # --- inputs ------------------------------------------------------------------

    async def start(self, conversation_id: str, request: Start, inbox: Inbox | None = None) -> None:
        """Begin a run with a new request; from an ended run, the history is kept."""
        snap = await self._journal.load(conversation_id)
        if snap.status.active:
            await self.reply(conversation_id, Reply(**request.model_dump()), inbox)
            return
        await self._journal.commit(
            conversation_id,
            Change(
                entries=(UserText(author=request.author, text=request.text, role="request"),),
                status=lifecycle.RUNNING,
                position=self._next_position(snap, request),
                handled=_keys(request),
            ),
        )
        await self.run(conversation_id, inbox)

    def _next_position(self, snap: ConversationSnapshot, request: Start) -> str:
        """Where a new request starts: a stopped run, or someone else's retry, re-plans."""
        if not snap.journal:
            return self._workflow.start
        if snap.status.lifecycle is Lifecycle.FAILED and request.may_continue:
            return snap.position  # carry on from where it failed
        if snap.status.lifecycle in (Lifecycle.CANCELLED, Lifecycle.FAILED):
            return self._workflow.start  # no approval outlives a stop
        return self._workflow.next(snap.position, Transition.NEW_MESSAGE)

    async def reply(self, conversation_id: str, reply: Reply, inbox: Inbox | None = None) -> None:
        """A message in the thread: answers a question, revises a plan, or is a note."""
        snap = await self._journal.load(conversation_id)
        if not snap.status.active:
            await self.start(conversation_id, Start(**reply.model_dump()), inbox)
            return
        request = snap.open_requests[-1] if snap.open_requests else None
        if request is not None and request.kind in (RequestKind.RETRY, RequestKind.CONTINUE):
            await self._go_on(conversation_id, snap, request, reply, inbox)
            return
        if request is None or request.kind is RequestKind.TOOL_APPROVAL:
            await self._note(conversation_id, reply)
            return
        change = answer_change(snap, request, reply, self._workflow)
        try:
            await self._journal.commit(
                conversation_id, change.model_copy(update={"handled": _keys(reply)})
            )
        except RequestConflict:  # decided meanwhile: the words are kept as a note
            await self._note(conversation_id, reply)
            return
        await self.run(conversation_id, inbox)

    async def _go_on(
        self,
        conversation_id: str,
        snap: ConversationSnapshot,
        request: PendingRequest,
        reply: Reply,
        inbox: Inbox | None,
    ) -> None:
        """A reply to "retry?" / "go on?": the requester or an approver goes on.

        Anyone else's reply is kept as a note and answered in the thread with the
        words a reaction of theirs gets (:class:`Refused`); the request stays open.
        """
        if not reply.may_continue:
            refused = Refused(action="decide", by_name=reply.author.name)
            await self._note(conversation_id, reply, events=(refused,))
            return
        note = UserText(author=reply.author, text=reply.text, role="note")
        change = Change(
            entries=(note,),
            resolve=(
                RequestResolution(
                    request_id=request.id,
                    state=RequestState.DECIDED,
                    decision="go on",
                    by=reply.author,
                ),
            ),
            status=lifecycle.RUNNING,
            handled=_keys(reply),
            events=request_closed(snap, request, "approved", by=reply.author),
        )
        try:
            await self._journal.commit(conversation_id, change)
        except RequestConflict:
            await self._note(conversation_id, reply)
            return
        await self.run(conversation_id, inbox)

    async def _note(
        self, conversation_id: str, reply: Reply, events: tuple[RunEvent, ...] = ()
    ) -> None:
        note = UserText(author=reply.author, text=reply.text, role="note")
        await self._journal.commit(
            conversation_id, Change(entries=(note,), handled=_keys(reply), events=events)
        )

    async def decide(self, conversation_id: str, decision: Decision) -> DecideOutcome:
        """Decide a pending request once (compare-and-set); the run goes on via :meth:`run`.

        Returns ``ALREADY_DECIDED`` when another decision won, ``NOT_OPEN`` when the
        request is unknown, superseded, cancelled or expired.
        """
        snap = await self._journal.load(conversation_id)
        request = next((r for r in snap.requests if r.id == decision.request_id), None)
        if request is None:
            return DecideOutcome.NOT_OPEN
        if request.state is RequestState.DECIDED:
            return DecideOutcome.ALREADY_DECIDED
        if request.state is not RequestState.OPEN or request.kind is RequestKind.QUESTION:
            return DecideOutcome.NOT_OPEN  # a question is answered in words, not reactions
        if request.expires_at is not None and _now() >= request.expires_at:
            await self.expire(conversation_id, request.id)  # the sweeper had not come by yet
            return DecideOutcome.NOT_OPEN
        if decision.call is not None and not 1 <= decision.call <= len(request.tool_use_ids):
            return DecideOutcome.NO_SUCH_CALL
        change = decision_change(snap, request, decision, self._workflow, self._settings)
        if change is None:
            return DecideOutcome.ALREADY_DECIDED
        try:
            await self._journal.commit(conversation_id, change)
        except RequestConflict:
            return DecideOutcome.ALREADY_DECIDED
        return DecideOutcome.DECIDED

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
            closing = self._tools.close_open_calls(snap, by_name)
            change = Change(
                entries=(StopEntry(by=by), *closing.results),
                tool_calls=closing.records,
                resolve=tuple(
                    RequestResolution(request_id=r.id, state=RequestState.CANCELLED, by=by)
                    for r in snap.open_requests
                ),
                status=lifecycle.CANCELLED,
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

    async def remind(self, conversation_id: str, request_id: str) -> None:
        """Post the one reminder of an open request (the sweeper calls this at half-life)."""
        snap = await self._journal.load(conversation_id)
        request = next((r for r in snap.open_requests if r.id == request_id), None)
        if request is not None:
            event = Reminder(request_id=request.id, prompt=request.prompt)
            await self._journal.commit(conversation_id, Change(events=(event,)))

    async def expire(self, conversation_id: str, request_id: str) -> bool:
        """End a conversation whose request ``request_id`` waited too long.

        Open calls get a result, open requests become ``expired`` (compare-and-set),
        and the conversation ends ``cancelled`` with a message. False when the
        request was no longer open.
        """
        snap = await self._journal.load(conversation_id)
        if not any(r.id == request_id for r in snap.open_requests):
            return False
        closing = self._tools.close_open_calls(snap, "expiry of the request")
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
                    status=lifecycle.CANCELLED,
                    events=(
                        *requests_closed(snap, snap.open_requests, "expired"),
                        Expired(request_id=request_id),
                    ),
                ),
            )
        except RequestConflict:
            return False
        return True

    # --- the run -----------------------------------------------------------------

    async def run(self, conversation_id: str, inbox: Inbox | None = None) -> None:
        """Go on while the conversation is ``running``: model turn, tools, repeat.

        A failure inside threadbot (not the model's: those end the run with their
        own message) ends the run ``failed`` with a message in the thread, so a
        conversation is never left ``running`` with no one working on it.
        :class:`core.errors.LeaseLost` is raised as is: another process runs the
        conversation now, and this one must write nothing more.
        """
        try:
            await self._turns(conversation_id, inbox)
        except LeaseLost:
            raise  # another process runs the conversation now: write nothing more
        except Exception as exc:
            log.exception("conversation %s: the run failed", conversation_id)
            try:
                await self._fail(conversation_id, f"Something went wrong inside threadbot: {exc}")
            except Exception:
                log.exception("conversation %s: could not record the failure", conversation_id)

    async def _turns(self, conversation_id: str, inbox: Inbox | None) -> None:
        for _turn in range(self._settings.max_turns):
            if self._suspended:
                return
            snap = await self._journal.load(conversation_id)
            if snap.status.lifecycle is not Lifecycle.RUNNING:
                return
            outcome = await self._tools.continue_turn(
                conversation_id, workflow=self._workflow, stats=self._stats
            )
            if outcome is not TurnOutcome.CONTINUE:
                return
            snap = await self._journal.load(conversation_id)
            if snap.status.lifecycle is not Lifecycle.RUNNING:
                return
            snap = await self._take_notes(conversation_id, snap, inbox)
            if self._suspended:
                return
            try:
                turn = await self._model_turn(snap)
            except ModelError as exc:
                await self._wait_or_fail(conversation_id, exc)
                return
            if await self._after_turn(conversation_id, snap, turn) is TurnOutcome.DONE:
                return
        await self._ask_to_continue(conversation_id)

    async def _take_notes(
        self, conversation_id: str, snap: ConversationSnapshot, inbox: Inbox | None
    ) -> ConversationSnapshot:
        replies = list(inbox()) if inbox else []
        if not replies:
            return snap
        notes = tuple(UserText(author=r.author, text=r.text, role="note") for r in replies)
        keys = tuple(k for r in replies for k in _keys(r))
        await self._journal.commit(conversation_id, Change(entries=notes, handled=keys))
        return await self._journal.load(conversation_id)

    async def _model_turn(self, snap: ConversationSnapshot) -> AssistantTurn:
        position = self._workflow.position(snap.position)
        tools = self._toolbox.select(position.tools)
        system = self._settings.system_prompt
        if position.instructions:
            system = f"{system}\n{position.instructions.strip()}\n"
        request = ModelRequest(
            system=system,
            messages=build_messages(snap.journal),
            tools=[t.spec for t in tools],
            max_tokens=self._settings.max_tokens,
        )
        text: list[str] = []
        calls: list[ToolCall] = []
        usage = ModelUsage(model=self._model.name, input_tokens=0, output_tokens=0)
        stop_reason = "end_turn"
        content: tuple[dict[str, Any], ...] = ()
        async for event in self._model.stream(request):
            match event:
                case TextDelta():
                    text.append(event.text)
                case ToolCallEvent():
                    calls.append(ToolCall(id=event.id, name=event.name, input=event.input))
                case Usage():
                    usage = ModelUsage(
                        model=event.model,
                        input_tokens=event.input_tokens,
                        output_tokens=event.output_tokens,
                        cache_read_tokens=event.cache_read_tokens,
                        cache_write_tokens=event.cache_write_tokens,
                    )
                case TurnEnd():
                    stop_reason = event.stop_reason
                    content = event.content
        return AssistantTurn(
            text="".join(text).strip(),
            tool_calls=tuple(calls),
            stop_reason=stop_reason,
            model=self._model.name,
            content=content,
            usage=usage,
        )

    async def _after_turn(
        self,
        conversation_id: str,
        snap: ConversationSnapshot,
        turn: AssistantTurn,
    ) -> TurnOutcome:
        if not turn.tool_calls:
            answer = turn.text or "(the model gave no answer)"
            journal = (*snap.journal, JournalRecord(seq=snap.last_seq + 1, at=_now(), entry=turn))
            await self._journal.commit(
                conversation_id,
                Change(
                    entries=(turn,),
                    status=lifecycle.DONE,
                    position=self._workflow.next(snap.position, Transition.FINISHED),
                    events=(Answered(text=answer, stats=request_stats(journal)),),
                ),
            )
            return TurnOutcome.DONE
        records, denials = self._tools.admit(turn, snap.last_seq + 1, snap, self._workflow)
        notes = (ProgressNote(text=turn.text),) if turn.text else ()
        await self._journal.commit(
            conversation_id,
            Change(
                entries=(turn, *denials),
                tool_calls=records,
                events=(*notes, *_denial_notes(turn, denials)),
            ),
        )
        self._faults.hit("after_model_response")
        return TurnOutcome.CONTINUE

    async def _stats(self, conversation_id: str) -> RunStats:
        snap = await self._journal.load(conversation_id)
        return request_stats(snap.journal)

    async def _wait_or_fail(self, conversation_id: str, exc: ModelError) -> None:
        """A model failure that a retry may mend waits for a person; others fail."""
        if not exc.retryable:
            await self._fail(conversation_id, str(exc))
            return
        request = self._request(RequestKind.RETRY, str(exc))
        await self._journal.commit(
            conversation_id,
            Change(
                open_request=request,
                status=lifecycle.waiting(WaitKind.RETRY),
                events=(RunFailed(error=str(exc), request_id=request.id),),
            ),
        )

    async def _ask_to_continue(self, conversation_id: str) -> None:
        """The turn cap is reached: ask whether to go on (DESIGN.md: ``waiting(continue)``)."""
        turns = self._settings.max_turns
        request = self._request(RequestKind.CONTINUE, f"{turns} model turns used; go on?")
        await self._journal.commit(
            conversation_id,
            Change(
                open_request=request,
                status=lifecycle.waiting(WaitKind.CONTINUE),
                events=(ContinueAsked(request_id=request.id, turns=turns),),
            ),
        )

    def _request(self, kind: RequestKind, prompt: str) -> PendingRequest:
        expires_at, remind_at = request_times(self._settings)
        return PendingRequest(
            id=uuid.uuid4().hex[:12],
            kind=kind,
            prompt=prompt,
            expires_at=expires_at,
            remind_at=remind_at,
        )

    async def _fail(self, conversation_id: str, error: str) -> None:
        snap = await self._journal.load(conversation_id)
        closing = self._tools.close_open_calls(snap, "the failure", failed=True)
        await self._journal.commit(
            conversation_id,
            Change(
                entries=closing.results,
                tool_calls=closing.records,
                status=lifecycle.FAILED,
                events=(RunFailed(error=error),),
            ),
        )


def _now() -> datetime:
    return datetime.now(UTC)


def _denial_notes(
    turn: AssistantTurn, denials: Sequence[ToolResultEntry]
) -> tuple[ProgressNote, ...]:
    """A progress note per call refused at once (the policy, or a tool not offered)."""
    calls = {call.id: call for call in turn.tool_calls}
    return tuple(
        ProgressNote(
            text=f"{policy.summarize_call(call.name, call.input)} was not run: {denial.content}"
        )
        for denial in denials
        if (call := calls.get(denial.tool_use_id)) is not None
    )


def _keys(message: Start | Reply) -> tuple[str, ...]:
    return (message.delivery_key,) if message.delivery_key else ()
