"""The ``AuditTrail`` interface of the store: every decision and every refused attempt.

One row per :class:`core.vocabulary.audit.Audited`: who (a platform user id, never a
display name), how (the means), on what (the request's kind and id, the plan version),
when (the store's clock, UTC) and what followed (the outcome and its reason), with the
conversation and the place (platform, workspace, channel: the channel whose settings
apply, a Discord thread's parent). A decision's row is written by the journal in the
commit that makes the decision (``Change.audit``); a refused attempt that commits
nothing is written by :meth:`AuditTrail.record`, with the notice that answers it in the
same write. Rows are kept for good and read by ``threadbot audit``
(docs/architecture.md, "The audit trail").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from conversations.events import PlatformRef
from conversations.store.records import Outgoing
from core.vocabulary.audit import Audited


@dataclass(frozen=True)
class AuditEntry:
    """One row of the audit trail as stored: its ``id`` (growing), ``at`` (UTC), the
    conversation (None: a ``/stop`` in a channel, about none), the place, and the
    :class:`core.vocabulary.audit.Audited` fields (``request_kind`` and ``version`` read
    from the request when the recorder did not know them)."""

    id: int
    at: datetime
    conversation_id: str | None
    platform: str
    workspace: str
    channel: str
    request_kind: str | None
    request_id: str | None
    version: int | None
    user_id: str
    means: str | None
    outcome: str
    reason: str


def entry_of(
    row_id: int,
    at: datetime,
    conversation_id: str | None,
    where: PlatformRef,
    audited: Audited,
    found: tuple[str, int | None] | None = None,
) -> AuditEntry:
    """The row ``audited`` becomes at ``where`` (its home channel), ``found``: the kind and
    plan version of its request, read by the store, used where ``audited`` has no kind."""
    kind, version = audited.request_kind, audited.version
    if kind is None and found is not None:
        kind, version = found
    return AuditEntry(
        id=row_id,
        at=at,
        conversation_id=conversation_id,
        platform=where.platform,
        workspace=where.workspace,
        channel=where.home,
        request_kind=kind,
        request_id=audited.request_id,
        version=version,
        user_id=audited.user_id,
        means=audited.means,
        outcome=audited.outcome,
        reason=audited.reason,
    )


class AuditTrail(Protocol):
    """The audit trail (the ``audit`` table)."""

    async def record(
        self,
        audited: Audited,
        *,
        where: PlatformRef,
        conversation_id: str | None = None,
        notices: Sequence[Outgoing] = (),
    ) -> AuditEntry:
        """Store ``audited`` (an attempt that committed nothing) at ``where``, in the
        conversation ``conversation_id`` if any, and write ``notices`` (outbox rows of that
        conversation, handed to ``on_outbox``) in the same write; the row as stored. Its
        request's kind and plan version are read from the request when ``audited`` names
        a request but not its kind. Raises :class:`core.vocabulary.errors.ConversationNotFound`
        for an unknown conversation."""
        ...

    async def entries(
        self,
        *,
        conversation_id: str | None = None,
        channel: str | None = None,
        since: datetime | None = None,
    ) -> list[AuditEntry]:
        """The rows of the conversation ``conversation_id``, of ``channel`` (the home
        channel's id), at or after ``since`` (UTC), each filter only when given: oldest
        first (by time, then by id)."""
        ...
