"""Views of the journal for scopes whose model reads a view of its own (the expert's).

A scope entered with a ``role`` (:class:`core.vocabulary.entries.ScopeEntered`: the
expert's, in a delegation, :mod:`core.run.delegation`) is left out of the run's
history, from its entry to its exit (:class:`OwnViews`, which
:class:`core.run.history.History` applies first), and its own model reads
:func:`scope_view`, which starts with its brief (docs/architecture.md, "The agent as a
composition").
"""

from __future__ import annotations

from collections.abc import Sequence

from core.vocabulary.entries import JournalRecord, ScopeEntered, ScopeLeft, StopEntry, UserText


def scope_view(journal: Sequence[JournalRecord], scope_id: str) -> list[JournalRecord]:
    """What the model of the scope ``scope_id`` reads (a scope with a view of its own: see
    the module docstring): the records from its newest entry on, to its exit or the
    journal's end; empty when it was never entered."""
    start = None
    for at in range(len(journal) - 1, -1, -1):
        entry = journal[at].entry
        if isinstance(entry, ScopeEntered) and entry.scope == scope_id:
            start = at
            break
    if start is None:
        return []
    view: list[JournalRecord] = []
    for record in journal[start + 1 :]:
        if isinstance(record.entry, ScopeLeft) and record.entry.scope == scope_id:
            break
        view.append(record)
    return view


class OwnViews:
    """The records of ``journal`` outside every scope with a view of its own (see the module
    docstring; such a scope's part ends at its exit, or at a stop or a new request,
    which end its work), for a journal that grows at its end: each call reads only the records
    appended since the last, and gives the journal itself while no such scope was
    entered. Any other journal (shorter, or not going on from the records read) is
    read again whole."""

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self._read = 0
        self._last: object = None
        self._inside: str | None = None
        """The scope with a view of its own the journal is in at its end, if any."""
        self._kept: list[JournalRecord] = []
        self._any = False
        """Whether a record was left out."""

    def __call__(self, journal: Sequence[JournalRecord]) -> Sequence[JournalRecord]:
        """``journal`` without the records of those scopes (the same records, in order),
        but for the notes people sent meanwhile (a note is for the run, whoever works:
        the expert reads it in its view, and the run's model after it)."""
        read = self._read
        if read and (len(journal) < read or journal[read - 1].entry is not self._last):
            self._reset()
        for record in journal[self._read :]:
            entry = record.entry
            if self._inside is None and isinstance(entry, ScopeEntered) and entry.role:
                self._inside = entry.scope
            if self._inside is None:
                self._kept.append(record)
                continue
            if isinstance(entry, StopEntry) or (
                isinstance(entry, UserText) and entry.role == "request"
            ):
                self._inside = None  # a stop, or a new request, ends the scope's work
                self._kept.append(record)
                continue
            if isinstance(entry, UserText) and entry.role == "note":
                self._kept.append(record)  # people's words while it worked: the run's too
                continue
            self._any = True
            if isinstance(entry, ScopeLeft) and entry.scope == self._inside:
                self._inside = None
        self._read = len(journal)
        self._last = journal[-1].entry if journal else None
        return self._kept if self._any else journal
