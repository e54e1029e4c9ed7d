"""Installations and OAuth states in SQL (see :mod:`conversations.store.installations`).

A save is one ``INSERT ... ON CONFLICT DO UPDATE`` on the key ``(platform, enterprise,
team)``, so two installs of one workspace at once leave one row, the later write's
(https://www.sqlite.org/lang_upsert.html; PostgreSQL's ``ON CONFLICT``). A removal is an
``UPDATE`` of the live row (its tokens emptied), so it reports whether there was one. A
state is taken with one ``DELETE``, whose row count says whether it was there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, delete, func, select, update
from sqlalchemy.orm import Session

from conversations.store.installations import Installation, Revision
from conversations.store.records import as_utc
from conversations.store.schema import InstallationRow, OAuthStateRow, utcnow
from conversations.store.sql.database import Database, changed, conflict_insert

_KEY = frozenset({"platform", "enterprise", "team"})


class SqlInstallations:
    """:class:`conversations.store.installations.Installations` on ``installations``."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def save(self, installation: Installation) -> Installation:
        """Store ``installation``, replacing its key's row; the row as stored."""
        now = utcnow()
        stored = replace(
            installation,
            installed_at=installation.installed_at or now,
            updated_at=now,
            removed_at=None,
            removed_why="",
        )
        table = cast(Table, InstallationRow.__table__)
        values = _values(stored)
        insert = conflict_insert(self._db.engine.dialect.name, table)
        statement = insert.values(values).on_conflict_do_update(
            index_elements=["platform", "enterprise", "team"],
            set_={k: v for k, v in values.items() if k not in _KEY},
        )
        await self._db.write_alone(statement, changed)
        return stored

    async def find(self, platform: str, *, enterprise: str, team: str) -> Installation | None:
        """The live install of exactly this key, if any."""
        stmt = select(InstallationRow).where(
            InstallationRow.platform == platform,
            InstallationRow.enterprise == enterprise,
            InstallationRow.team == team,
            InstallationRow.removed_at.is_(None),
        )
        async with self._db.read() as session:
            row = (await session.execute(stmt)).scalar_one_or_none()
        return None if row is None else _installation(row)

    async def remove(self, platform: str, *, enterprise: str, team: str, why: str) -> bool:
        """Empty the tokens of the live install of this key, marked removed; False when
        there was none."""
        now = utcnow()
        stmt = (
            update(InstallationRow)
            .where(
                InstallationRow.platform == platform,
                InstallationRow.enterprise == enterprise,
                InstallationRow.team == team,
                InstallationRow.removed_at.is_(None),
            )
            .values(
                bot_token="",
                refresh_token=None,
                expires_at=None,
                removed_at=now,
                removed_why=why,
                updated_at=now,
            )
        )
        return await self._db.write_alone(stmt, changed) > 0

    async def every(self, platform: str | None = None) -> list[Installation]:
        """Every install (of ``platform``), removed ones too, oldest first."""
        stmt = select(InstallationRow).order_by(
            InstallationRow.installed_at,
            InstallationRow.platform,
            InstallationRow.enterprise,
            InstallationRow.team,
        )
        if platform is not None:
            stmt = stmt.where(InstallationRow.platform == platform)
        async with self._db.read() as session:
            rows = (await session.execute(stmt)).scalars().all()
        return [_installation(row) for row in rows]

    async def revision(self) -> Revision:
        """How many rows, and the last change."""
        stmt = select(func.count(), func.max(InstallationRow.updated_at))
        async with self._db.read() as session:
            rows, latest = (await session.execute(stmt)).one()
        return Revision(rows=int(rows), latest=as_utc(latest))

    async def reseal(self, reseal: Callable[[str], str]) -> int:
        """Each sealed token through ``reseal``, every row in one transaction."""
        return await self._db.write(lambda session: _resealed(session, reseal))


def _resealed(session: Session, reseal: Callable[[str], str]) -> int:
    rows = session.execute(select(InstallationRow).where(InstallationRow.bot_token != ""))
    count = 0
    for row in rows.scalars().all():
        row.bot_token = reseal(row.bot_token)
        if row.refresh_token:
            row.refresh_token = reseal(row.refresh_token)
        count += 1
    return count


def _values(installation: Installation) -> dict[str, Any]:
    return {
        "platform": installation.platform,
        "enterprise": installation.enterprise,
        "team": installation.team,
        "bot_token": installation.bot_token,
        "refresh_token": installation.refresh_token,
        "expires_at": installation.expires_at,
        "bot_id": installation.bot_id,
        "bot_user_id": installation.bot_user_id,
        "scopes": installation.scopes,
        "app_id": installation.app_id,
        "team_name": installation.team_name,
        "enterprise_name": installation.enterprise_name,
        "installer": installation.installer,
        "enterprise_install": installation.enterprise_install,
        "installed_at": installation.installed_at,
        "updated_at": installation.updated_at,
        "removed_at": installation.removed_at,
        "removed_why": installation.removed_why,
    }


def _installation(row: InstallationRow) -> Installation:
    return Installation(
        platform=row.platform,
        enterprise=row.enterprise,
        team=row.team,
        bot_token=row.bot_token,
        bot_id=row.bot_id,
        bot_user_id=row.bot_user_id,
        scopes=row.scopes,
        app_id=row.app_id,
        team_name=row.team_name,
        enterprise_name=row.enterprise_name,
        installer=row.installer,
        refresh_token=row.refresh_token,
        expires_at=as_utc(row.expires_at),
        enterprise_install=row.enterprise_install,
        installed_at=as_utc(row.installed_at),
        updated_at=as_utc(row.updated_at),
        removed_at=as_utc(row.removed_at),
        removed_why=row.removed_why,
    )


class SqlOAuthStates:
    """:class:`conversations.store.installations.OAuthStates` on ``oauth_states``."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def issue(self, state: str, *, expires_at: datetime) -> None:
        """Keep ``state`` until ``expires_at``; the states expired by then are dropped."""

        def issued(session: Session) -> None:
            session.execute(delete(OAuthStateRow).where(OAuthStateRow.expires_at <= utcnow()))
            session.add(OAuthStateRow(state=state, expires_at=expires_at))

        await self._db.write(issued)

    async def consume(self, state: str, *, at: datetime) -> bool:
        """Take ``state``: True once, when issued and not expired at ``at``."""
        stmt = (
            delete(OAuthStateRow)
            .where(OAuthStateRow.state == state)
            .returning(OAuthStateRow.expires_at)
        )
        expiry = await self._db.write_alone(stmt, lambda result: result.scalar_one_or_none())
        found = as_utc(expiry)
        return found is not None and at < found
