"""Opening a store by URL: ``memory://`` in memory, anything else SQLAlchemy's.

Kept apart from the package's ``__init__`` because it imports the migrations,
which import the SQL backend.
"""

from __future__ import annotations

from conversations.store import migrate
from conversations.store.interfaces import Renderer, SessionRenderer, Store, no_sessions
from conversations.store.memory import MemoryStore
from conversations.store.sql import SqlStore, create_engine
from core.faults import NO_FAULTS, Faults

MEMORY_URL = "memory://"
"""The URL of a store kept in the process's memory (nothing survives a restart)."""


def is_memory(url: str) -> bool:
    """Whether ``url`` names the in-memory store."""
    return url == MEMORY_URL


async def open_store(
    url: str,
    *,
    render: Renderer,
    faults: Faults = NO_FAULTS,
    sessions: SessionRenderer = no_sessions,
) -> Store:
    """The store at ``url``: a new :class:`MemoryStore` for :data:`MEMORY_URL`, else an
    :class:`SqlStore` on the database at ``url``, upgraded to the newest schema first.

    ``sessions`` gives a change's rows for its thread's agent session
    (:mod:`conversations.sessions`; none by default). ``faults`` may kill the process
    during the upgrade (crash tests). Raises
    ``sqlalchemy.exc.SQLAlchemyError`` when the database cannot be reached or
    upgraded (the engine is disposed of then).
    """
    if is_memory(url):
        return MemoryStore(render=render, sessions=sessions)
    engine = create_engine(url)
    try:
        await migrate.upgrade(engine, faults=faults)
    except BaseException:
        await engine.dispose()
        raise
    return SqlStore(engine=engine, render=render, sessions=sessions)
