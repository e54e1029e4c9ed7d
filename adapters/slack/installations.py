"""slack-bolt's installation and state stores on threadbot's database.

Bolt's OAuth flow (``AsyncOAuthFlow``,
https://docs.slack.dev/tools/bolt-python/concepts/authenticating-oauth) stores each
install through an ``AsyncInstallationStore`` and checks the ``state`` of each callback
through an ``AsyncOAuthStateStore``
(https://docs.slack.dev/tools/bolt-python/reference/oauth/async_oauth_settings.html).
:class:`SlackInstallationStore` and :class:`SlackStateStore` are those stores over
:class:`conversations.installs.Installs`, which seals the tokens in the store (both
backends, SQLite and PostgreSQL) and tells each to the redactor as it is stored or read.

Only the bot's part of an install is kept (the app asks for no user scopes): bolt runs
with ``installation_store_bot_only``, so its ``authorize`` asks :meth:`async_find_bot`
for each event's workspace (``enterprise_id``, ``team_id``), and the token it finds
is the one the event's listeners and the replies use (:mod:`adapters.slack.teams`). A
workspace inside an Enterprise Grid organisation is found by its team, whatever its
organisation; an org-wide install (``team_id`` none) by its organisation.

The bot token of ``SLACK_BOT_TOKEN`` keeps working beside installs: :attr:`fallback`,
its workspace's bot as ``auth.test`` named it at start, is found for that workspace when
it has no install of its own.

Bolt's built-in listeners handle ``app_uninstalled`` (:meth:`async_delete_all`) and
``tokens_revoked`` (:meth:`async_delete_bot` for the bot's token; user tokens are not
kept) (https://docs.slack.dev/reference/events/app_uninstalled,
https://docs.slack.dev/reference/events/tokens_revoked): the install loses its tokens,
and the workspace's events are refused from then on (bolt finds no bot for them). The
workspace of ``SLACK_BOT_TOKEN`` uninstalled here loses its :attr:`fallback` too.
"""

from __future__ import annotations

import logging
import secrets
from datetime import UTC, datetime
from logging import Logger
from typing import Any

from slack_sdk.oauth.installation_store.async_installation_store import AsyncInstallationStore
from slack_sdk.oauth.installation_store.models.bot import Bot
from slack_sdk.oauth.installation_store.models.installation import Installation as BoltInstall
from slack_sdk.oauth.state_store.async_state_store import AsyncOAuthStateStore

from conversations.installs import Installs
from conversations.store.installations import Installation

log = logging.getLogger(__name__)

PLATFORM = "slack"


