"""Who may approve, answer and stop (issue 9, "Who may decide").

The requester and the configured approvers approve and stop; any person in the
thread may answer. On Slack and Discord a person is a platform user id: a display
name, username or global name is chosen by its owner and proves nothing, so it is
never compared with the approvers. Approver entries say what they are:

- ``user:U0123ABCD`` (or the bare Slack user id ``U0123ABCD`` / ``W0123ABCD``,
  which cannot be anything else: Slack ids start with their kind's letter), a
  Slack user; ``user:123...`` a Discord user;
- ``group:S0123ABCD``, a Slack user group (asked with ``usergroups.users.list``);
- ``role:123...``, a Discord role (the member's roles, asked with GET
  ``/guilds/{guild}/members/{user}``).

A bare number is refused at start (:func:`platform_problem`): Discord user and
role ids are both snowflakes, so ``123`` could mean either, and guessing wrong
either locks the team out or lets a whole role in. Anything else bare is a name;
names are refused at start when Slack or Discord runs, and are the ids of the
console, which has no others (``alice`` is the console person ``alice``).

Group lookups go through a :class:`conversations.membership.Membership` per
platform; a failed lookup refuses, never approves, and is logged.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

from conversations.errors import LookupFailed
from conversations.events import Author, PlatformRef
from conversations.membership import Membership
from core.vocabulary.people import Person

log = logging.getLogger(__name__)

ApproverKind = Literal["user", "group", "role", "name"]

SLACK_USER = re.compile(r"[UW][A-Z0-9]{2,}")
"""A Slack user id (the ``User ID`` pattern of Slack's own response schemas)."""
SLACK_GROUP = re.compile(r"S[A-Z0-9]{2,}")
"""A Slack user group (``Subteam ID``) id."""
SNOWFLAKE = re.compile(r"[0-9]{1,20}")
"""A Discord id: a 64-bit integer in decimal (https://discord.com/developers/docs/reference#snowflakes)."""

_VALUE = re.compile(r"[^\s:/]+")

FORMS = (
    "user:U0123ABCD or U0123ABCD (a Slack user), group:S0123ABCD (a Slack user group), "
    "user:<number> or role:<number> (a Discord user or role)"
)
"""The approver entries allowed when Slack or Discord runs, for error messages."""

NAMED_PLATFORMS = frozenset({"console"})
"""Platforms whose people are known by name only (names are their ids)."""


@dataclass(frozen=True)
class Approver:
    """One parsed approver entry: its ``kind`` and the id (or console name) ``value``."""

    kind: ApproverKind
    value: str


def parse_approver(entry: str) -> Approver:
    """The approver an entry of ``THREADBOT_APPROVERS`` names.

    ``kind:value`` for the kinds ``user``, ``group`` and ``role``; a bare Slack
    user id is a ``user``; anything else bare is a ``name``. Raises
    :class:`ValueError` for an unknown kind or an empty or spaced value.
    """
    kind, colon, value = entry.strip().partition(":")
    if not colon:
        bare = kind
        if not _VALUE.fullmatch(bare):
            raise ValueError(f"{entry!r} is not an approver: {FORMS}")
        return Approver("user" if SLACK_USER.fullmatch(bare) else "name", bare)
    if kind not in ("user", "group", "role"):
        raise ValueError(f"{entry!r}: {kind!r} is no kind of approver; use {FORMS}")
    if not _VALUE.fullmatch(value):
        raise ValueError(f"{entry!r} names no id after {kind}:")
    return Approver(kind, value)  # type: ignore[arg-type]  # checked just above


def platform_problem(entry: str) -> str | None:
    """Why ``entry`` cannot name an approver on Slack or Discord, or None when it can.

    Raises :class:`ValueError` as :func:`parse_approver` does.
    """
    approver = parse_approver(entry)
    value = approver.value
    match approver.kind:
        case "name" if SNOWFLAKE.fullmatch(value):
            return (
                f"{entry!r} could be a Discord user or a role (both ids are snowflakes): "
                f"write user:{value} or role:{value}"
            )
        case "name":
            return (
                f"{entry!r} is a name, and on Slack and Discord anyone can take a display "
                f"name: use ids, {FORMS} (names work only in the console)"
            )
        case "user" if not (SLACK_USER.fullmatch(value) or SNOWFLAKE.fullmatch(value)):
            return f"{entry!r} is neither a Slack user id nor a Discord user id: {FORMS}"
        case "group" if not SLACK_GROUP.fullmatch(value):
            return f"{entry!r}: a Slack user group id starts with S, e.g. group:S0123ABCD"
        case "role" if not SNOWFLAKE.fullmatch(value):
            return f"{entry!r}: a Discord role id is a number, e.g. role:1198206788567171079"
    return None


class AccessPolicy:
    """Who may decide and stop, from the approver entries and the platforms' group lookups.

    ``approvers``: entries as :func:`parse_approver` reads them (raises
    :class:`ValueError` for a malformed one), everywhere unless ``approvers_at``
    gives the entries of the conversation's place (a channel's own approvers).
    ``memberships``: one group lookup per platform (more with :meth:`add_membership`).
    """

    def __init__(
        self,
        *,
        approvers: Iterable[str] = (),
        approvers_at: Callable[[PlatformRef], Iterable[str]] | None = None,
        memberships: Iterable[Membership] = (),
        named_platforms: frozenset[str] = NAMED_PLATFORMS,
    ) -> None:
        self.approvers = tuple(parse_approver(entry) for entry in approvers)
        self._approvers_at = approvers_at
        self._parsed: dict[tuple[str, ...], tuple[Approver, ...]] = {}
        self._memberships = {m.platform: m for m in memberships}
        self._named = named_platforms

    def approvers_of(self, where: PlatformRef) -> tuple[Approver, ...]:
        """The approvers of the conversation at ``where``."""
        if self._approvers_at is None:
            return self.approvers
        entries = tuple(self._approvers_at(where))
        parsed = self._parsed.get(entries)
        if parsed is None:
            parsed = self._parsed[entries] = tuple(parse_approver(e) for e in entries)
        return parsed

    def add_membership(self, membership: Membership) -> None:
        """Resolve group approvers of ``membership.platform`` through ``membership``."""
        self._memberships[membership.platform] = membership

    async def may_decide(self, who: Author, requester: Person, where: PlatformRef) -> bool:
        """True for the requester and the approvers, in the conversation at ``where``.

        Compares platform user ids only, except on a named platform (the console),
        where the approvers' ``user`` and ``name`` entries are compared with names.
        A group approver asks the platform's :class:`Membership`; a failed lookup
        counts as "not in the group".
        """
        if who.id == requester.id:
            return True
        approvers = self.approvers_of(where)
        if where.platform in self._named:
            return any(a.kind in ("user", "name") and a.value == who.name for a in approvers)
        if any(a.kind == "user" and a.value == who.id for a in approvers):
            return True
        return await self._in_a_group(who, where, approvers)

    async def may_stop(self, who: Author, requester: Person, where: PlatformRef) -> bool:
        """Same people as :meth:`may_decide`."""
        return await self.may_decide(who, requester, where)

    def may_answer(self, who: Author) -> bool:
        """Any person (not a bot) in the thread."""
        return not who.is_bot

    async def _in_a_group(
        self, who: Author, where: PlatformRef, approvers: tuple[Approver, ...]
    ) -> bool:
        membership = self._memberships.get(where.platform)
        if membership is None:
            return False
        for approver in approvers:
            if approver.kind != membership.group_kind:
                continue
            if await self._member(membership, who, where, approver.value):
                return True
        return False

    async def _member(
        self, membership: Membership, who: Author, where: PlatformRef, group: str
    ) -> bool:
        try:
            return await membership.is_member(workspace=where.workspace, user=who.id, group=group)
        except LookupFailed as exc:
            reason = str(exc)
        except Exception as exc:  # a lookup's bug refuses too, never approves
            log.exception("%s lookup of %s crashed", where.platform, group)
            reason = repr(exc)
        log.warning(
            "%s: could not tell whether %s is in %s:%s, so they were refused: %s",
            where.platform,
            who.id,
            membership.group_kind,
            group,
            reason,
        )
        return False
