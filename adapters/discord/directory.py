"""Discord roles as approvers: does a member have ``role:1198206788567171079``?

A member's roles come from Get Guild Member, ``GET /guilds/{guild}/members/{user}``
(https://discord.com/developers/docs/resources/guild#get-guild-member: a guild
member object whose ``roles`` lists role ids; no privileged intent is needed for
one member), sent through discord.py's HTTP client so its rate-limit buckets
apply. The ``@everyone`` role (its id is the guild's) is never listed there
(https://discord.com/developers/docs/topics/permissions#role-object), so
``role:<guild id>`` lets nobody in. A member's roles are kept
:data:`conversations.membership.DEFAULT_TTL` seconds, so a member whose role was
taken away may decide until then.

The gateway's ``MESSAGE_CREATE``, ``MESSAGE_REACTION_ADD`` and ``INTERACTION_CREATE``
also carry ``member.roles``. They are not used: the neutral events carry who did
something, not their roles, so every way of deciding (reaction, button, ``/stop``,
the stop word, a reply replayed after a crash from the stored event) takes this
one path, and a stored event never vouches for roles it had when it arrived. The
cost is one REST call per member per few minutes, only when a role is an approver.

A Discord error other than "Unknown Member" / "Unknown Guild" (404: the person has
no roles there), or no answer, raises :class:`conversations.errors.LookupFailed`:
the person is refused, and nothing is kept. A DM has no guild, so no roles.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import discord

from adapters.discord.rest import UNREACHABLE
from conversations.errors import LookupFailed
from conversations.membership import DEFAULT_TTL, TtlCache


class DiscordDirectory:
    """A :class:`conversations.membership.Membership` for Discord roles.

    ``client`` is the adapter's ``discord.Client`` (logged in by the adapter);
    ``ttl`` seconds of ``clock()`` is how long a member's roles are kept.
    """

    platform = "discord"
    group_kind = "role"

    def __init__(
        self,
        *,
        client: discord.Client,
        ttl: float = DEFAULT_TTL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client = client
        self._roles: TtlCache[tuple[str, str], frozenset[str]] = TtlCache(ttl=ttl, clock=clock)

    async def is_member(self, *, workspace: str, user: str, group: str) -> bool:
        """Whether ``user`` has the role ``group`` in guild ``workspace`` (False in a DM).

        Raises :class:`LookupFailed` when Discord refuses or does not answer.
        """
        if not workspace:
            return False
        roles = await self._roles.get((workspace, user), lambda: self._fetch(workspace, user))
        return group in roles

    async def _fetch(self, guild: str, user: str) -> frozenset[str]:
        call = f"GET /guilds/{guild}/members/{user}"
        try:
            member = await self._client.http.get_member(guild, user)
        except discord.NotFound:
            return frozenset()  # not a member (10007) or no such guild (10004): no roles
        except discord.HTTPException as exc:
            raise LookupFailed(f"{call}: Discord answered {exc.status} ({exc.text})") from exc
        except UNREACHABLE as exc:
            raise LookupFailed(f"{call}: Discord did not answer ({exc!r})") from exc
        roles = member.get("roles") if isinstance(member, dict) else None
        if not isinstance(roles, list):
            raise LookupFailed(f"{call}: the answer has no list of roles")
        return frozenset(str(r) for r in roles if isinstance(r, str | int))
