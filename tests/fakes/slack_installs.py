"""The Slack fake's other workspaces and its OAuth v2 flow (part of :class:`FakeSlackApi`).

Slack answers each Web API call as the workspace of the token it carries. The fake's own
workspace (``TEAM_ID``) answers any token but those of the workspaces added with
``api.add_workspace(team_id, channels=[...])``: a call with one of theirs is answered as
that workspace (``auth.test`` names its team and bot user, the messages it posts are its
bot's), and a channel claimed by a workspace answers ``channel_not_found`` to a call with
another workspace's token, as Slack would (a workspace's token sees only its channels).
A workspace's token once revoked (``api.revoke(team_id)``, what an uninstall does) answers
``token_revoked`` (https://docs.slack.dev/reference/methods/auth.test#errors).

The install flow (https://docs.slack.dev/authentication/installing-with-oauth):
``GET /oauth/v2/authorize?client_id=...&scope=...&state=...[&redirect_uri=...]`` is
Slack's consent page; the person consents at once, for the workspace set with
``api.consent(team_id)``, and the browser is sent (302) to ``redirect_uri`` (else
``api.redirect_url``, the app's only redirect URL) with ``code`` and ``state``. The app then
calls ``oauth.v2.access`` with the code and its client id and secret (HTTP Basic, as
slack-sdk sends them; https://docs.slack.dev/reference/methods/oauth.v2.access): a code
is taken once; the answer has the workspace's bot token, ``bot_user_id``, ``team``,
``scope`` and ``authed_user``. Every visit of the consent page is in
``api.authorize_visits`` (its query).
"""

from __future__ import annotations

import base64
import contextlib
import itertools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from aiohttp import web

if TYPE_CHECKING:
    from tests.fakes.slack_api import FakeSlackApi

JsonDict = dict[str, Any]

CLIENT_ID = "7200000000001.7200000000002"
CLIENT_SECRET = "fake-client-secret-0123456789abcdef"


@dataclass
class FakeWorkspace:
    """Another workspace the app may be installed in: its bot's token and identity."""

    team_id: str
    team: str
    team_domain: str
    token: str
    bot_user_id: str
    bot_id: str
    revoked: bool = False


class Installs:
    """The fake's other workspaces and its install flow (see the module docstring)."""

    def __init__(self) -> None:
        self.workspaces: dict[str, FakeWorkspace] = {}
        self.channel_teams: dict[str, str] = {}
        """The workspace each claimed channel belongs to."""
        self.client_id = CLIENT_ID
        self.client_secret = CLIENT_SECRET
        self.redirect_url: str | None = None
        """The app's only redirect URL (used when the consent page is given none)."""
        self.consenting: str | None = None
        """The workspace the next visit of the consent page installs the app in."""
        self.authorize_visits: list[dict[str, str]] = []
        self._codes: dict[str, tuple[str, str | None]] = {}
        self._code_ids = itertools.count(1)

    def add(self, team_id: str, *, channels: tuple[str, ...] = (), team: str = "") -> FakeWorkspace:
        """Add a workspace (its token ``xoxb-<team>-fake-installed-token``)."""
        n = len(self.workspaces) + 2
        found = FakeWorkspace(
            team_id=team_id,
            team=team or f"Workspace {n}",
            team_domain=f"workspace{n}",
            token=f"xoxb-{team_id.lower()}-fake-installed-token-{n:04d}",
            bot_user_id=f"U0BOT{n:05d}",
            bot_id=f"B0BOT{n:05d}",
        )
        self.workspaces[team_id] = found
        for channel in channels:
            self.channel_teams[channel] = team_id
        return found

    def of_token(self, token: str | None) -> FakeWorkspace | None:
        """The added workspace whose token this is, if any."""
        for found in self.workspaces.values():
            if found.token == token:
                return found
        return None

    def refusal(self, method: str, token: str | None, channel: str, home: str) -> JsonDict | None:
        """What Slack answers instead of the method, when it does not take the call."""
        found = self.of_token(token)
        if found is not None and found.revoked:
            return {"ok": False, "error": "token_revoked"}
        acting = found.team_id if found is not None else home
        owner = self.channel_teams.get(channel)
        if owner is not None and owner != acting:
            return {"ok": False, "error": "channel_not_found"}
        return None

    @contextlib.contextmanager
    def acting_as(self, api: FakeSlackApi, token: str | None) -> Iterator[None]:
        """The fake answering as the workspace of ``token`` while a handler runs."""
        found = self.of_token(token)
        if found is None:
            yield
            return
        names = ("team_id", "team", "team_domain", "bot_user_id", "bot_id")
        kept = {name: getattr(api, name) for name in names}
        for name in names:
            setattr(api, name, getattr(found, name))
        try:
            yield
        finally:
            for name, value in kept.items():
                setattr(api, name, value)

    async def authorize(self, request: web.Request) -> web.StreamResponse:
        """Slack's consent page: the person consents for :attr:`consenting` at once."""
        query = dict(request.query)
        self.authorize_visits.append(query)
        team = self.consenting
        if team is None or team not in self.workspaces:
            return web.Response(status=400, text="no workspace consents (api.consent(team))")
        if query.get("client_id") != self.client_id:
            return web.Response(status=400, text="invalid_client_id")
        target = query.get("redirect_uri") or self.redirect_url
        if not target:
            return web.Response(status=400, text="no redirect URL")
        code = f"fake-code-{next(self._code_ids):04d}"
        self._codes[code] = (team, query.get("redirect_uri"))
        answer = urlencode({"code": code, "state": query.get("state", "")})
        raise web.HTTPFound(f"{target}{'&' if '?' in target else '?'}{answer}")

    def oauth_v2_access(
        self, api: FakeSlackApi, args: JsonDict, headers: Mapping[str, str]
    ) -> JsonDict:
        """``oauth.v2.access``: a code for its workspace's bot token, once."""
        client_id, secret = _basic(headers.get("Authorization", ""))
        client_id = client_id or str(args.get("client_id") or "")
        secret = secret or str(args.get("client_secret") or "")
        if client_id != self.client_id:
            return {"ok": False, "error": "invalid_client_id"}
        if secret != self.client_secret:
            return {"ok": False, "error": "bad_client_secret"}
        granted = self._codes.pop(str(args.get("code") or ""), None)
        if granted is None:
            return {"ok": False, "error": "invalid_code"}
        team, redirect = granted
        if redirect is not None and args.get("redirect_uri") != redirect:
            return {"ok": False, "error": "bad_redirect_uri"}
        found = self.workspaces[team]
        found.revoked = False
        return {
            "ok": True,
            "access_token": found.token,
            "token_type": "bot",
            "scope": "app_mentions:read,chat:write,reactions:write",
            "bot_user_id": found.bot_user_id,
            "app_id": api.app_id,
            "team": {"id": found.team_id, "name": found.team},
            "enterprise": None,
            "is_enterprise_install": False,
            "authed_user": {"id": "U0ALICE001"},
        }


def _basic(header: str) -> tuple[str, str]:
    """The user and password of an HTTP Basic ``Authorization`` header (empty if none)."""
    if not header.startswith("Basic "):
        return "", ""
    user, _, password = base64.b64decode(header[len("Basic ") :]).decode().partition(":")
    return user, password
