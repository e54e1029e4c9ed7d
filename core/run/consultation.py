"""``ask_expert``: one consultation of the expert model, its answer the call's result.

The executor (or the planner) asks a stronger model one question; threadbot asks it
and puts the answer in the call's result (docs/architecture.md, "The agent as a
composition"). The expert's request (:func:`expert_request`):

- the run's system prompt and the same tools as every request of the run
  (:func:`core.run.model_turn.tools_of`), so the expert's consultations share one
  cached prefix (a cache is per model); ``tool_choice`` ``none``, so it answers in
  prose and runs nothing. The tools must be there all the same: the Messages API
  refuses a history holding ``tool_use`` blocks without them, and a ``tool_choice``
  without them
  (https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/implement-tool-use);
  a change of ``tool_choice`` only invalidates the cache of the message blocks
  (https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching);
- the conversation up to the turn before the one that asks: the assistant turn
  that calls ``ask_expert`` is left out, so every ``tool_use`` before it has its
  ``tool_result`` and the history ends with a user message
  (:func:`core.run.history.build_messages` of the journal before that turn);
- the question last: a text block at the end of that user message, after its tool
  results (the API takes consecutive user turns as one anyway:
  https://docs.anthropic.com/en/api/messages).

Its model is the expert's (``expert_model``, no fallbacks: a weaker model is no
expert), role ``expert``: its usage is journaled and priced as every call's, and
shows in the footer and ``threadbot usage --by role``.

A budget per conversation, layered (``expert_consultations``, ``expert_budget_usd``),
counted from the journal (:class:`core.vocabulary.entries.ExpertConsulted`), so a
restart changes nothing: the answered consultations and their priced cost. When
either is spent the call is refused before the expert is asked: its result says
which budget, and it ends ``failed``, so it counts toward the failure streak
(:mod:`core.run.escalation`); so does an expert whose API call fails (its error is
the result), never the run. Without an expert (or with no consultation allowed) the
tool is not offered (:func:`core.tools.control.offered`); a call all the same (the
settings changed since its turn) is ``denied`` with :data:`core.tools.control.NO_EXPERT`.

Every consultation is an ``ExpertConsulted`` entry committed with the call's result,
a progress note (``🎓 asked the expert: <question>``) and a ``threadbot.ask_expert``
span (:meth:`core.tracing.RunSpan.consultation`). A consultation cut off by a crash
is asked again when the run goes on (the call is still ``approved``), as a
read-only call is run again.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from core.models.base import Message, ModelRequest
from core.policy.summary import shorten
from core.pricing import dollars
from core.run.deps import RunDeps
from core.run.history import build_messages
from core.run.model_turn import answer, tools_of
from core.run.one_call import finish_call
from core.run.settings import EngineSettings
from core.run.state import Run
from core.tools.base import ToolOutput
from core.tools.control import NO_EXPERT, AskExpert
from core.vocabulary.entries import ExpertConsulted, JournalRecord
from core.vocabulary.errors import ModelError
from core.vocabulary.tool_records import ToolCallRecord, ToolState

log = logging.getLogger(__name__)

NOTE_WIDTH = 120
"""Characters of the question the thread's note shows."""
ASKED = (
    "[threadbot: you are the expert. The agent doing this work asks you the question "
    "below; answer it in prose (you cannot call tools here): your answer is its tool "
    "result.]\n"
)
"""What leads the question in the expert's request."""


@dataclass(frozen=True)
class Spent:
    """What the conversation's consultations used: ``answered`` of them, costing
    ``micro_usd`` (their priced calls)."""

    answered: int = 0
    micro_usd: int = 0

    def refusal(self, settings: EngineSettings) -> str | None:
        """Why the next consultation is refused under ``settings``' budget, or None."""
        limit = settings.expert_consultations
        if self.answered >= limit:
            made = "consultation" if limit == 1 else "consultations"
            return f"{self.answered} of {limit} {made} made"
        cap = settings.expert_budget_micro_usd
        if cap is not None and self.micro_usd >= cap:
            return f"{dollars(self.micro_usd)} of {dollars(cap)} spent on consultations"
        return None


