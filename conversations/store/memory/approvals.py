"""Remembered approvals in memory (see :mod:`conversations.store.sql.approvals` for the rules)."""

from __future__ import annotations

from collections.abc import Sequence

from conversations.store.approvals import RuleNotFound, RuleRecord, RuleRevoked
from conversations.store.memory._tables import Conversation, Rule, Tables, checkpoint
from core.vocabulary.approvals import ApprovalScope, RememberedRule
from core.vocabulary.entries import UserText


class MemoryApprovalRules:
    """:class:`conversations.store.approvals.ApprovalRules` in memory."""

    def __init__(self, tables: Tables) -> None:
        self._t = tables

    async def in_force(self, conversation_id: str, run: int) -> Sequence[RememberedRule]:
        """Its channel's rules and its run's, not revoked, oldest first."""
        await checkpoint()
        found = self._t.conversations.get(conversation_id)
        if found is None:
            return []
        binding = found.binding
        home = (binding.platform, binding.workspace, binding.home)
        return [
            r.rule
            for _, r in sorted(self._t.rules.items())
            if r.revoked_at is None
            and (
                (r.rule.scope is ApprovalScope.CHANNEL and _at(r) == home)
                or (
                    r.rule.scope is ApprovalScope.RUN
                    and (r.rule.conversation_id, r.rule.run) == (conversation_id, run)
                )
            )
        ]

    async def listed(
        self,
        *,
        platform: str | None = None,
        workspace: str | None = None,
        channel: str | None = None,
        every: bool = False,
    ) -> list[RuleRecord]:
        """The rules of the matching channels, in force (``every``: all), oldest first."""
        await checkpoint()
        wanted = (platform, workspace, channel)
        records = [
            self._record(r)
            for _, r in sorted(self._t.rules.items())
            if all(w is None or w == have for w, have in zip(wanted, _at(r), strict=True))
        ]
        return [r for r in records if every or r.in_force]

    async def revoke(self, rule_id: int, *, by: str) -> RuleRecord:
        """Revoke rule ``rule_id`` as ``by``; raises :class:`RuleNotFound`, or
        :class:`RuleRevoked` for one revoked before."""
        await checkpoint()
        found = self._t.rules.get(rule_id)
        if found is None:
            raise RuleNotFound(rule_id)
        if found.revoked_at is not None:
            raise RuleRevoked(self._record(found))
        found.revoked_at, found.revoked_by = self._t.clock(), by
        return self._record(found)

    def _record(self, rule: Rule) -> RuleRecord:
        conversation = self._t.conversations.get(rule.rule.conversation_id)
        running = conversation is not None and _run_going(conversation) == rule.rule.run
        return RuleRecord(
            rule=rule.rule,
            place=rule.place,
            request_id=rule.request_id,
            revoked_at=rule.revoked_at,
            revoked_by=rule.revoked_by,
            running=rule.rule.scope is ApprovalScope.RUN and running,
        )


def _at(rule: Rule) -> tuple[str, str, str]:
    return rule.place.platform, rule.place.workspace, rule.place.channel


def _run_going(conversation: Conversation) -> int | None:
    """The conversation's run while it is active (the ``seq`` of its newest request)."""
    if not conversation.status.active:
        return None
    requests = [
        r.seq
        for r in conversation.journal
        if isinstance(r.entry, UserText) and r.entry.role == "request"
    ]
    return max(requests, default=0)
