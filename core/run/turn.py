"""The turn: a model call, its tool calls, again, until the run ends or waits.

:meth:`RunLoop.run` goes on while the conversation is ``running``: it first
finishes what the last turn still needs (:class:`core.run.tool_calls.ToolRunner`),
takes in replies that arrived meanwhile as notes, calls the model, and commits
its turn with a record per tool call. A turn without tool calls is the answer.
After ``max_turns`` model calls, or when a budget is used up
(:mod:`core.run.budget`), the run asks whether to go on
(:mod:`core.requests.go_on`); a model failure a retry may mend asks whether to
try again, any other failure ends the run ``failed``. Each call is journaled
with its tokens, latency, price entry and cost (:mod:`core.pricing`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from core import tracing
from core.faults import NO_FAULTS, Faults
from core.files import FileReader
from core.models.base import (
    Message,
    Model,
    ModelRequest,
    TextDelta,
    ToolCallEvent,
    TurnEnd,
    Usage,
)
from core.outputs import OutputCache
from core.pricing import call_cost, price_for
from core.requests import go_on
from core.requests.common import Opening
from core.run.admission import admit_turn, denial_notes
from core.run.budget import budget_reached
from core.run.close_calls import close_open_calls
from core.run.compaction import compaction
from core.run.history import History
from core.run.settings import ChannelSpend, RunSettings
from core.run.stats import RequestTotals
from core.run.tool_calls import ToolRunner, TurnOutcome
from core.secrets import NO_SECRETS, Redactor
from core.tools.base import Toolbox
from core.tools.workspaces import Workspaces
from core.vocabulary import lifecycle
from core.vocabulary.entries import AssistantTurn, ModelUsage, StepEntered, ToolCall, UserText
from core.vocabulary.errors import LeaseLost, ModelError, RequestConflict
from core.vocabulary.inputs import Inbox, delivery_keys
from core.vocabulary.journal import Change, Journal
from core.vocabulary.lifecycle import Lifecycle
from core.vocabulary.run_events import ProgressNote, RunAnswered, RunFailed
from core.vocabulary.snapshot import ConversationSnapshot
from core.workflow import Transition, Workflow

log = logging.getLogger(__name__)


class RunLoop:
    """Runs a conversation's turns for the engine (:class:`core.run.engine.Engine`).

    ``suspended()`` True means: start no new step (the process is stopping);
    ``redactor`` takes secrets out of tool results and notes (:class:`ToolRunner`).
    """

    def __init__(
        self,
        *,
        journal: Journal,
        model: Model,
        toolbox: Toolbox,
        workflow: Workflow,
        settings: RunSettings,
        opening: Opening,
        faults: Faults = NO_FAULTS,
        suspended: Callable[[], bool] = lambda: False,
        redactor: Redactor = NO_SECRETS,
        workspaces: Workspaces | None = None,
        channel_spend: ChannelSpend | None = None,
        outputs: OutputCache | None = None,
    ) -> None:
        self._journal = journal
        self._channel_spend = channel_spend
        self._model = model
        self._toolbox = toolbox
        self._workflow = workflow
        self._settings = settings
        self._opening = opening
        self._faults = faults
        self._suspended = suspended
        self._histories: dict[str, History] = {}
        """The message history of each conversation a run is at, built as it grows."""
        self.files = FileReader(workspaces=workspaces, settings=settings.get, redactor=redactor)
        """Reads the files shared with a message into content blocks (:mod:`core.files`)."""
        self.tools = ToolRunner(
            journal=journal,
            toolbox=toolbox,
            settings=settings,
            opening=opening,
            faults=faults,
            suspended=suspended,
            redactor=redactor,
            workspaces=workspaces,
            outputs=outputs,
        )

    async def run(self, conversation_id: str, inbox: Inbox | None = None) -> None:
        """Go on while the conversation is ``running``: model turn, tools, repeat.

        A failure inside threadbot (not the model's: those end the run with their
        own message) ends the run ``failed`` with a message in the thread, so a
        conversation is never left ``running`` with no one working on it.
        :class:`core.vocabulary.errors.LeaseLost` is raised as is: another process runs the
        conversation now, and this one must write nothing more. A
        :class:`core.vocabulary.errors.RequestConflict` from a write beside the run that ended
        the conversation (an expiry, a stop) ends the run quietly.
        """
        try:
            await self._turns(conversation_id, inbox)
        except LeaseLost:
            raise  # another process runs the conversation now: write nothing more
        except RequestConflict as exc:
            # A write beside the run (an expiry, a stop) closed what the run was about to
            # close: when that ended the conversation, the run just ends here.
            if await self._still_active(conversation_id):
                await self._failed(conversation_id, exc)
            else:
                log.info("conversation %s: ended beside the run (%s)", conversation_id, exc)
        except Exception as exc:
            await self._failed(conversation_id, exc)
        finally:
            self._histories.pop(conversation_id, None)  # a waiting conversation holds nothing
            self.tools.totals.pop(conversation_id, None)

    async def _still_active(self, conversation_id: str) -> bool:
        try:
            return (await self._journal.load(conversation_id)).status.active
        except Exception:
            return True  # unknown: record the failure (fail() says so if it cannot)

    async def _failed(self, conversation_id: str, exc: Exception) -> None:
        log.error("conversation %s: the run failed", conversation_id, exc_info=exc)
        try:
            await self.fail(conversation_id, f"Something went wrong inside threadbot: {exc}")
        except Exception:
            log.exception("conversation %s: could not record the failure", conversation_id)

    def _history(self, conversation_id: str) -> History:
        return self._histories.setdefault(conversation_id, History())

    async def fail(self, conversation_id: str, error: str) -> None:
        """End the run ``failed`` with ``error`` (safe to show); every open call gets a result."""
        snap = await self._journal.load(conversation_id)
        closing = close_open_calls(snap, "the failure", self.tools.read_only, failed=True)
        await self._journal.commit(
            conversation_id,
            Change(
                entries=closing.results,
                tool_calls=closing.records,
                status=lifecycle.move(snap.status, lifecycle.FAILED),
                events=(RunFailed(error=error),),
            ),
        )

    async def _turns(self, conversation_id: str, inbox: Inbox | None) -> None:
        for _turn in range(self._settings.get().max_turns):
            if self._suspended():
                return
            snap = await self._journal.load(conversation_id)
            if snap.status.lifecycle is not Lifecycle.RUNNING:
                return
            outcome = await self.tools.continue_turn(conversation_id, workflow=self._workflow)
            if outcome is not TurnOutcome.CONTINUE:
                return
            snap = await self._journal.load(conversation_id)
            if snap.status.lifecycle is not Lifecycle.RUNNING:
                return
            snap = await self._take_notes(conversation_id, snap, inbox)
            snap = await self._step_told(conversation_id, snap)
            if self._suspended():
                return
            if await self._over_budget(conversation_id, snap):
                return
            try:
                snap = await self._compacted(conversation_id, snap)
                turn = await self._model_turn(snap)
            except ModelError as exc:
                await self._wait_or_fail(conversation_id, exc)
                return
            if await self._after_turn(conversation_id, snap, turn) is TurnOutcome.DONE:
                return
        snap = await self._journal.load(conversation_id)
        change = go_on.open_continue(snap, self._settings.get().max_turns, self._opening)
        await self._journal.commit(conversation_id, change)

    async def _take_notes(
        self, conversation_id: str, snap: ConversationSnapshot, inbox: Inbox | None
    ) -> ConversationSnapshot:
        replies = list(inbox()) if inbox else []
        if not replies:
            return snap
        replies = [await self.files.read(snap, r) for r in replies]
        notes = tuple(
            UserText(author=r.author, text=r.text, role="note", files=r.blocks) for r in replies
        )
        keys = tuple(k for r in replies for k in delivery_keys(r))
        await self._journal.commit(conversation_id, Change(entries=notes, handled=keys))
        return await self._journal.load(conversation_id)

    async def _step_told(
        self, conversation_id: str, snap: ConversationSnapshot
    ) -> ConversationSnapshot:
        """``snap``, with its position's instructions journaled first if the journal has
        none at all (a conversation from before they were journaled, when they were
        in the system prompt): the model is told where it is either way."""
        if any(isinstance(r.entry, StepEntered) for r in snap.journal):
            return snap
        step = self._workflow.entered(snap.position, snap.position, first=True)
        if not step:
            return snap
        await self._journal.commit(conversation_id, Change(entries=step))
        return await self._journal.load(conversation_id)

    async def _over_budget(self, conversation_id: str, snap: ConversationSnapshot) -> bool:
        """Pause with a continue request when a budget is used up (:mod:`core.run.budget`)."""
        budgets = self._settings.get().budgets
        now = self._opening.context.now()
        used_up = await budget_reached(snap, budgets, now, self._channel_spend)
        if used_up is None:
            return False
        log.info("conversation %s: the %s budget is used up", conversation_id, used_up.scope)
        await self._journal.commit(conversation_id, go_on.open_budget(snap, used_up, self._opening))
        return True

    async def _compacted(
        self, conversation_id: str, snap: ConversationSnapshot
    ) -> ConversationSnapshot:
        """``snap``, with its oldest turns summarized first when its context has grown
        past its share of the model's window (:mod:`core.run.compaction`)."""
        change = await compaction(snap, self._settings.get(), self._model_turn)
        if change is None:
            return snap
        await self._journal.commit(conversation_id, change)
        return await self._journal.load(conversation_id)

    async def _model_turn(
        self, snap: ConversationSnapshot, messages: list[Message] | None = None
    ) -> AssistantTurn:
        """One model call, in its span with its usage and cost (:func:`core.tracing.model_call`)."""
        settings = self._settings.get()
        model = settings.model or self._model.name
        with tracing.model_call(model, max_tokens=settings.max_tokens) as span:
            turn = await self._model_call(snap, messages)
            span.answered(turn.usage, turn.stop_reason)
            return turn

    async def _model_call(
        self, snap: ConversationSnapshot, messages: list[Message] | None
    ) -> AssistantTurn:
        # The same system prompt and tools in every position: the request's cached
        # prefix. A position's instructions are in the history (StepEntered), and the
        # tools it does not offer are refused when called (core.run.admission).
        tools = self._toolbox.select(["all"])
        settings = self._settings.get()
        request = ModelRequest(
            system=settings.system,
            messages=messages or self._history(snap.id).build(snap.journal),
            tools=[t.spec for t in tools],
            max_tokens=settings.max_tokens,
            model=settings.model,
            fallbacks=settings.fallback_models,
        )
        text: list[str] = []
        calls: list[ToolCall] = []
        model = settings.model or self._model.name
        usage = ModelUsage(model=model, input_tokens=0, output_tokens=0)
        stop_reason = "end_turn"
        content: tuple[dict[str, Any], ...] = ()
        started = time.monotonic()
        async for event in self._model.stream(request):
            match event:
                case TextDelta():
                    text.append(event.text)
                case ToolCallEvent():
                    calls.append(ToolCall(id=event.id, name=event.name, input=event.input))
                case Usage():
                    model = event.model  # the model that answered (maybe a fallback)
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
            model=model,
            content=content,
            usage=self._priced(usage, snap.position, time.monotonic() - started),
        )

    def _priced(self, usage: ModelUsage, position: str, seconds: float) -> ModelUsage:
        """``usage`` with the call's run, position, latency, price entry and cost."""
        price = price_for(self._settings.get().prices, usage.model)
        cost = None
        if price is not None:
            cost = call_cost(
                price.rates,
                input=usage.input_tokens,
                output=usage.output_tokens,
                cache_read=usage.cache_read_tokens,
                cache_write=usage.cache_write_tokens,
            )
        return usage.model_copy(
            update={
                "latency_ms": round(seconds * 1000),
                "price_id": None if price is None else price.id,
                "cost_micro_usd": cost,
                "run_id": self._settings.run_id,
                "position": position,
            }
        )

    async def _after_turn(
        self, conversation_id: str, snap: ConversationSnapshot, turn: AssistantTurn
    ) -> TurnOutcome:
        now = self._opening.context.now()
        request = self.tools.totals.setdefault(conversation_id, RequestTotals())
        totals = request.of(snap.journal, now, pending=turn)
        if not turn.tool_calls:
            answer = turn.text or "(the model gave no answer)"
            stats = await self.tools.with_changes(conversation_id, snap, totals)
            await self._journal.commit(
                conversation_id,
                Change(
                    entries=(turn,),
                    status=lifecycle.move(snap.status, lifecycle.DONE),
                    position=self._workflow.next(snap.position, Transition.FINISHED),
                    events=(RunAnswered(text=answer, stats=stats),),
                ),
            )
            return TurnOutcome.DONE
        records, denials = admit_turn(
            turn,
            snap.last_seq + 1,
            snap,
            self._workflow,
            self._toolbox,
            self._settings.get().tool_policy,
        )
        notes = (ProgressNote(text=turn.text, totals=totals),) if turn.text else ()
        await self._journal.commit(
            conversation_id,
            Change(
                entries=(turn, *denials),
                tool_calls=records,
                events=(*notes, *denial_notes(turn, denials)),
            ),
        )
        self._faults.hit("after_model_response")
        return TurnOutcome.CONTINUE

    async def _wait_or_fail(self, conversation_id: str, exc: ModelError) -> None:
        """A model failure that a retry may mend waits for a person; others fail."""
        if not exc.retryable:
            await self.fail(conversation_id, str(exc))
            return
        snap = await self._journal.load(conversation_id)
        await self._journal.commit(conversation_id, go_on.open_retry(snap, str(exc), self._opening))
