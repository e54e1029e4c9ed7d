"""Compaction: when the context nears the model's window, its oldest turns become a summary.

Before a model call, the size of the context is what the newest call reported (its
input, cache reads and writes, and output, all of which the next request sends
again). Past ``compact_at`` of ``context_window`` tokens (the run's settings), the
model is asked for a summary of everything but the newest :data:`KEEP_TURNS`
turns (the run's context strategy's ``keep_turns``: :mod:`core.contexts`), in a
request that is the previous request's prefix (the same system prompt,
tools and messages, so it is served from the prompt cache) with the ask added.
The summary is journaled as a :class:`core.vocabulary.entries.Compacted` entry; from then on
the history starts with it (:class:`core.run.history.History`), so a resume
rebuilds the same context, and each request extends the one before again.

The cut is always just before an assistant turn: every ``tool_use`` before it has
its ``tool_result`` before it too (results are committed before the next call),
so the kept part pairs every call with its result. The context notes in the kept part
that have expired are left out, and the entry says which (``Compacted.dropped``), so a
resume builds the same view (docs/architecture.md, "Context strategies and notes").

When the executor reads its own view (its model differs from the planner's:
:func:`core.run.model_turn.own_plan`), the summary is of that view, and only the
executor's turns since the plan's approval are summarized; the view then starts with
the summary, as the whole history does (:meth:`core.run.history.History.build`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence

from core.contexts import expired_after
from core.models.base import Message
from core.run.executor_view import approval_at
from core.run.history import build_messages
from core.run.settings import EngineSettings
from core.vocabulary.entries import AssistantTurn, Compacted, JournalRecord, StepEntered
from core.vocabulary.journal import Change
from core.vocabulary.requests import PlanApproval
from core.vocabulary.run_events import ProgressNote
from core.vocabulary.snapshot import ConversationSnapshot

log = logging.getLogger(__name__)

ModelTurn = Callable[[ConversationSnapshot, list[Message]], Awaitable[AssistantTurn]]
"""One model call with the run's system prompt and tools and the given messages."""

KEEP_TURNS = 2
"""Assistant turns kept as they are (with what follows them) when the rest is summarized."""

SUMMARY_ASK = (
    "[threadbot: this conversation has grown long. Write a summary of everything above "
    "for yourself to go on from: the request, what was decided and approved and by whom, "
    "what you did and found (files, commands, results), what is left to do, and what "
    "people asked for. Be specific and complete; do not call tools. From now on you will "
    "read this summary in place of what it covers.]"
)


def context_tokens(journal: Sequence[JournalRecord]) -> int | None:
    """The size of the context the newest model call saw, plus its answer, in tokens;
    None when unknown (no call yet, or a compaction since the newest call)."""
    for record in reversed(journal):
        entry = record.entry
        if isinstance(entry, Compacted):
            return None
        if isinstance(entry, AssistantTurn) and entry.usage is not None:
            usage = entry.usage
            return (
                usage.input_tokens
                + usage.cache_read_tokens
                + usage.cache_write_tokens
                + usage.output_tokens
            )
    return None


def cut_at(
    journal: Sequence[JournalRecord], keep_turns: int = KEEP_TURNS, after: int = -1
) -> int | None:
    """The index of the assistant turn the kept part starts with (``len(journal)`` when
    ``keep_turns`` is 0: nothing is kept), or None when there is too little to
    summarize (no more than ``keep_turns`` turns, and at least one, since the newest
    compaction and after the index ``after``: the approval an executor's own view
    starts from)."""
    since = max((i for i, r in enumerate(journal) if isinstance(r.entry, Compacted)), default=-1)
    since = max(since, after)
    turns = [i for i, r in enumerate(journal) if i > since and isinstance(r.entry, AssistantTurn)]
    if len(turns) <= max(keep_turns, 0) or not turns:
        return None
    return turns[-keep_turns] if keep_turns > 0 else len(journal)


def step_before(journal: Sequence[JournalRecord]) -> StepEntered | None:
    """The newest step entered in ``journal`` (in a compaction's summary if not after it)."""
    for record in reversed(journal):
        if isinstance(record.entry, StepEntered):
            return record.entry
        if isinstance(record.entry, Compacted):
            return record.entry.step
    return None


def summary_request(messages: list[Message]) -> list[Message]:
    """``messages`` (the history up to the cut) with the ask for a summary at the end."""
    ask = {"type": "text", "text": SUMMARY_ASK}
    if messages and messages[-1]["role"] == "user":
        last = messages[-1]
        return [*messages[:-1], {"role": "user", "content": [*last["content"], ask]}]
    return [*messages, {"role": "user", "content": [ask]}]


async def compaction(
    snap: ConversationSnapshot,
    settings: EngineSettings,
    model_turn: ModelTurn,
    keep_turns: int | None = KEEP_TURNS,
    plan: PlanApproval | None = None,
) -> Change | None:
    """The change that summarizes ``snap``'s oldest turns, keeping the newest
    ``keep_turns`` whole, or None when its context is within ``compact_at`` of
    ``context_window`` (or there is too little to summarize, or ``keep_turns`` is None,
    or the model wrote no summary). ``plan``: the executor's own view of the history
    from that approved plan on, which the summary's request is made of (None: the
    whole history). Raises :class:`core.vocabulary.errors.ModelError` from the
    summary's call, as from any model call."""
    size = context_tokens(snap.journal)
    if size is None or size < settings.compact_at * settings.context_window:
        return None
    if keep_turns is None:
        return None
    approval = None if plan is None else approval_at(snap.journal, plan)
    cut = cut_at(snap.journal, keep_turns, -1 if approval is None else approval)
    if cut is None:
        return None
    head = snap.journal[:cut]
    summary = await model_turn(snap, summary_request(build_messages(head, plan)))
    if not summary.text:
        log.warning("conversation %s: the model wrote no summary", snap.id)
        return None
    entry = Compacted(
        summary=summary.text,
        through_seq=head[-1].seq,
        step=step_before(head),
        usage=summary.usage,
        dropped=expired_after(snap, head[-1].seq),
    )
    said = f"summarized the oldest part of this conversation ({size:,} tokens of context)"
    return Change(entries=(entry,), events=(ProgressNote(text=said),))