def spent(journal: Sequence[JournalRecord]) -> Spent:
    """The consultations answered in ``journal`` (the whole conversation's) and their cost."""
    answered = micro_usd = 0
    for record in journal:
        entry = record.entry
        if isinstance(entry, ExpertConsulted) and entry.outcome == "answered":
            answered += 1
            if entry.usage is not None:
                micro_usd += entry.usage.cost_micro_usd or 0
    return Spent(answered, micro_usd)


def expert_request(run: Run, deps: RunDeps, record: ToolCallRecord, question: str) -> ModelRequest:
    """The expert's request for the ``ask_expert`` call ``record`` (see the module
    docstring): the run's system prompt and tools, ``tool_choice`` ``none``, the
    history before the call's turn and ``question`` last."""
    settings = run.settings
    journal = run.snap.journal
    before = journal[: bisect.bisect_left(journal, record.turn_seq, key=lambda r: r.seq)]
    return ModelRequest(
        system=settings.system,
        messages=asking(build_messages(before), question),
        tools=tools_of(run, deps),
        tool_choice="none",
        max_tokens=settings.max_tokens,
        model=settings.model_of("expert"),
        role="expert",
    )


def asking(messages: list[Message], question: str) -> list[Message]:
    """``messages`` with ``question`` (led by :data:`ASKED`) at the end: the last block of
    the last user message (after its tool results), or a user message of its own when
    the history ends with the assistant's."""
    block: dict[str, Any] = {"type": "text", "text": ASKED + question}
    if messages and messages[-1]["role"] == "user":
        last = messages[-1]
        content = last["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        return [*messages[:-1], {**last, "content": [*blocks, block]}]
    return [*messages, {"role": "user", "content": [block]}]


async def consult(run: Run, deps: RunDeps, record: ToolCallRecord, call: AskExpert) -> None:
    """Do the ``ask_expert`` call ``record`` (its input ``call``): ask the expert, or refuse
    it, and commit its result with the consultation's entry and note, in its span.
    Raises only what the store raises for a commit (a model failure is the result)."""
    settings = run.settings
    expert = settings.model_of("expert")
    if expert is None or not settings.consults_expert:
        output = ToolOutput(content=NO_EXPERT, note="", is_error=True)
        await finish_call(run, deps, record, output, state=ToolState.DENIED)
        return
    question = deps.redactor.redact(call.question)
    shown = shorten(" ".join(question.split()), NOTE_WIDTH)
    used = spent(run.snap.journal)
    with run.span.consultation(record, expert) as span:
        refusal = used.refusal(settings)
        if refusal is not None:
            log.info("%s: ask_expert refused: %s", run.conversation_id, refusal)
            content = (
                f"Not asked: this conversation's budget for the expert is spent ({refusal}). "
                "Go on without the expert, or ask the people with ask_user."
            )
            note = f"🎓 the expert was not asked: its budget here is spent ({refusal})"
            await _ended(run, deps, record, question, "refused", refusal, content, note)
            span.ended("refused", used.answered)
            return
        try:
            request = expert_request(run, deps, record, question)
            turn = await answer(run, deps, request, run.snap.position)
        except ModelError as exc:
            log.warning("%s: the expert failed: %s", run.conversation_id, exc)
            content = f"The expert could not be asked: {exc}"
            note = f"🎓 the expert could not answer: {shorten(str(exc), NOTE_WIDTH)}"
            await _ended(run, deps, record, question, "failed", str(exc), content, note)
            span.ended("failed", used.answered)
            return
        said = turn.text or "(the expert gave no answer)"
        entry = ExpertConsulted(tool_use_id=record.tool_use_id, question=question, usage=turn.usage)
        output = ToolOutput(content=said, note=f"🎓 asked the expert: {shown}")
        await finish_call(run, deps, record, output, before=(entry,))
        span.ended("answered", used.answered + 1)


async def _ended(
    run: Run,
    deps: RunDeps,
    record: ToolCallRecord,
    question: str,
    outcome: Literal["failed", "refused"],
    reason: str,
    content: str,
    note: str,
) -> None:
    """Commit a consultation that got no answer: its entry, and the call ``failed``."""
    entry = ExpertConsulted(
        tool_use_id=record.tool_use_id,
        question=question,
        outcome=outcome,
        reason=deps.redactor.redact(reason),
    )
    output = ToolOutput(content=content, note=note, is_error=True)
    await finish_call(run, deps, record, output, state=ToolState.FAILED, before=(entry,))
