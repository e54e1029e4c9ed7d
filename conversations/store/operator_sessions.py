"""The ``OperatorSessions`` interface of the store: the run inspector's signed-in browsers.

An operator signs in to the run inspector once with their token; the browser then holds
a random session id in a cookie (docs/architecture.md, "The run inspector"). The store
keeps only the SHA-256 of that id (a copy of the table opens no session), with the
operator's name, a short digest of their token hash in force at the sign-in (so the
inspector ends the session when the operator's token changes or they are no longer
named), when it was opened and when it expires. Every instance of the bot
reads the same rows, so a session opened on one is honoured by the others behind a load
balancer; signing out ends it on all of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol


@dataclass(frozen=True)
class OperatorSession:
    """One signed-in browser: ``id_sha256`` (hex SHA-256 of the cookie's id), the
    ``operator``'s name, ``opened_at`` and ``expires_at`` (UTC), and ``token_digest``
    (16 hex digits the run inspector derives from the operator's ``token_sha256`` at the
    sign-in; empty for a session opened before migration 0023, which matches no token)."""

    id_sha256: str
    operator: str
    opened_at: datetime
    expires_at: datetime
    token_digest: str


class OperatorSessions(Protocol):
    """The run inspector's sessions (the ``operator_sessions`` table)."""

    async def open(self, session: OperatorSession) -> None:
        """Keep ``session``; the sessions expired by its ``opened_at`` are dropped."""
        ...

    async def find(self, id_sha256: str, *, at: datetime) -> OperatorSession | None:
        """The session ``id_sha256`` when it is kept and ``at`` is before its expiry; one
        found expired is dropped (None)."""
        ...

    async def close(self, id_sha256: str, *, at: datetime | None = None) -> bool:
        """End the session ``id_sha256``; True when there was one. With ``at``, the
        sessions expired by then are dropped too."""
        ...
