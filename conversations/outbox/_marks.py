"""Marks held back: a send that changes nothing when repeated is marked with the next one.

A session's status, or an edit of a request's own message (its closing, a plan card's
steps), shows the same when it is sent again
(:func:`conversations.outbox._attempt.harmless_again`). Marking such a row sent can
therefore wait: its mark is held here and written with the conversation's next mark, in
the same ``UPDATE`` (each row keeps its own message id), or alone once it has waited
``wait`` seconds, at a drain, or when the deliverer stops (docs/architecture.md, "One
mention, one approval, one stop"). A crash meanwhile leaves such rows pending: they are
sent again after the restart, in their place, before what follows them, which shows
the same. One write for several sends: a story's statuses and card edits ride on its
posts' marks.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Container, Sequence

from conversations.store import PendingSend
from conversations.store.claims import ClaimLost

Held = dict[int, tuple[PendingSend, str | None]]
"""Rows sent whose marks are held back, by id, each with the message id it went out as."""


class HeldMarks:
    """The marks held back, by conversation, each for ``wait`` seconds at most."""

    def __init__(self, wait: float = 1.0) -> None:
        self.wait = wait
        self._held: dict[str, Held] = {}
        self._at: dict[str, float] = {}
        """When each conversation's oldest mark held now was held (clock seconds)."""

    def __bool__(self) -> bool:
        """Whether any mark is held."""
        return bool(self._held)

    def hold(self, rows: Sequence[PendingSend], message_id: str | None, now: float) -> None:
        """Hold the marks of ``rows`` (of one conversation), sent as ``message_id`` at ``now``."""
        conversation_id = rows[0].conversation_id
        held = self._held.setdefault(conversation_id, {})
        held.update((row.id, (row, message_id)) for row in rows)
        self._at.setdefault(conversation_id, now)

    def take(self, conversation_id: str) -> tuple[Held, float | None]:
        """The conversation's marks held, no longer held here (with when they were)."""
        return self._held.pop(conversation_id, {}), self._at.pop(conversation_id, None)

    def put_back(self, conversation_id: str, held: Held, at: float | None) -> None:
        """Hold again what :meth:`take` gave (its write failed)."""
        if held and at is not None:
            self._held.setdefault(conversation_id, {}).update(held)
            self._at[conversation_id] = min(self._at.get(conversation_id, at), at)

    def due(self, now: float, *, every: bool = False) -> list[str]:
        """The conversations whose marks have waited ``wait`` seconds by ``now`` (``every``:
        all that hold any)."""
        return [cid for cid, at in self._at.items() if every or now >= at + self.wait]

    def next_due(self) -> float | None:
        """When the marks held longest fall due, None when none is held."""
        return min(self._at.values()) + self.wait if self._at else None


async def write_due(
    conversation_ids: Sequence[str],
    write: Callable[[str], Awaitable[None]],
    lost: Callable[[ClaimLost], None],
    *,
    busy: Container[str] = (),
) -> None:
    """``write`` the marks held of ``conversation_ids``, each in one write, but those of
    ``busy`` conversations (a worker's next mark takes them); a claim found taken over
    is ``lost`` (that process sends the rows again)."""
    for conversation_id in conversation_ids:
        if conversation_id in busy:
            continue
        try:
            await write(conversation_id)
        except ClaimLost as taken:
            lost(taken)