class SlackInstallationStore(AsyncInstallationStore):
    """Bolt's ``AsyncInstallationStore`` over ``installs`` (see the module docstring)."""

    def __init__(self, installs: Installs | None = None) -> None:
        self.installs = installs
        """Where the installs are kept; given before the adapter starts (the bot opens the
        store after it builds the adapters)."""
        self.fallback: Bot | None = None
        """The bot of ``SLACK_BOT_TOKEN``, for its workspace when it has no install."""

    @property
    def logger(self) -> Logger:
        """Where bolt's own notes about this store go."""
        return log

    @property
    def _installs(self) -> Installs:
        if self.installs is None:
            raise RuntimeError("the Slack installation store was given no installs")
        return self.installs

    # --- saving ------------------------------------------------------------------------

    async def async_save(self, installation: BoltInstall) -> None:
        """Store the bot of a completed install (its user token, if any, is not kept)."""
        await self.async_save_bot(installation.to_bot())

    async def async_save_bot(self, bot: Bot) -> None:
        """Store ``bot`` (a new install, or its token rotated) for its workspace."""
        expires = bot.bot_token_expires_at
        installer = bot.custom_values.get("installer") if bot.custom_values else None
        await self._installs.save(
            Installation(
                platform=PLATFORM,
                enterprise=bot.enterprise_id or "",
                team="" if bot.is_enterprise_install else bot.team_id or "",
                bot_token=bot.bot_token,
                bot_id=bot.bot_id or "",
                bot_user_id=bot.bot_user_id or "",
                scopes=",".join(bot.bot_scopes or ()),
                app_id=bot.app_id or "",
                team_name=bot.team_name or "",
                enterprise_name=bot.enterprise_name or "",
                installer=str(installer or ""),
                refresh_token=bot.bot_refresh_token,
                expires_at=None if expires is None else datetime.fromtimestamp(expires, UTC),
                enterprise_install=bool(bot.is_enterprise_install),
                installed_at=datetime.fromtimestamp(bot.installed_at, UTC),
            )
        )

    # --- finding -----------------------------------------------------------------------

    async def async_find_bot(
        self,
        *,
        enterprise_id: str | None,
        team_id: str | None,
        is_enterprise_install: bool | None = False,
    ) -> Bot | None:
        """The bot of a workspace (by its team) or of an org-wide install (by its
        organisation); the :attr:`fallback` for its own workspace; else None."""
        found = await self.installation(enterprise_id, team_id, bool(is_enterprise_install))
        if found is not None:
            return _bot(found)
        fallback = self.fallback
        if fallback is not None and team_id and team_id == fallback.team_id:
            return fallback
        return None

    async def async_find_installation(
        self,
        *,
        enterprise_id: str | None,
        team_id: str | None,
        user_id: str | None = None,
        is_enterprise_install: bool | None = False,
    ) -> BoltInstall | None:
        """The install of a workspace as bolt's ``Installation`` (its bot only; None for a
        user's install: user tokens are not kept)."""
        if user_id is not None:
            return None
        bot = await self.async_find_bot(
            enterprise_id=enterprise_id,
            team_id=team_id,
            is_enterprise_install=is_enterprise_install,
        )
        if bot is None:
            return None
        return BoltInstall(
            app_id=bot.app_id,
            enterprise_id=bot.enterprise_id,
            enterprise_name=bot.enterprise_name,
            team_id=bot.team_id,
            team_name=bot.team_name,
            bot_token=bot.bot_token,
            bot_id=bot.bot_id,
            bot_user_id=bot.bot_user_id,
            bot_scopes=bot.bot_scopes,
            bot_refresh_token=bot.bot_refresh_token,
            bot_token_expires_at=bot.bot_token_expires_at,
            user_id="",
            is_enterprise_install=bot.is_enterprise_install,
            installed_at=bot.installed_at,
        )

    async def installation(
        self, enterprise_id: str | None, team_id: str | None, org_wide: bool = False
    ) -> Installation | None:
        """The live install that serves this workspace (tokens opened), if any."""
        if team_id and not org_wide:
            for found in self._installs.known():
                if found.platform == PLATFORM and found.team == team_id:
                    return found
            exact = await self._installs.find(
                PLATFORM, enterprise=enterprise_id or "", team=team_id
            )
            if exact is not None:
                return exact
        if enterprise_id:
            return await self._installs.find(PLATFORM, enterprise=enterprise_id, team="")
        return None

    async def bot_token(self, team: str) -> str | None:
        """The bot token the calls for ``team`` carry (:data:`adapters.slack.teams.TokenOf`)."""
        bot = await self.async_find_bot(enterprise_id=None, team_id=team)
        return None if bot is None else bot.bot_token

    # --- removing ----------------------------------------------------------------------

    async def async_delete_bot(self, *, enterprise_id: str | None, team_id: str | None) -> None:
        """``tokens_revoked`` for the bot: its workspace's install is removed."""
        await self._remove(enterprise_id, team_id, "tokens_revoked")

    async def async_delete_installation(
        self, *, enterprise_id: str | None, team_id: str | None, user_id: str | None = None
    ) -> None:
        """A user's tokens revoked: nothing is kept of them; without ``user_id``, the
        workspace's install is removed."""
        if user_id is None:
            await self._remove(enterprise_id, team_id, "app_uninstalled")

    async def async_delete_all(self, *, enterprise_id: str | None, team_id: str | None) -> None:
        """``app_uninstalled``: the workspace's install is removed."""
        await self._remove(enterprise_id, team_id, "app_uninstalled")

    async def _remove(self, enterprise_id: str | None, team_id: str | None, why: str) -> None:
        found = await self.installation(enterprise_id, team_id)
        if found is not None:
            await self._installs.remove(
                PLATFORM, enterprise=found.enterprise, team=found.team, why=why
            )
        fallback = self.fallback
        if fallback is not None and team_id and team_id == fallback.team_id:
            log.warning(
                "Slack workspace %s, SLACK_BOT_TOKEN's, is uninstalled (%s): its events are "
                "refused until a restart with a new token, or an install through OAuth",
                team_id,
                why,
            )
            self.fallback = None


def _bot(found: Installation) -> Bot:
    """An install as bolt's ``Bot`` (tokens opened)."""
    expires = None if found.expires_at is None else int(found.expires_at.timestamp())
    installed = found.installed_at or datetime.fromtimestamp(0, UTC)  # the store sets it
    return Bot(
        app_id=found.app_id or None,
        enterprise_id=found.enterprise or None,
        enterprise_name=found.enterprise_name or None,
        team_id=found.team or None,
        team_name=found.team_name or None,
        bot_token=found.bot_token,
        bot_id=found.bot_id,
        bot_user_id=found.bot_user_id,
        bot_scopes=found.scopes,
        bot_refresh_token=found.refresh_token,
        bot_token_expires_at=expires,
        is_enterprise_install=found.enterprise_install,
        installed_at=installed.timestamp(),
    )


class SlackStateStore(AsyncOAuthStateStore):
    """Bolt's ``AsyncOAuthStateStore`` over ``store``'s installs: a random ``state`` per visit of
    the install page, kept ``expiration_seconds`` (bolt's default, 600), taken once by the
    callback (https://docs.slack.dev/authentication/installing-with-oauth#asking)."""

    def __init__(self, store: SlackInstallationStore, *, expiration_seconds: int = 600) -> None:
        self._store = store
        self.expiration_seconds = expiration_seconds

    @property
    def logger(self) -> Logger:
        """Where bolt's own notes about this store go."""
        return log

    async def async_issue(self, *args: Any, **kwargs: Any) -> str:
        """A new state (32 random bytes, URL-safe), kept until it expires."""
        state = secrets.token_urlsafe(32)
        await self._store._installs.issue_state(state, lifetime=self.expiration_seconds)
        return state

    async def async_consume(self, state: str) -> bool:
        """Whether ``state`` was issued and has not expired; taken either way."""
        return bool(state) and await self._store._installs.consume_state(state)


def fallback_bot(me: Any, token: str) -> Bot:
    """The bot of ``SLACK_BOT_TOKEN`` (``me``: who ``auth.test`` said it is, a
    :class:`adapters.slack.translate.BotIdentity`), for
    :attr:`SlackInstallationStore.fallback` (its install time unknown: 0)."""
    return Bot(
        app_id=me.app_id or None,
        team_id=me.team_id,
        bot_token=token,
        bot_id=me.bot_id,
        bot_user_id=me.user_id,
        installed_at=0.0,
    )
