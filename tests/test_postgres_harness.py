"""The tests' PostgreSQL fallback (``tests/postgres.py``): a throwaway cluster from the
machine's binaries starts (as ``nobody`` under root), serves a session database at the
newest migration, and leaves nothing behind."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from conversations.store import migrate
from conversations.store.sql import create_engine
from tests import postgres


def test_a_throwaway_cluster_serves_a_migrated_session_database_and_goes_away() -> None:
    pytest.importorskip("asyncpg")
    if postgres._binaries() is None:
        pytest.skip("no PostgreSQL binaries on this machine (apt install postgresql)")
    server = postgres.throwaway_cluster()
    assert isinstance(server, postgres.Server), server
    folder = Path(server.how.removeprefix("a throwaway cluster in "))
    try:
        assert (folder / "data" / "PG_VERSION").exists()
        assert list(folder.glob(".s.PGSQL.*"))  # its socket sits in its own folder
        url, drop = postgres.session_database(server)

        async def revision() -> str | None:
            engine = create_engine(url)
            try:
                return await migrate.current_revision(engine)
            finally:
                await engine.dispose()

        assert asyncio.run(revision()) is not None
        drop()
    finally:
        server.stop()
    assert not folder.exists()
