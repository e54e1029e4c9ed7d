"""The run inspector's sessions in the store (docs/architecture.md, "The run inspector"):
the ``operator_sessions`` contract on each backend. A session is found by the hash of
its id until it expires or is closed, with the digest of the token it signed in with;
opening one, closing one and finding one expired drop those expired; a session written
through one store is found through another on the same database (another instance behind
a load balancer).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from conversations.store import Store
from conversations.store.operator_sessions import OperatorSession
from tests.test_store_contract import BACKENDS, opened_store, sqlite_store

T0 = datetime(2026, 12, 6, 20, 0, tzinfo=UTC)


def session(digest: str, *, opened: datetime = T0, hours: float = 12) -> OperatorSession:
    return OperatorSession(
        id_sha256=digest * 64 if len(digest) == 1 else digest,
        operator="dana",
        opened_at=opened,
        expires_at=opened + timedelta(hours=hours),
        token_digest="0123456789abcdef",
    )


@pytest.fixture(params=BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """A new, empty store of each backend (as in the contract suite)."""
    async with opened_store(request.param, request, tmp_path) as new:
        yield new


async def test_a_session_is_found_until_it_expires(store: Store) -> None:
    await store.operator_sessions.open(session("a"))
    found = await store.operator_sessions.find("a" * 64, at=T0 + timedelta(hours=11))
    assert found == session("a")
    assert await store.operator_sessions.find("a" * 64, at=T0 + timedelta(hours=12)) is None
    assert await store.operator_sessions.find("b" * 64, at=T0) is None


async def test_a_closed_session_is_gone_and_closing_it_again_says_so(store: Store) -> None:
    await store.operator_sessions.open(session("a"))
    await store.operator_sessions.open(session("b"))
    assert await store.operator_sessions.close("a" * 64) is True
    assert await store.operator_sessions.close("a" * 64) is False
    assert await store.operator_sessions.find("a" * 64, at=T0) is None
    assert await store.operator_sessions.find("b" * 64, at=T0) == session("b")


async def test_opening_a_session_drops_the_expired_ones(store: Store) -> None:
    await store.operator_sessions.open(session("a", hours=1))
    await store.operator_sessions.open(session("b", opened=T0 + timedelta(hours=2)))
    # the expired session is gone, not merely hidden: closing it finds nothing
    assert await store.operator_sessions.close("a" * 64) is False


async def test_a_session_opened_through_one_store_is_found_through_another(
    tmp_path: Path,
) -> None:
    async with sqlite_store(tmp_path) as one, sqlite_store(tmp_path) as other:
        await one.operator_sessions.open(session("c"))
        assert await other.operator_sessions.find("c" * 64, at=T0) == session("c")
        assert await other.operator_sessions.close("c" * 64) is True
        assert await one.operator_sessions.find("c" * 64, at=T0) is None


async def test_a_session_found_expired_is_dropped(store: Store) -> None:
    await store.operator_sessions.open(session("a", hours=1))
    assert await store.operator_sessions.find("a" * 64, at=T0 + timedelta(hours=1)) is None
    # dropped, not merely hidden: closing it finds nothing, nor does an earlier time
    assert await store.operator_sessions.find("a" * 64, at=T0) is None
    assert await store.operator_sessions.close("a" * 64) is False


async def test_closing_a_session_at_a_time_drops_the_expired_ones(store: Store) -> None:
    await store.operator_sessions.open(session("a", hours=1))
    await store.operator_sessions.open(session("b", hours=3))
    await store.operator_sessions.open(session("c"))
    assert await store.operator_sessions.close("c" * 64, at=T0 + timedelta(hours=2)) is True
    assert await store.operator_sessions.find("a" * 64, at=T0) is None
    assert await store.operator_sessions.find("b" * 64, at=T0) == session("b", hours=3)
