"""Notes with lifetimes: when a strategy's state is journaled, when a note expires, what
compaction leaves out.

A strategy's state reaches the model only as a :class:`ContextNote` appended to the
journal when it changed (:func:`note_change`), so it lands in the user message after
the tool results and every request still extends the one before. A note expires
``lifetime_turns`` model turns after it was journaled, or when its task (a plan step)
is done (:func:`alive`). An expired note is never restated, and compaction leaves it
out of the part it keeps (:func:`expired_after`, recorded in ``Compacted.dropped``);
an alive note that compaction summarized away is restated once. No message already
sent is rewritten (docs/architecture.md, "Context strategies and notes").
"""

from __future__ import annotations

from collections.abc import Sequence

from core.contexts.base import ContextStrategy
from core.contexts.plan import current_plan
from core.vocabulary.entries import AssistantTurn, Compacted, ContextNote, JournalRecord
from core.vocabulary.journal import Change
from core.vocabulary.snapshot import ConversationSnapshot


def turns_since(journal: Sequence[JournalRecord], seq: int) -> int:
    """Model turns journaled after entry ``seq`` (scans back from the end)."""
    count = 0
    for record in reversed(journal):
        if record.seq <= seq:
            break
        if isinstance(record.entry, AssistantTurn):
            count += 1
    return count


def alive(record: JournalRecord, snapshot: ConversationSnapshot) -> bool:
    """Whether the :class:`ContextNote` of ``record`` still holds in ``snapshot``: fewer
    than its ``lifetime_turns`` model turns since it, and its task not done."""
    note = record.entry
    assert isinstance(note, ContextNote)
    if note.lifetime_turns is not None:
        if turns_since(snapshot.journal, record.seq) >= note.lifetime_turns:
            return False
    if note.task is not None:
        plan = current_plan(snapshot)
        if plan is not None and plan.is_done(note.task):
            return False
    return True


def newest_note(
    journal: Sequence[JournalRecord], scope: str, strategy: str
) -> JournalRecord | None:
    """The newest :class:`ContextNote` of ``scope`` written by ``strategy``, if any."""
    for record in reversed(journal):
        entry = record.entry
        if isinstance(entry, ContextNote) and entry.scope == scope and entry.strategy == strategy:
            return record
    return None


def in_view(journal: Sequence[JournalRecord], record: JournalRecord) -> bool:
    """Whether the model still reads ``record`` as journaled: no compaction after it
    summarized it (``through_seq``) or left it out (``dropped``)."""
    for later in reversed(journal):
        if later.seq <= record.seq:
            return True
        entry = later.entry
        if isinstance(entry, Compacted):
            return entry.through_seq < record.seq and record.seq not in entry.dropped
    return True


def note_change(
    snapshot: ConversationSnapshot,
    strategy: ContextStrategy,
    scope_id: str,
    path: Sequence[str] = (),
) -> Change | None:
    """The change that journals ``strategy``'s state for scope ``scope_id`` as a
    :class:`ContextNote`, or None when there is nothing to tell.

    Something to tell: the state (:meth:`ContextStrategy.note`; None says nothing)
    differs from the newest note of that scope and strategy, or equals it while that
    note is alive but compaction took it out of the model's view (restated with the
    turns it has left). An expired note is not restated. ``path``: the nested scopes'
    tasks, from the run's down (empty for the run itself).
    """
    note = strategy.note(snapshot, path)
    if note is None:
        return None
    newest = newest_note(snapshot.journal, scope_id, strategy.name)
    lifetime = note.lifetime_turns
    if newest is not None:
        said = newest.entry
        assert isinstance(said, ContextNote)
        if said.text == note.text and said.task == note.task:
            if in_view(snapshot.journal, newest) or not alive(newest, snapshot):
                return None
            if said.lifetime_turns is not None:  # restated with the turns it has left
                lifetime = said.lifetime_turns - turns_since(snapshot.journal, newest.seq)
    entry = ContextNote(
        scope=scope_id,
        strategy=strategy.name,
        text=note.text,
        lifetime_turns=lifetime,
        task=note.task,
    )
    return Change(entries=(entry,))


def expired_after(snapshot: ConversationSnapshot, through_seq: int) -> tuple[int, ...]:
    """The ``seq`` of each :class:`ContextNote` after ``through_seq`` that has expired in
    ``snapshot``: what a compaction summarizing up to ``through_seq`` leaves out."""
    return tuple(
        record.seq
        for record in snapshot.journal
        if record.seq > through_seq
        and isinstance(record.entry, ContextNote)
        and not alive(record, snapshot)
    )
