"""The turn: a model call, its tool calls, again, until the run ends or waits.

:meth:`Turns.go` goes on while the conversation is ``running``: it first
finishes what the last turn still needs (:class:`core.run.tool_calls.ToolCalls`),
takes in replies that arrived meanwhile as notes, calls the model, and commits
its turn with a record per tool call. A turn without tool calls is the answer.
After ``max_turns`` model calls, or when a budget is used up
(:mod:`core.run.budget`), the run asks whether to go on
(:mod:`core.requests.go_on`); a model failure a retry may mend asks whether to
try again, any other failure ends the run ``failed``. Each model call is
:func:`core.run.model_turn.model_turn`. The turn reads the run's snapshot, which
each commit folds its change into (:mod:`core.run.live`): it never reads back what
it just committed.
"""

from __future__ import annotations

import logging

from core.contexts import ContextStrategy, context_strategy, note_change
from core.models.base import Message
from core.requests import go_on
from core.run import live
from core.run.admission import admit_turn, denial_notes
from core.run.budget import budget_reached
from core.run.close_calls import close_open_calls
from core.run.compaction import compaction
from core.run.deps import RunDeps
from core.run.model_turn import model_turn
from core.run.state import Run
from core.run.tool_calls import ToolCalls, TurnOutcome
from core.vocabulary import lifecycle
from core.vocabulary.entries import AssistantTurn, StepEntered, UserText
from core.vocabulary.errors import LeaseLost, ModelError, RequestConflict
from core.vocabulary.inputs import Inbox, delivery_keys
from core.vocabulary.journal import Change
from core.vocabulary.lifecycle import Lifecycle
from core.vocabulary.run_events import ProgressNote, RunAnswered, RunFailed
from core.vocabulary.snapshot import ConversationSnapshot
from core.workflow import Transition

log = logging.getLogger(__name__)


