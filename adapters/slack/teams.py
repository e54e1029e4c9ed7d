"""Each workspace's own Web API clients: the calls made for a workspace carry its bot token.

With one bot token (``SLACK_BOT_TOKEN`` and no OAuth installs) every call goes through
the three clients of that token (:class:`adapters.slack.web.WebClients`), as they always
did. With installs (:mod:`adapters.slack.installations`), a call made for a workspace
(a post or edit in its thread, a stream, a user group look-up, a file download) takes the
token of that workspace's install, looked up by its team id (``PlatformRef.workspace``)
and kept in memory (:mod:`conversations.installs`); the bot token of ``SLACK_BOT_TOKEN``
serves its own workspace when that workspace has no install. Each token gets its three
clients once, kept while the token is the workspace's.

A workspace with no token (never installed, or uninstalled since) gets no call: the
delivery fails for good with "the app is not installed in Slack workspace T...", since
retrying cannot help until it is installed again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from adapters.slack.errors import NotInstalled
from adapters.slack.web import RateLimitSeen, WebClients

TokenOf = Callable[[str], Awaitable[str | None]]
"""The bot token of a workspace (by team id), None when the app is not installed there."""


class TeamClients:
    """The clients of each workspace (see the module docstring).

    ``default``: the clients of ``SLACK_BOT_TOKEN`` (their token None when it is unset);
    ``token_of``: each workspace's token when the app is installed through OAuth (None:
    one token serves every workspace, as before installs). ``base_url`` and
    ``rate_limited`` as for :meth:`WebClients.for_token`.
    """

    def __init__(
        self,
        default: WebClients,
        *,
        token_of: TokenOf | None = None,
        base_url: str | None = None,
        rate_limited: RateLimitSeen | None = None,
    ) -> None:
        self.default = default
        self._token_of = token_of
        self._base_url = base_url
        self._rate_limited = rate_limited
        self._by_team: dict[str, tuple[str, WebClients]] = {}

    @property
    def installs(self) -> bool:
        """Whether workspaces have tokens of their own (the app is installed through OAuth)."""
        return self._token_of is not None

    async def token(self, team: str) -> str | None:
        """The bot token the calls for ``team`` carry; None when there is none."""
        if self._token_of is None:
            return self.default.client.token
        return await self._token_of(team)

    async def of(self, team: str) -> WebClients:
        """The clients of ``team``'s token; raises :class:`NotInstalled` when it has none."""
        if self._token_of is None:
            return self.default
        token = await self._token_of(team)
        if token is None:
            raise NotInstalled(team)
        if token == self.default.client.token:
            return self.default
        kept = self._by_team.get(team)
        if kept is not None and kept[0] == token:
            return kept[1]
        clients = WebClients.for_token(
            token, base_url=self._base_url, rate_limited=self._rate_limited
        )
        self._by_team[team] = (token, clients)
        return clients

    def forget(self, team: str) -> None:
        """Drop the clients kept for ``team`` (its install changed or was removed)."""
        self._by_team.pop(team, None)
