"""The ``Installations`` and ``OAuthStates`` interfaces of the store: installs of the app.

A Slack app distributed to many workspaces is installed in each through Slack's OAuth v2
flow, and each install brings the bot token of that workspace
(https://docs.slack.dev/authentication/installing-with-oauth). One row per install, keyed
by ``(platform, enterprise, team)``: ``team`` is the workspace (``T...``), ``enterprise``
its Enterprise Grid organisation (``E...``, ``""`` outside one); an org-wide install has
``team = ""``. A later install of the same workspace replaces its row.

The token fields hold what they are given: the installs service seals them before they
get here and opens them after (:mod:`conversations.installs`), so the table never holds
a token in plain text. An uninstall keeps the row, without its tokens, marked removed
(when and why): the workspace's events are then refused, and a new install brings it
back. Nothing else deletes a row, so :meth:`Installations.revision` only moves forward;
every instance reads it every ``wakeup_poll`` seconds to learn new tokens
(docs/architecture.md, "Several instances").

``OAuthStates`` keeps the ``state`` values the install page hands out, each taken once
before it expires (the OAuth flow's check against forged callbacks:
https://docs.slack.dev/authentication/installing-with-oauth#asking). Both are taken by
the Slack adapter's installation and state stores (:mod:`adapters.slack.installations`)
through :mod:`conversations.installs`, and by ``threadbot tokens rekey``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol


@dataclass(frozen=True)
class Installation:
    """One install of the app on ``platform`` (``slack``) for a workspace or organisation.

    ``bot_token`` and ``refresh_token`` are sealed (:mod:`conversations.sealing`) when
    stored, ``""`` / None once removed; ``bot_id`` (``B...``) and ``bot_user_id``
    (``U...``) name the bot in that workspace, ``scopes`` its scopes (comma-separated, as
    Slack gives them); ``installer`` is the user id who installed it; ``expires_at``: when
    the token expires (token rotation; None: never). ``installed_at`` is when the app was
    installed, ``updated_at`` when the row last changed (the store's clock); ``removed_at``
    and ``removed_why`` (``app_uninstalled``, ``tokens_revoked``) are set once it was
    removed.
    """

    platform: str
    enterprise: str
    team: str
    bot_token: str
    bot_id: str = ""
    bot_user_id: str = ""
    scopes: str = ""
    app_id: str = ""
    team_name: str = ""
    enterprise_name: str = ""
    installer: str = ""
    refresh_token: str | None = None
    expires_at: datetime | None = None
    enterprise_install: bool = False
    installed_at: datetime | None = None
    updated_at: datetime | None = None
    removed_at: datetime | None = None
    removed_why: str = ""

    @property
    def key(self) -> tuple[str, str, str]:
        """``(platform, enterprise, team)``: one row each."""
        return (self.platform, self.enterprise, self.team)


@dataclass(frozen=True)
class Revision:
    """Where the installations stand: how many rows, and the last change. Equal revisions
    mean nothing was saved or removed in between (rows are never deleted)."""

    rows: int = 0
    latest: datetime | None = None


class Installations(Protocol):
    """Installs of the app, one row each (see the module docstring)."""

    async def save(self, installation: Installation) -> Installation:
        """Store ``installation`` (its tokens sealed), replacing the row of its key, removed
        or not; the row as stored (``updated_at`` set, ``installed_at`` set when None)."""
        ...

    async def find(self, platform: str, *, enterprise: str, team: str) -> Installation | None:
        """The live (not removed) install of exactly this key; None when there is none."""
        ...

    async def remove(self, platform: str, *, enterprise: str, team: str, why: str) -> bool:
        """Drop the tokens of this key's install and mark it removed, ``why``; False when
        there was no live install of it."""
        ...

    async def every(self, platform: str | None = None) -> list[Installation]:
        """Every install (of ``platform`` when given), removed ones too, oldest first."""
        ...

    async def revision(self) -> Revision:
        """Where the installations stand now (one small read, for polling)."""
        ...

    async def reseal(self, reseal: Callable[[str], str]) -> int:
        """Replace each sealed token by ``reseal(token)`` (a new key's sealing of it), every
        row in one transaction; how many rows had tokens. ``reseal`` raising leaves every
        row as it was."""
        ...


class OAuthStates(Protocol):
    """The OAuth flow's ``state`` values, each taken once before it expires."""

    async def issue(self, state: str, *, expires_at: datetime) -> None:
        """Keep ``state`` until ``expires_at`` (the states expired before it are dropped)."""
        ...

    async def consume(self, state: str, *, at: datetime) -> bool:
        """Take ``state``: True once, when it was issued and ``at`` is before its expiry;
        it is gone either way."""
        ...
