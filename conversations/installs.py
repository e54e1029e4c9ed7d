"""The app's installs as the bot uses them: tokens sealed in the store, opened here, redacted.

:class:`Installs` stands between the store's installations
(:mod:`conversations.store.installations`) and the platform adapter that installs the app
in many workspaces (Slack's OAuth flow: :mod:`adapters.slack.installations`). It seals
every token before the store sees it and opens it after (:mod:`conversations.sealing`),
and tells each token it holds in plain text to ``learned`` (the bot's
:meth:`core.secrets.Redactor.add`) before anyone can use it, so the token is redacted
from then on, in this instance, wherever text is kept or shown.

Every instance learns a new install's token (docs/architecture.md, "Several instances"):

- the instance that stored it, at once, before the OAuth callback is answered;
- every instance on its next look-up of that workspace (an event of it to authorize, a
  message to send there), which reads the store when the install is not known here yet,
  and learns the token before it hands it out;
- every instance within ``poll`` seconds anyway: :meth:`Installs.keep_fresh` reads the
  store's revision (one small read) every ``poll`` seconds and, when it moved, every live
  install again, learning new tokens and forgetting removed installs.

Installs are kept in memory once read (a few hundred bytes each), so a look-up costs no
read of the store; an uninstall on another instance reaches this one within ``poll``
seconds (Slack sends the workspace no more events once it is uninstalled).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta

from conversations.errors import Unsealable
from conversations.sealing import Sealer
from conversations.store.installations import Installation, Installations, OAuthStates, Revision
from core.context import now

log = logging.getLogger(__name__)

Learned = Callable[[str, str], object]
"""Told ``(name, token)`` of each token opened here (a redactor's ``add``)."""

Key = tuple[str, str, str]


def token_name(installation: Installation, kind: str = "BOT") -> str:
    """How the redactor names an install's token: ``SLACK_BOT_TOKEN T0123ABCD`` (the
    team, or the organisation of an org-wide install)."""
    where = installation.team or installation.enterprise
    return f"{installation.platform.upper()}_{kind}_TOKEN {where}"


class Installs:
    """Installs of the app, their tokens sealed in ``store`` and opened here (see the module
    docstring); ``states`` holds the OAuth flow's states; ``learned`` is told every token
    opened here; ``poll``: seconds between two looks at the store's revision."""

    def __init__(
        self,
        *,
        store: Installations,
        states: OAuthStates,
        sealer: Sealer,
        learned: Learned,
        poll: float = 1.0,
        clock: Callable[[], datetime] = now,
    ) -> None:
        self._store = store
        self._states = states
        self._sealer = sealer
        self._learned = learned
        self.poll = poll
        self._clock = clock
        self._live: dict[Key, Installation] = {}
        """The live installs known here, tokens opened, by key."""
        self._seen = Revision(rows=-1)
        """The store's revision when :attr:`_live` was last read whole."""
        self._unsealable: set[Key] = set()
        """Installs whose tokens no key opens (said once each)."""
        self.changed: Callable[[Installation], None] = lambda _installation: None
        """Told each install saved or removed here, or found changed in the store (the
        adapter drops what it keeps for that workspace: its clients)."""

    async def save(self, installation: Installation) -> Installation:
        """Store ``installation`` (tokens in plain text here, sealed in the store) and learn
        its tokens first; the install as stored, tokens in plain text."""
        self._learn(installation)
        sealed = replace(
            installation,
            bot_token=self._sealer.seal(installation.bot_token),
            refresh_token=None
            if installation.refresh_token is None
            else self._sealer.seal(installation.refresh_token),
        )
        stored = await self._store.save(sealed)
        opened = replace(
            stored, bot_token=installation.bot_token, refresh_token=installation.refresh_token
        )
        self._live[opened.key] = opened
        self._unsealable.discard(opened.key)
        log.info("installed on %s: %s %s", opened.platform, opened.enterprise, opened.team)
        self.changed(opened)
        return opened

    async def find(self, platform: str, *, enterprise: str, team: str) -> Installation | None:
        """The live install of this key, tokens opened (and learned); None when there is
        none, or when its tokens open with none of the keys (logged)."""
        key = (platform, enterprise, team)
        known = self._live.get(key)
        if known is not None:
            return known
        stored = await self._store.find(platform, enterprise=enterprise, team=team)
        if stored is None:
            return None
        opened = self._opened(stored)
        if opened is not None:
            self._live[key] = opened
        return opened

    async def remove(self, platform: str, *, enterprise: str, team: str, why: str) -> bool:
        """Remove this key's install (its tokens dropped from the store), ``why``
        (``app_uninstalled``, ``tokens_revoked``); False when there was no live one."""
        removed = await self._store.remove(platform, enterprise=enterprise, team=team, why=why)
        gone = self._live.pop((platform, enterprise, team), None)
        if removed:
            log.info("uninstalled from %s (%s): %s %s", platform, why, enterprise, team)
        if gone is not None:
            self.changed(gone)
        return removed

    def known(self) -> list[Installation]:
        """The live installs known here now (tokens opened)."""
        return list(self._live.values())

    async def refresh(self) -> bool:
        """Read every live install again when the store's revision moved since the last
        read; whether it had. New tokens are learned, removed installs forgotten."""
        revision = await self._store.revision()
        if revision == self._seen:
            return False
        stored = await self._store.every()
        live: dict[Key, Installation] = {}
        for each in stored:
            if each.removed_at is not None:
                continue
            opened = self._opened(each)
            if opened is not None:
                live[each.key] = opened
        before, self._live = self._live, live
        self._seen = revision
        for key in before.keys() | live.keys():
            was, new = before.get(key), live.get(key)
            if was != new:
                self.changed(new or was)  # type: ignore[arg-type]  # one is set
        return True

    async def keep_fresh(self) -> None:
        """:meth:`refresh` now and every ``poll`` seconds, until cancelled (a supervised
        task; a database that cannot be reached raises, and the task is started again)."""
        while True:
            await self.refresh()
            await asyncio.sleep(self.poll)

    async def issue_state(self, state: str, *, lifetime: float) -> None:
        """Keep the OAuth ``state`` for ``lifetime`` seconds."""
        await self._states.issue(state, expires_at=self._clock() + timedelta(seconds=lifetime))

    async def consume_state(self, state: str) -> bool:
        """Take the OAuth ``state``: True once, before it expired."""
        return await self._states.consume(state, at=self._clock())

    def _opened(self, stored: Installation) -> Installation | None:
        """``stored`` with its tokens opened and learned; None when no key opens them."""
        try:
            opened = replace(
                stored,
                bot_token=self._sealer.open(stored.bot_token),
                refresh_token=None
                if stored.refresh_token is None
                else self._sealer.open(stored.refresh_token),
            )
        except Unsealable:
            if stored.key not in self._unsealable:
                self._unsealable.add(stored.key)
                log.error(
                    "the tokens of the install on %s %s open with none of THREADBOT_TOKEN_KEYS "
                    "(put back the key they were sealed with, or install the app again there): "
                    "its events are refused",
                    stored.platform,
                    stored.team or stored.enterprise,
                )
            return None
        self._learn(opened)
        return opened

    def _learn(self, installation: Installation) -> None:
        self._learned(token_name(installation), installation.bot_token)
        if installation.refresh_token:
            self._learned(token_name(installation, "REFRESH"), installation.refresh_token)
