"""Who belongs to a group of people on a platform: the lookup behind group approvers.

Approvers may be a group instead of a person (``group:S123``, a Slack user group;
``role:123``, a Discord role). The access check (:mod:`conversations.access`)
asks a :class:`Membership` of the conversation's platform; the adapters implement
it (``adapters.slack.directory``, ``adapters.discord.directory``) and ``bot``
plugs them in, so nothing here imports a platform SDK.

A lookup that fails raises :class:`conversations.errors.LookupFailed`; the access check then refuses
(and logs why): a failed lookup never approves. Answers are kept a few minutes
(:data:`DEFAULT_TTL`) in a :class:`TtlCache` on a clock that tests set, so a person
removed from a group may still decide until the entry expires.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, Protocol, TypeVar

DEFAULT_TTL = 300.0
"""Seconds a membership answer is kept: a removed member is refused at most this late."""

_PRUNE_AT = 1024
"""Entries past which expired ones are dropped when a new one is stored."""

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Membership(Protocol):
    """Membership of the groups of one platform (``platform``, as in :class:`PlatformRef`).

    ``group_kind`` is the approver entry kind it resolves: ``"group"`` (Slack user
    groups) or ``"role"`` (Discord roles).
    """

    platform: str
    group_kind: str

    async def is_member(self, *, workspace: str, user: str, group: str) -> bool:
        """Whether platform user ``user`` is in ``group`` of ``workspace`` (team or guild id).

        Raises :class:`conversations.errors.LookupFailed` when the platform cannot tell.
        """
        ...


class TtlCache(Generic[K, V]):
    """Values kept ``ttl`` seconds of ``clock()``; a load that raises keeps nothing."""

    def __init__(self, *, ttl: float = DEFAULT_TTL, clock: Callable[[], float]) -> None:
        self._ttl = ttl
        self._clock = clock
        self._entries: dict[K, tuple[float, V]] = {}

    async def get(self, key: K, load: Callable[[], Awaitable[V]]) -> V:
        """The value kept for ``key`` while fresh, else ``await load()`` (then kept)."""
        kept = self._entries.get(key)
        if kept is not None and self._clock() < kept[0]:
            return kept[1]
        value = await load()
        now = self._clock()
        if len(self._entries) >= _PRUNE_AT:
            self._entries = {k: e for k, e in self._entries.items() if now < e[0]}
        self._entries[key] = (now + self._ttl, value)
        return value
