"""Slack user groups as approvers: who is in ``group:S0123ABCD``.

Members come from ``usergroups.users.list``
(https://docs.slack.dev/reference/methods/usergroups.users.list: a list of user
ids, Tier 2, the ``usergroups:read`` scope; ``team_id`` only matters for an org
token). ``include_disabled`` is not sent, so a disabled group lets nobody in.
With installs, the look-up goes through the group's workspace's own client
(:mod:`adapters.slack.teams`).

A group's members are kept :data:`conversations.membership.DEFAULT_TTL` seconds,
so a person removed from the group may decide until then, and a group of
approvers costs one call per few minutes, not one per decision.

An error (``missing_scope`` when the app was not reinstalled after the scope was
added, ``no_such_subteam``, ``plan_upgrade_required`` on a free workspace) or no
answer raises :class:`conversations.errors.LookupFailed`: the person is
refused, and nothing is kept, so the next decision asks again.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.teams import TeamClients
from adapters.slack.web import UNREACHABLE
from conversations.errors import DeliveryError, LookupFailed
from conversations.membership import DEFAULT_TTL, TtlCache

_HINTS = {
    "missing_scope": "add the usergroups:read scope to the app and reinstall it",
    "plan_upgrade_required": "user groups need a paid Slack plan",
    "no_such_subteam": "no user group has this id in the workspace",
}


class SlackDirectory:
    """A :class:`conversations.membership.Membership` for Slack user groups.

    ``client`` is the adapter's look-up client (slack-sdk waits out a 429 itself);
    ``teams``: each workspace's clients, whose look-up client is used instead when given;
    ``ttl`` seconds of ``clock()`` is how long a group's member list is kept.
    """

    platform = "slack"
    group_kind = "group"

    def __init__(
        self,
        *,
        client: AsyncWebClient,
        teams: TeamClients | None = None,
        ttl: float = DEFAULT_TTL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client = client
        self._teams = teams
        self._members: TtlCache[tuple[str, str], frozenset[str]] = TtlCache(ttl=ttl, clock=clock)

    async def is_member(self, *, workspace: str, user: str, group: str) -> bool:
        """Whether Slack user ``user`` is in the user group ``group`` of team ``workspace``.

        Raises :class:`LookupFailed` when Slack refuses or does not answer.
        """
        members = await self._members.get((workspace, group), lambda: self._list(workspace, group))
        return user in members

    async def _list(self, workspace: str, group: str) -> frozenset[str]:
        call = f"usergroups.users.list for {group}"
        try:
            client = (
                self._client if self._teams is None else (await self._teams.of(workspace)).client
            )
        except DeliveryError as exc:  # not installed there
            raise LookupFailed(f"{call}: {exc}") from exc
        try:
            response = await client.usergroups_users_list(
                usergroup=group, team_id=workspace or None
            )
        except SlackApiError as exc:
            error = str(exc.response.get("error", "an error"))
            hint = f" ({_HINTS[error]})" if error in _HINTS else ""
            raise LookupFailed(f"{call}: Slack answered {error}{hint}") from exc
        except UNREACHABLE as exc:
            raise LookupFailed(f"{call}: Slack did not answer ({exc!r})") from exc
        users = response.get("users")
        if not isinstance(users, list):
            raise LookupFailed(f"{call}: the answer has no list of users")
        return frozenset(u for u in users if isinstance(u, str))
