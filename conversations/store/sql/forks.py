"""Forks in SQL: the new conversation and everything it holds, in one transaction.

A few statements in one write (:mod:`conversations.store.forks`): the conversation's
``INSERT`` and the ``UPDATE`` of its status, position and plan version; one ``INSERT``
each for its journal, its tool calls and its requests; its outbox row and the audit
trail's row. A conversation id that is taken raises (``IntegrityError`` as
``ValueError``) and writes nothing.
"""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import insert, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from conversations.store.forks import ForkOpening
from conversations.store.records import (
    OutboxRecord,
    outbox_values,
    request_row,
    status_values,
    tool_values,
)
from conversations.store.schedules import unbound_thread
from conversations.store.schema import (
    CONVERSATIONS,
    JOURNAL,
    TOOL_CALLS,
    utcnow,
)
from conversations.store.sql.audit import insert_audit
from conversations.store.sql.database import Database, insert_rows
from conversations.store.sql.outbox import insert_outbox
from conversations.store.sql.threads import insert_conversation
from core.vocabulary.journal import Change


class SqlForks:
    """:class:`conversations.store.forks.Forks` on the store's tables."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def open_fork(self, opening: ForkOpening) -> None:
        """Write the fork in one transaction (see the module docstring); its outbox row
        goes to ``on_outbox`` once committed."""
        try:
            await self._db.write(lambda s: _open(s, opening), then=self._db.on_outbox)
        except IntegrityError as exc:
            raise ValueError(f"conversation {opening.conversation_id} exists already") from exc


def _open(session: Session, opening: ForkOpening) -> list[OutboxRecord]:
    """The statements of :meth:`SqlForks.open_fork`; the outbox rows written."""
    cid, forked, now = opening.conversation_id, opening.forked, utcnow()
    insert_conversation(
        session,
        cid,
        binding=opening.place.in_thread(unbound_thread(cid)),
        requester=opening.requester,
        workspace_root=opening.workspace_root,
        position=forked.position,
    )
    state = Change(status=forked.status, plan_version=forked.plan_version)
    conn = session.connection()
    conn.execute(update(CONVERSATIONS).where(CONVERSATIONS.c.id == cid), status_values(state, now))
    journal = [
        {
            "conversation_id": cid,
            "seq": r.seq,
            "kind": r.entry.kind,
            "body": r.entry.model_dump(mode="json"),
            "created_at": r.at,
        }
        for r in forked.journal
    ]
    insert_rows(conn, insert(JOURNAL), journal)
    if forked.tool_calls:
        insert_rows(conn, insert(TOOL_CALLS), [tool_values(cid, r) for r in forked.tool_calls])
    for order, request in enumerate(forked.requests):  # read back oldest first, as carried
        row = request_row(cid, request)
        row.created_at = now + timedelta(microseconds=order)
        row.decided_at = now if request.decided_by is not None else None
        if request.decided_by is not None:
            row.decided_by_id, row.decided_by_name = request.decided_by.id, request.decided_by.name
        session.add(row)
    session.flush()
    insert_audit(session, opening.original, opening.where, opening.audited, now)
    announce = opening.announce
    return insert_outbox(session, [outbox_values(cid, announce)], [announce.action])
