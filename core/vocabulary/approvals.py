"""Approval scopes and remembered approvals: how far a person's ✅ on a tool call reaches.

A tool approval (:class:`core.vocabulary.requests.ToolApproval`) is decided for one call
(:attr:`ApprovalScope.ONCE`, what a reaction does), or, from a button, for the rest of
the run (:attr:`ApprovalScope.RUN`) or always in the conversation's channel
(:attr:`ApprovalScope.CHANNEL`). A decision of the two wider scopes is remembered as a
rule: a :class:`Remember` in the decision's :class:`core.vocabulary.journal.Change`,
kept by the store in the same transaction, read back as a :class:`RememberedRule` while
it is in force (:class:`RulesInForce`). A rule answers a call the policy rules ``ask``
about as the person's ✅ would, and is journaled when it does (:class:`RuleApplied`);
it never answers a ``deny`` (docs/architecture.md, "Approval scopes").

What a rule covers is a :class:`CallPattern`: one tool, and either the call's exact
arguments or, for a command, a prefix of every command of its chain
(:mod:`core.policy.remembered` matches and derives them).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from enum import StrEnum
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, model_validator

from core.vocabulary.people import Person


class ApprovalScope(StrEnum):
    """How far an approval reaches: this call, the rest of this run, or the channel."""

    ONCE = "once"
    RUN = "run"
    CHANNEL = "channel"


SCOPES: tuple[ApprovalScope, ...] = tuple(ApprovalScope)
"""Every scope, narrowest first (the settings' ``approval_scopes`` default)."""

SCOPE_SAID = {
    ApprovalScope.ONCE: "once",
    ApprovalScope.RUN: "for this run",
    ApprovalScope.CHANNEL: "always in this channel",
}
"""Each scope as people read it after "allowed"."""


class CallPattern(BaseModel):
    """The calls a remembered approval covers: calls of ``tool`` whose arguments are
    exactly ``arguments``, or (``command_prefix`` set) whose every command of the chain is
    ``command_prefix`` or starts with it and a space. Exactly one of the two is set."""

    model_config = ConfigDict(frozen=True)

    tool: str
    command_prefix: str | None = None
    arguments: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> CallPattern:
        if (self.command_prefix is None) == (self.arguments is None):
            raise ValueError("a call pattern has a command prefix or exact arguments, not both")
        return self

    def said(self) -> str:
        """``commands starting with `git push``` or ``this call exactly``."""
        if self.command_prefix is not None:
            return f"commands starting with `{self.command_prefix}`"
        return "this call exactly"

    def label(self) -> str:
        """What a list shows: ``run_command starting with `git push``` or
        ``write_file with exactly {"path": "a.md"}``."""
        if self.command_prefix is not None:
            return f"{self.tool} starting with `{self.command_prefix}`"
        shown = json.dumps(self.arguments, ensure_ascii=False, sort_keys=True)
        if len(shown) > 120:
            shown = shown[:119] + "…"
        return f"{self.tool} with exactly {shown}"


class Remember(BaseModel):
    """A rule to keep, written with the decision that gave it: ``scope`` (``run`` or
    ``channel``), ``pattern``, who gave it (``by``), the run it was given in (``run``: the
    ``seq`` of the request that began it, :attr:`ConversationSnapshot.run`) and the
    tool approval ``request_id``. The store keeps the conversation's channel with it."""

    model_config = ConfigDict(frozen=True)

    scope: Literal[ApprovalScope.RUN, ApprovalScope.CHANNEL]
    pattern: CallPattern
    by: Person
    run: int
    request_id: str


class RememberedRule(BaseModel):
    """A remembered approval in force: the store's ``id``, ``scope``, ``pattern``, who
    added it (``by``) and when (``at``, UTC), the conversation and run it was given in."""

    model_config = ConfigDict(frozen=True)

    id: int
    scope: Literal[ApprovalScope.RUN, ApprovalScope.CHANNEL]
    pattern: CallPattern
    by: Person
    at: datetime
    conversation_id: str
    run: int


class RuleApplied(BaseModel):
    """A journal entry: remembered rule ``rule_id`` (``scope``, ``pattern``, added by
    ``by``) approved the call ``tool_use_id`` the policy asked about, as that person's ✅
    would have (for the record; the model sees the call's result)."""

    model_config = ConfigDict(frozen=True)
    kind: Literal["rule_applied"] = "rule_applied"
    tool_use_id: str
    rule_id: int
    scope: Literal[ApprovalScope.RUN, ApprovalScope.CHANNEL]
    pattern: CallPattern
    by: Person


class RulesInForce(Protocol):
    """The remembered approvals a conversation's calls may meet, read at each call that
    asks (so a revocation counts from the next call on, in running conversations too).
    Implemented by the store (``conversations.store``)."""

    async def in_force(self, conversation_id: str, run: int) -> Sequence[RememberedRule]:
        """The rules not revoked that apply here: those of the conversation's channel, and
        those given for its run ``run``, oldest first."""
        ...
