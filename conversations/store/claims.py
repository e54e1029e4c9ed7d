"""Delivery claims: one process at a time delivers a conversation's outbox rows.

Several ``threadbot run`` processes on one database each run a deliverer; without a
claim each would post every pending row (docs/architecture.md, "Several
instances"). A claim is an owner (the process's instance name, as the run lease's),
an expiry (UTC) and an epoch per conversation, kept by :class:`DeliveryClaims` (in
SQL: three columns of ``conversations``, :mod:`conversations.store.sql.claims`). It
is per conversation, not per row, so a conversation's rows go out in order, from one
process. The epoch goes up each time the claim is taken, never when it is renewed.

The deliverer takes it before it sends a conversation's rows and keeps it while it
sends (:mod:`conversations.outbox._claims`); a conversation opened by a process is
created claimed by it (``open_conversation(lease=...)``), so the first rows cost no
claim of their own. The commit of a send, ``mark_sent``, is fenced like a run's
commits (:mod:`conversations.store.leases`): made under :func:`holding`, it changes
nothing and raises :class:`ClaimLost` when the claim is no longer this process's at
that epoch.
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

__all__ = [
    "Claim",
    "ClaimLost",
    "DeliveryClaims",
    "current_claim",
    "deliver_under",
    "holding",
    "opened_claim",
]

OPENED_CLAIM_EPOCH = 1
"""The claim epoch of a conversation created claimed (``open_conversation(lease=...)``)."""


@dataclass(frozen=True)
class Claim:
    """The delivery claim ``owner`` holds on a conversation, at ``epoch``.

    ``taken_over``: whether the claim was taken from another process's lapsed claim
    (rows it left pending may have been sent already: they are sent ``maybe_sent``).
    """

    conversation_id: str
    owner: str
    epoch: int
    taken_over: bool = False


def opened_claim(conversation_id: str, owner: str) -> Claim:
    """The claim ``owner`` holds on a conversation it just opened."""
    return Claim(conversation_id, owner, OPENED_CLAIM_EPOCH)


class ClaimLost(Exception):
    """A fenced write found the delivery claim held by another process (or at another
    epoch): this process no longer delivers the conversation; nothing was written."""

    def __init__(self, claim: Claim) -> None:
        super().__init__(
            f"the delivery claim of conversation {claim.conversation_id} "
            f"(epoch {claim.epoch}) was taken over"
        )
        self.claim = claim


class DeliveryClaims(Protocol):
    """Who delivers each conversation's outbox rows (see the module docstring)."""

    async def claim_delivery(
        self,
        conversation_id: str,
        owner: str,
        *,
        ttl: float,
        now: datetime | None = None,
        dead: str | None = None,
    ) -> Claim | None:
        """Take the claim for ``ttl`` seconds with a new epoch when it is free, lapsed,
        ``owner``'s own or ``dead``'s (a process known to be gone:
        :func:`conversations.store.owners.holder_gone`); None when another process
        holds it (or no such conversation).
        One statement; ``taken_over`` says whether another process held it last.
        Taking one's own claim again renews it (at a new epoch)."""
        ...

    async def release_claims(self, held: Collection[Claim]) -> None:
        """Give ``held`` up (at shutdown); those no longer held are left as they are."""
        ...

    async def claim_owner(self, conversation_id: str) -> str | None:
        """Who holds the conversation's delivery claim now (lapsed or not), if anyone."""
        ...


_current: ContextVar[Claim | None] = ContextVar("threadbot_claim", default=None)


def current_claim(conversation_id: str) -> Claim | None:
    """The claim under which this task delivers ``conversation_id``, if it does."""
    claim = _current.get()
    return claim if claim is not None and claim.conversation_id == conversation_id else None


def deliver_under(claim: Claim) -> None:
    """Fence the outbox writes this task makes for ``claim``'s conversation by it, from
    now until the task ends or calls this again (a delivery worker is a task of its own)."""
    _current.set(claim)


@contextlib.contextmanager
def holding(claim: Claim) -> Iterator[None]:
    """Fence the outbox writes this task makes for ``claim``'s conversation by it."""
    token = _current.set(claim)
    try:
        yield
    finally:
        _current.reset(token)