class Turns:
    """The turns of one run: what ``run`` knows, what ``deps`` gives it.

    :meth:`go` runs them; :attr:`tools` drives each turn's tool calls.
    """

    def __init__(self, run: Run, deps: RunDeps) -> None:
        self._run = run
        self._deps = deps
        self.tools = ToolCalls(run, deps)

    async def _commit(self, change: Change) -> None:
        await live.commit(self._run, self._deps.journal, change)

    async def go(self, inbox: Inbox | None = None) -> None:
        """Go on while the conversation is ``running``: model turn, tools, repeat.

        A failure inside threadbot (not the model's: those end the run with their
        own message) ends the run ``failed`` with a message in the thread, so a
        conversation is never left ``running`` with no one working on it.
        :class:`core.vocabulary.errors.LeaseLost` is raised as is: another process runs
        the conversation now, and this one must write nothing more. A
        :class:`core.vocabulary.errors.RequestConflict` from a write beside the run that
        ended the conversation (an expiry, a stop) ends the run quietly.
        """
        cid = self._run.conversation_id
        try:
            await self._turns(inbox)
        except LeaseLost:
            raise  # another process runs the conversation now: write nothing more
        except RequestConflict as exc:
            # A write beside the run (an expiry, a stop) closed what the run was about to
            # close: when that ended the conversation, the run just ends here.
            if await self._still_active():
                await self._failed(exc)
            else:
                log.info("conversation %s: ended beside the run (%s)", cid, exc)
        except Exception as exc:
            await self._failed(exc)

    async def _still_active(self) -> bool:
        try:
            return (await live.reload(self._run, self._deps.journal)).status.active
        except Exception:
            return True  # unknown: record the failure (fail() says so if it cannot)

    async def _failed(self, exc: Exception) -> None:
        cid = self._run.conversation_id
        log.error("conversation %s: the run failed", cid, exc_info=exc)
        try:
            await self.fail(f"Something went wrong inside threadbot: {exc}")
        except Exception:
            log.exception("conversation %s: could not record the failure", cid)

    async def fail(self, error: str) -> None:
        """End the run ``failed`` with ``error`` (safe to show); every open call gets a result."""
        snap = await live.current(self._run, self._deps.journal)
        closing = close_open_calls(snap, "the failure", self._deps.toolbox.read_only, failed=True)
        await self._commit(
            Change(
                entries=closing.results,
                tool_calls=closing.records,
                status=lifecycle.move(snap.status, lifecycle.FAILED),
                events=(RunFailed(error=error),),
            )
        )

    async def _turns(self, inbox: Inbox | None) -> None:
        run, suspended = self._run, self._deps.suspended
        await live.current(run, self._deps.journal)
        for _turn in range(run.settings.max_turns):
            if suspended() or run.snap.status.lifecycle is not Lifecycle.RUNNING:
                return
            if await self.tools.continue_turn() is not TurnOutcome.CONTINUE:
                return
            if run.snap.status.lifecycle is not Lifecycle.RUNNING:
                return
            await self._take_notes(inbox)
            await self._step_told()
            if suspended() or await self._over_budget():
                return
            try:
                await self._context_noted()
                await self._compacted()
                turn = await model_turn(run, self._deps, run.snap)
            except ModelError as exc:
                await self._wait_or_fail(exc)
                return
            if await self._after_turn(turn) is not TurnOutcome.CONTINUE:
                return
        await self._commit(go_on.open_continue(run.snap, run.settings.max_turns, run.opening))

    async def _take_notes(self, inbox: Inbox | None) -> None:
        """Journal the messages that came while the run worked as notes."""
        messages = list(inbox()) if inbox else []
        if not messages:
            return
        settings = self._run.settings
        read = [
            await self._deps.files.read(
                self._run.snap, m, text_limit=settings.file_text_limit, repo=settings.git_repo
            )
            for m in messages
        ]
        notes = tuple(
            UserText(author=m.author, text=m.text, role="note", files=m.blocks) for m in read
        )
        keys = tuple(k for m in read for k in delivery_keys(m))
        await self._commit(Change(entries=notes, handled=keys))

    async def _step_told(self) -> None:
        """Journal the position's instructions first if the journal has none at all (a
        conversation from before they were journaled, when they were in the system
        prompt): the model is told where it is either way."""
        snap = self._run.snap
        if any(isinstance(r.entry, StepEntered) for r in snap.journal):
            return
        step = self._deps.workflow.entered(snap.position, snap.position, first=True)
        if step:
            await self._commit(Change(entries=step))

    async def _over_budget(self) -> bool:
        """Pause with a continue request when a budget is used up (:mod:`core.run.budget`)."""
        run = self._run
        now = run.context.now()
        used_up = await budget_reached(
            run.snap, run.settings.budgets, now, self._deps.channel_spend
        )
        if used_up is None:
            return False
        log.info("conversation %s: the %s budget is used up", run.conversation_id, used_up.scope)
        await self._commit(go_on.open_budget(run.snap, used_up, run.opening))
        return True

    async def _context_noted(self) -> None:
        """Journal the context strategy's state as a note when it changed
        (:func:`core.contexts.note_change`; ``flat``, the default, never has one)."""
        change = note_change(self._run.snap, self._strategy(), "run", ())
        if change is not None:
            await self._commit(change)

    def _strategy(self) -> ContextStrategy:
        settings = self._run.settings
        return context_strategy(settings.context_strategy, keep_turns=settings.context_keep_turns)

    async def _compacted(self) -> None:
        """Summarize the oldest turns first when the context has grown past its share of
        the model's window (:mod:`core.run.compaction`), keeping the turns the context
        strategy keeps; its note is restated if the summary took it."""
        run = self._run

        async def summary_turn(
            snap: ConversationSnapshot, messages: list[Message]
        ) -> AssistantTurn:
            return await model_turn(run, self._deps, snap, messages)

        change = await compaction(run.snap, run.settings, summary_turn, self._strategy().keep_turns)
        if change is not None:
            await self._commit(change)
            await self._context_noted()

    async def _after_turn(self, turn: AssistantTurn) -> TurnOutcome:
        run, workflow = self._run, self._deps.workflow
        snap = run.snap
        totals = run.totals.of(snap.journal, run.context.now(), pending=turn)
        if not turn.tool_calls:
            answer = turn.text or "(the model gave no answer)"
            stats = await self.tools.with_changes(snap, totals)
            await self._commit(
                Change(
                    entries=(turn,),
                    status=lifecycle.move(snap.status, lifecycle.DONE),
                    position=workflow.next(snap.position, Transition.FINISHED),
                    events=(RunAnswered(text=answer, stats=stats),),
                )
            )
            return TurnOutcome.DONE
        records, denials = admit_turn(
            turn, snap.last_seq + 1, snap, workflow, self._deps.toolbox, run.settings.tool_policy
        )
        notes = (ProgressNote(text=turn.text, totals=totals),) if turn.text else ()
        change = Change(
            entries=(turn, *denials),
            tool_calls=records,
            events=(*notes, *denial_notes(turn, denials)),
        )
        ending = self.tools.ends_at_once(records)
        if ending is not None:  # the turn and its ending call are one commit
            outcome = await self.tools.end_with(change, ending)
        else:
            await self._commit(change)
            outcome = TurnOutcome.CONTINUE
        self._deps.faults.hit("after_model_response")
        return outcome

    async def _wait_or_fail(self, exc: ModelError) -> None:
        """A model failure that a retry may mend waits for a person; others fail."""
        if not exc.retryable:
            await self.fail(str(exc))
            return
        await self._commit(go_on.open_retry(self._run.snap, str(exc), self._run.opening))
