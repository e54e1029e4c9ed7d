"""Installations and OAuth states in memory (see :mod:`conversations.store.sql.installations`
for the rules)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime

from conversations.store.installations import Installation, Revision
from conversations.store.memory._tables import Tables, checkpoint


class MemoryInstallations:
    """:class:`conversations.store.installations.Installations` in memory."""

    def __init__(self, tables: Tables) -> None:
        self._t = tables

    async def save(self, installation: Installation) -> Installation:
        """Store ``installation``, replacing its key's row; the row as stored."""
        await checkpoint()
        now = self._t.clock()
        stored = replace(
            installation,
            installed_at=installation.installed_at or now,
            updated_at=now,
            removed_at=None,
            removed_why="",
        )
        self._t.installations[installation.key] = stored
        return stored

    async def find(self, platform: str, *, enterprise: str, team: str) -> Installation | None:
        """The live install of exactly this key, if any."""
        await checkpoint()
        found = self._t.installations.get((platform, enterprise, team))
        return None if found is None or found.removed_at is not None else found

    async def remove(self, platform: str, *, enterprise: str, team: str, why: str) -> bool:
        """Empty the tokens of the live install of this key, marked removed."""
        await checkpoint()
        key = (platform, enterprise, team)
        found = self._t.installations.get(key)
        if found is None or found.removed_at is not None:
            return False
        now = self._t.clock()
        self._t.installations[key] = replace(
            found,
            bot_token="",
            refresh_token=None,
            expires_at=None,
            removed_at=now,
            removed_why=why,
            updated_at=now,
        )
        return True

    async def every(self, platform: str | None = None) -> list[Installation]:
        """Every install (of ``platform``), removed ones too, oldest first."""
        await checkpoint()
        found = [
            i for i in self._t.installations.values() if platform is None or i.platform == platform
        ]
        return sorted(found, key=lambda i: (i.installed_at or self._t.clock(), i.key))

    async def revision(self) -> Revision:
        """How many rows, and the last change."""
        await checkpoint()
        times = [i.updated_at for i in self._t.installations.values() if i.updated_at]
        return Revision(rows=len(self._t.installations), latest=max(times, default=None))

    async def reseal(self, reseal: Callable[[str], str]) -> int:
        """Each sealed token through ``reseal``; all or nothing."""
        await checkpoint()
        done: dict[tuple[str, str, str], Installation] = {}
        for key, found in self._t.installations.items():
            if not found.bot_token:
                continue
            refresh = reseal(found.refresh_token) if found.refresh_token else found.refresh_token
            done[key] = replace(found, bot_token=reseal(found.bot_token), refresh_token=refresh)
        self._t.installations.update(done)
        return len(done)


class MemoryOAuthStates:
    """:class:`conversations.store.installations.OAuthStates` in memory."""

    def __init__(self, tables: Tables) -> None:
        self._t = tables

    async def issue(self, state: str, *, expires_at: datetime) -> None:
        """Keep ``state`` until ``expires_at``; the states expired by then are dropped."""
        await checkpoint()
        now = self._t.clock()
        for old in [s for s, until in self._t.oauth_states.items() if until <= now]:
            del self._t.oauth_states[old]
        self._t.oauth_states[state] = expires_at

    async def consume(self, state: str, *, at: datetime) -> bool:
        """Take ``state``: True once, when issued and not expired at ``at``."""
        await checkpoint()
        expiry = self._t.oauth_states.pop(state, None)
        return expiry is not None and at < expiry
