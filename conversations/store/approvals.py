"""The ``ApprovalRules`` interface of the store: approvals remembered past their call.

A person who allows a tool call for the rest of the run or always in the channel
(:mod:`core.vocabulary.approvals`) leaves a rule: the journal writes it, with the
conversation's channel, in the transaction of the decision that gave it
(:attr:`core.vocabulary.journal.Change.remember`). The engine reads the rules in force
each time a call asks (:meth:`ApprovalRules.in_force`, core's
:class:`~core.vocabulary.approvals.RulesInForce`); ``threadbot policy list`` and
``threadbot settings explain`` list them (:meth:`ApprovalRules.listed`), and ``threadbot
policy revoke`` revokes one as a named operator (:meth:`ApprovalRules.revoke`): the row
stays, with who revoked it and when, and no call meets it again from the next one on,
in running conversations too (docs/architecture.md, "Approval scopes").

A channel is the one whose settings apply in the conversation: a Discord thread's parent
channel (``PlatformRef.home``). A run rule is in force while its run goes on: the run is
the ``seq`` of the request that began it (:attr:`ConversationSnapshot.run`), so the
first call of the next run asks again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from core.vocabulary.approvals import ApprovalScope, RememberedRule


@dataclass(frozen=True)
class Place:
    """Where a channel rule applies: ``platform``, ``workspace`` (a Slack team or Discord
    guild; ``""`` for the console) and ``channel``."""

    platform: str
    workspace: str
    channel: str

    def said(self) -> str:
        """``slack T0123 C0456`` (``-`` for an empty workspace)."""
        return f"{self.platform} {self.workspace or '-'} {self.channel}"


@dataclass(frozen=True)
class RuleRecord:
    """A remembered rule as stored: the rule, the channel of the conversation it was given
    in, the tool approval that gave it, and its revocation (``revoked_at``, UTC, and the
    operator ``revoked_by``; both None while it stands). ``running``: for a run rule,
    whether its run still goes on (the conversation is active in that run)."""

    rule: RememberedRule
    place: Place
    request_id: str
    revoked_at: datetime | None = None
    revoked_by: str | None = None
    running: bool = False

    @property
    def in_force(self) -> bool:
        """Not revoked, and a channel rule or the rule of a run that goes on."""
        if self.revoked_at is not None:
            return False
        return self.rule.scope is ApprovalScope.CHANNEL or self.running


class RuleNotFound(LookupError):
    """No rule has this id."""


class RuleRevoked(ValueError):
    """The rule was revoked before: ``record`` holds that first revocation, unchanged."""

    def __init__(self, record: RuleRecord) -> None:
        super().__init__(f"rule {record.rule.id} was revoked before")
        self.record = record


class ApprovalRules(Protocol):
    """Remembered approvals (the ``approval_rules`` table)."""

    async def in_force(self, conversation_id: str, run: int) -> Sequence[RememberedRule]:
        """The rules not revoked that a call of the conversation's run ``run`` meets: its
        channel's, and its run's, oldest first; none for an unknown conversation."""
        ...

    async def listed(
        self,
        *,
        platform: str | None = None,
        workspace: str | None = None,
        channel: str | None = None,
        every: bool = False,
    ) -> list[RuleRecord]:
        """The rules of the channels the filters match (None: any), oldest first: those in
        force, or with ``every`` the revoked ones and those of ended runs too."""
        ...

    async def revoke(self, rule_id: int, *, by: str) -> RuleRecord:
        """Revoke rule ``rule_id`` as the operator ``by``, at once, and return it as stored
        now. Raises :class:`RuleNotFound`, or :class:`RuleRevoked` for a rule revoked
        before (which keeps its first revocation)."""
        ...
