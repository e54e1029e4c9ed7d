"""``threadbot policy`` and ``threadbot operator``: remembered approvals, listed and revoked.

An approval for the run or always in the channel leaves a rule in the store
(:mod:`conversations.store.approvals`). ``threadbot policy list [--platform P] [--team
T] [--channel C] [--all] [--json]`` prints the rules in force (with ``--all`` the revoked
ones and those of ended runs too), each with who added it and when; ``threadbot
settings explain`` prints a channel's the same way (:func:`rules_here`). ``threadbot
policy revoke ID --operator NAME`` revokes one as that operator (:mod:`bot.operators`:
the token from ``THREADBOT_OPERATOR_TOKEN`` or asked, checked in constant time; exit 2
when refused), at once: the next call in any conversation, running ones too, asks
again; the rule stays, with who revoked it and when. ``threadbot operator hash`` prints
the ``token_sha256`` of a token. Reading needs a database at the newest schema, as
``threadbot usage`` does (exit 2 otherwise, saying what to do). See
docs/architecture.md, "Approval scopes".
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from bot.doctor import database_checks
from bot.operators import OperatorRefused, authenticated, token_given, token_sha256
from bot.settings import Settings
from conversations.events import PlatformRef
from conversations.render import render_event
from conversations.store.approvals import RuleNotFound, RuleRecord, RuleRevoked
from conversations.store.backends import is_memory
from conversations.store.sql import SqlStore, create_engine
from core.vocabulary.approvals import ApprovalScope
from core.vocabulary.audit import RULE, Audited
from core.vocabulary.people import Person


def when(at: datetime) -> str:
    """``2026-12-07 10:00:00 UTC``."""
    return at.strftime("%Y-%m-%d %H:%M:%S UTC")


def who(person: Person) -> str:
    """``alice (U0ALICE001)``, or the id alone where the name is only its mention
    (``<@U0ALICE001>``: what Slack and Discord threads show)."""
    if person.name in (person.id, f"<@{person.id}>"):
        return person.id
    return f"{person.name} ({person.id})"


def rule_line(record: RuleRecord) -> str:
    """One rule as people read it: ``#1 always in this channel (slack T0123 C0456):
    run_command starting with `make test`; added by alice (U0ALICE001) at 2026-12-07
    10:00:00 UTC``, and for a run rule its conversation and run; then how it stands when it
    is not in force (revoked by whom and when, or its run ended)."""
    rule = record.rule
    if rule.scope is ApprovalScope.CHANNEL:
        scope = "always in this channel"
    else:
        scope = f"for run {rule.run} of conversation {rule.conversation_id}"
    line = (
        f"#{rule.id} {scope} ({record.place.said()}): {rule.pattern.label()}; "
        f"added by {who(rule.by)} at {when(rule.at)}"
    )
    if record.revoked_at is not None:
        line += f"; revoked by operator {record.revoked_by} at {when(record.revoked_at)}"
    elif not record.in_force:
        line += "; its run ended"
    return line


def rule_json(record: RuleRecord) -> dict[str, Any]:
    """One rule as ``--json`` prints it."""
    rule = record.rule
    return {
        "id": rule.id,
        "scope": rule.scope.value,
        "platform": record.place.platform,
        "workspace": record.place.workspace,
        "channel": record.place.channel,
        "conversation": rule.conversation_id,
        "run": rule.run,
        "request": record.request_id,
        "tool": rule.pattern.tool,
        "command_prefix": rule.pattern.command_prefix,
        "arguments": rule.pattern.arguments,
        "added_by": {"id": rule.by.id, "name": rule.by.name},
        "added_at": rule.at.isoformat(),
        "revoked_by": record.revoked_by,
        "revoked_at": record.revoked_at.isoformat() if record.revoked_at else None,
        "in_force": record.in_force,
    }


async def _store(settings: Settings) -> SqlStore | str:
    """The store at ``settings.database_url``, or why it cannot be used (memory, missing,
    not at the newest schema)."""
    if is_memory(settings.database_url):
        return "memory:// keeps no approvals (it keeps nothing past the process)"
    (check,) = await database_checks(settings.database_url)
    if check.mark != "ok":
        return check.said
    return SqlStore(engine=create_engine(settings.database_url), render=render_event)


async def list_rules(
    settings: Settings,
    *,
    platform: str | None,
    team: str,
    channel: str,
    every: bool,
    json_out: bool,
) -> int:
    """Print the rules of the channels asked for (see the module docstring); the exit code."""
    store = await _store(settings)
    if isinstance(store, str):
        print(f"threadbot: {store}", file=sys.stderr)
        return 2
    try:
        records = await store.approvals.listed(
            platform=platform, workspace=team or None, channel=channel or None, every=every
        )
    finally:
        await store.close()
    if json_out:
        print(json.dumps({"rules": [rule_json(r) for r in records]}, indent=2))
    else:
        print("\n".join(rule_line(r) for r in records) or "no remembered approvals")
    return 0


async def revoke_rule(
    settings: Settings, rule_id: int, operator: str, environ: Mapping[str, str]
) -> int:
    """Revoke rule ``rule_id`` as ``operator``, whose token is in ``environ`` or asked,
    and record it in the audit trail (:func:`revoked`; the rule itself keeps who revoked
    it and when, should the audit's write fail after the revocation's); exit 2 when
    refused or there is no such rule."""
    try:
        token = token_given(environ)
        authenticated(settings.operators, operator, token)
    except OperatorRefused as exc:
        print(f"threadbot policy revoke: {exc}", file=sys.stderr)
        return 2
    store = await _store(settings)
    if isinstance(store, str):
        print(f"threadbot: {store}", file=sys.stderr)
        return 2
    try:
        record = await store.approvals.revoke(rule_id, by=operator)
        await store.audit.record(revoked(record, operator), **_audited_at(record))
    except RuleNotFound:
        print(f"threadbot policy revoke: there is no rule {rule_id}", file=sys.stderr)
        return 2
    except RuleRevoked as exc:
        print(f"already revoked: {rule_line(exc.record)}")
        return 0
    finally:
        await store.close()
    print(f"revoked: {rule_line(record)}")
    return 0


def revoked(record: RuleRecord, operator: str) -> Audited:
    """The audit trail's entry of ``operator``'s revocation of ``record``'s rule
    (docs/architecture.md "The audit trail"): kind :data:`core.vocabulary.audit.RULE`."""
    return Audited(
        request_kind=RULE,
        request_id=str(record.rule.id),
        user_id=f"operator:{operator}",
        means="command",
        outcome="revoked",
        reason=f"{record.rule.scope.value} rule revoked by operator {operator}",
    )


def _audited_at(record: RuleRecord) -> dict[str, Any]:
    """Where the revocation of ``record`` is recorded: its channel and conversation."""
    place = record.place
    where = PlatformRef(platform=place.platform, workspace=place.workspace, channel=place.channel)
    return {"where": where, "conversation_id": record.rule.conversation_id}


def hash_token(environ: Mapping[str, str]) -> int:
    """Print the ``[operators.NAME]`` line of a token from ``environ`` or asked."""
    try:
        token = token_given(environ)
    except OperatorRefused as exc:
        print(f"threadbot operator hash: {exc}", file=sys.stderr)
        return 2
    print(f'token_sha256 = "{token_sha256(token)}"')
    return 0


async def rules_here(settings: Settings, platform: str, team: str, channel: str) -> list[str]:
    """``settings explain``'s lines for the rules in force in a channel (or, without
    ``channel``, the workspace's): a heading, then one line each; what kept them from
    being read, when the store cannot be."""
    heading = "remembered approvals, each a rule in the store (threadbot policy revoke ID):"
    store = await _store(settings)
    if isinstance(store, str):
        return [heading, f"  not read: {store}"]
    try:
        records = await store.approvals.listed(
            platform=platform, workspace=team or None, channel=channel or None
        )
    finally:
        await store.close()
    return (
        [heading, *(f"  {rule_line(r)}" for r in records)]
        if records
        else [
            heading,
            "  none",
        ]
    )
