"""Remembered approvals in SQL: the ``approval_rules`` table (:mod:`conversations.store.approvals`).

The journal writes a rule with the decision that gave it (:func:`rule_values`, in the
commit's transaction); :class:`SqlApprovalRules` reads the rules in force, lists them
and revokes one with a single ``UPDATE`` that only a standing rule matches, so two
operators revoking at once leave the first revocation.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, and_, or_, select, update
from sqlalchemy.orm import Session

from conversations.events import PlatformRef
from conversations.store.approvals import Place, RuleNotFound, RuleRecord, RuleRevoked
from conversations.store.records import as_utc
from conversations.store.schema import ApprovalRuleRow, ConversationRow, JournalRow, utcnow
from conversations.store.sql.database import Database, changed
from core.vocabulary.approvals import ApprovalScope, CallPattern, Remember, RememberedRule
from core.vocabulary.lifecycle import Lifecycle
from core.vocabulary.people import Person

RULES = cast(Table, ApprovalRuleRow.__table__)
_ACTIVE = (Lifecycle.RUNNING.value, Lifecycle.WAITING.value)


def rule_values(
    conversation_id: str, binding: PlatformRef, remember: Remember, now: datetime
) -> dict[str, Any]:
    """The row of a rule remembered in the conversation bound to ``binding`` (its home
    channel: a Discord thread's parent)."""
    return {
        "scope": remember.scope.value,
        "platform": binding.platform,
        "workspace": binding.workspace,
        "channel": binding.home,
        "conversation_id": conversation_id,
        "run": remember.run,
        "request_id": remember.request_id,
        "tool": remember.pattern.tool,
        "command_prefix": remember.pattern.command_prefix,
        "arguments": remember.pattern.arguments,
        "created_by_id": remember.by.id,
        "created_by_name": remember.by.name,
        "created_at": now,
    }


class SqlApprovalRules:
    """:class:`conversations.store.approvals.ApprovalRules` on the ``approval_rules`` table."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def in_force(self, conversation_id: str, run: int) -> Sequence[RememberedRule]:
        """Its channel's rules and its run's, not revoked, oldest first."""
        return await self._db.read_in_thread(lambda s: _in_force(s, conversation_id, run))

    async def listed(
        self,
        *,
        platform: str | None = None,
        workspace: str | None = None,
        channel: str | None = None,
        every: bool = False,
    ) -> list[RuleRecord]:
        """The rules of the matching channels, in force (``every``: all), oldest first."""
        found = await self._db.read_in_thread(
            lambda s: _listed(s, platform=platform, workspace=workspace, channel=channel)
        )
        return [r for r in found if every or r.in_force]

    async def revoke(self, rule_id: int, *, by: str) -> RuleRecord:
        """Revoke rule ``rule_id`` as ``by``; raises :class:`RuleNotFound`, or
        :class:`RuleRevoked` for one revoked before."""
        return await self._db.write(lambda session: _revoke(session, rule_id, by))


def _in_force(session: Session, conversation_id: str, run: int) -> list[RememberedRule]:
    row = session.get(ConversationRow, conversation_id)
    if row is None:
        return []
    home = row.parent or row.channel
    here = and_(
        RULES.c.scope == ApprovalScope.CHANNEL.value,
        RULES.c.platform == row.platform,
        RULES.c.workspace == row.workspace,
        RULES.c.channel == home,
    )
    mine = and_(
        RULES.c.scope == ApprovalScope.RUN.value,
        RULES.c.conversation_id == conversation_id,
        RULES.c.run == run,
    )
    stmt = (
        select(ApprovalRuleRow)
        .where(RULES.c.revoked_at.is_(None), or_(here, mine))
        .order_by(RULES.c.id)
    )
    return [_rule(r) for r in session.execute(stmt).scalars()]


def _listed(
    session: Session, *, platform: str | None, workspace: str | None, channel: str | None
) -> list[RuleRecord]:
    stmt = select(ApprovalRuleRow).order_by(RULES.c.id)
    for column, wanted in (
        (RULES.c.platform, platform),
        (RULES.c.workspace, workspace),
        (RULES.c.channel, channel),
    ):
        if wanted is not None:
            stmt = stmt.where(column == wanted)
    rows = list(session.execute(stmt).scalars())
    going = _runs_going(session, {r.conversation_id for r in rows if r.scope == "run"})
    return [_record(r, running=going.get(r.conversation_id) == r.run) for r in rows]


def _runs_going(session: Session, conversation_ids: Iterable[str]) -> dict[str, int]:
    """``{conversation id: its run}`` of those of ``conversation_ids`` that are active:
    the run is the ``seq`` of its newest request (:attr:`ConversationSnapshot.run`)."""
    wanted = sorted(conversation_ids)
    if not wanted:
        return {}
    active = select(ConversationRow.id).where(
        ConversationRow.id.in_(wanted), ConversationRow.lifecycle.in_(_ACTIVE)
    )
    ids = set(session.execute(active).scalars())
    going: dict[str, int] = {}
    texts = select(JournalRow.conversation_id, JournalRow.seq, JournalRow.body).where(
        JournalRow.conversation_id.in_(sorted(ids)), JournalRow.kind == "user_text"
    )
    for conversation_id, seq, body in session.execute(texts):
        if body.get("role") == "request" and seq > going.get(conversation_id, 0):
            going[conversation_id] = seq
    return going


def _revoke(session: Session, rule_id: int, by: str) -> RuleRecord:
    done = session.execute(
        update(RULES)
        .where(RULES.c.id == rule_id, RULES.c.revoked_at.is_(None))
        .values(revoked_at=utcnow(), revoked_by=by)
    )
    row = session.get(ApprovalRuleRow, rule_id, populate_existing=True)
    if row is None:
        raise RuleNotFound(rule_id)
    going = _runs_going(session, [row.conversation_id]) if row.scope == "run" else {}
    record = _record(row, running=going.get(row.conversation_id) == row.run)
    if not changed(done):
        raise RuleRevoked(record)
    return record


def _rule(row: ApprovalRuleRow) -> RememberedRule:
    return RememberedRule(
        id=row.id,
        scope=ApprovalScope(row.scope),
        pattern=CallPattern(
            tool=row.tool, command_prefix=row.command_prefix, arguments=row.arguments
        ),
        by=Person(id=row.created_by_id, name=row.created_by_name),
        at=as_utc(row.created_at) or row.created_at,
        conversation_id=row.conversation_id,
        run=row.run,
    )


def _record(row: ApprovalRuleRow, *, running: bool) -> RuleRecord:
    return RuleRecord(
        rule=_rule(row),
        place=Place(row.platform, row.workspace, row.channel),
        request_id=row.request_id,
        revoked_at=as_utc(row.revoked_at),
        revoked_by=row.revoked_by,
        running=running,
    )
