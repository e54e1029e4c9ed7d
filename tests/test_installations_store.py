"""Installations and OAuth states in the store (docs/architecture.md, "Several instances"):
the ``installations`` and ``oauth_states`` contract on each backend,
``test_store_contract.py`` checking that every method is called.

One row per ``(platform, enterprise, team)``: a later install replaces it; a removal drops
its tokens and keeps it marked, so ``find`` no longer returns it and the revision moves;
a re-install brings it back; resealing changes every token in one go, or none. A state is
taken once, and never after its expiry.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from conversations.store import Store
from conversations.store.installations import Installation, Revision
from tests.test_store_contract import BACKENDS, opened_store

T2 = "T0SECOND01"


@pytest.fixture(params=BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """A new, empty store of each backend (as in the contract suite)."""
    async with opened_store(request.param, request, tmp_path) as new:
        yield new


def install(team: str = T2, token: str = "sealed-1", **more: object) -> Installation:
    return Installation(
        platform="slack",
        enterprise="",
        team=team,
        bot_token=token,
        bot_id="B0SECOND01",
        bot_user_id="U0SECBOT01",
        scopes="app_mentions:read,chat:write",
        installer="U0ALICE001",
        **more,  # type: ignore[arg-type]
    )


async def test_a_later_install_replaces_the_row_of_its_workspace(store: Store) -> None:
    assert await store.installations.revision() == Revision(rows=0, latest=None)
    first = await store.installations.save(install(token="sealed-1"))
    second = await store.installations.save(install(token="sealed-2", team_name="Second"))
    other = await store.installations.save(install(team="T0THIRD001", token="sealed-3"))

    found = await store.installations.find("slack", enterprise="", team=T2)
    assert found is not None
    assert (found.bot_token, found.team_name, found.bot_user_id) == (
        "sealed-2",
        "Second",
        "U0SECBOT01",
    )
    assert found.updated_at == second.updated_at
    assert first.updated_at is not None and second.updated_at is not None
    assert second.updated_at >= first.updated_at
    assert await store.installations.find("slack", enterprise="E0ORG00001", team=T2) is None
    assert await store.installations.find("discord", enterprise="", team=T2) is None
    assert [i.team for i in await store.installations.every("slack")] == [T2, other.team]
    assert await store.installations.every("discord") == []
    revision = await store.installations.revision()
    assert revision.rows == 2 and revision.latest == other.updated_at


async def test_a_removal_drops_the_tokens_and_a_new_install_brings_it_back(store: Store) -> None:
    await store.installations.save(install(refresh_token="sealed-refresh"))
    before = await store.installations.revision()

    assert await store.installations.remove("slack", enterprise="", team=T2, why="app_uninstalled")
    assert not await store.installations.remove("slack", enterprise="", team=T2, why="again")
    assert not await store.installations.remove("slack", enterprise="", team="T0NONE0001", why="x")

    assert await store.installations.find("slack", enterprise="", team=T2) is None
    [kept] = await store.installations.every()
    assert (kept.bot_token, kept.refresh_token) == ("", None)  # no token is kept
    assert kept.removed_why == "app_uninstalled" and kept.removed_at is not None
    after = await store.installations.revision()
    assert after.rows == before.rows and after != before

    await store.installations.save(install(token="sealed-again"))
    found = await store.installations.find("slack", enterprise="", team=T2)
    assert found is not None and found.bot_token == "sealed-again"
    assert (found.removed_at, found.removed_why) == (None, "")


async def test_resealing_changes_every_token_or_none(store: Store) -> None:
    await store.installations.save(install(token="a", refresh_token="r"))
    await store.installations.save(install(team="T0THIRD001", token="b"))
    await store.installations.save(install(team="T0GONE0001", token="c"))
    await store.installations.remove(
        "slack", enterprise="", team="T0GONE0001", why="tokens_revoked"
    )

    assert await store.installations.reseal(lambda sealed: f"new({sealed})") == 2
    tokens = {(i.team, i.bot_token, i.refresh_token) for i in await store.installations.every()}
    assert tokens == {
        (T2, "new(a)", "new(r)"),
        ("T0THIRD001", "new(b)", None),
        ("T0GONE0001", "", None),
    }

    def fails_on_b(sealed: str) -> str:
        if "b" in sealed:
            raise ValueError("cannot open it")
        return f"again({sealed})"

    with pytest.raises(ValueError, match="cannot open it"):
        await store.installations.reseal(fails_on_b)
    unchanged = {(i.team, i.bot_token, i.refresh_token) for i in await store.installations.every()}
    assert unchanged == tokens


async def test_a_state_is_taken_once_and_not_after_it_expired(store: Store) -> None:
    now = datetime.now(UTC)
    await store.oauth_states.issue("state-1", expires_at=now + timedelta(minutes=10))
    await store.oauth_states.issue("state-2", expires_at=now + timedelta(minutes=10))

    assert await store.oauth_states.consume("state-1", at=now)
    assert not await store.oauth_states.consume("state-1", at=now)  # once
    assert not await store.oauth_states.consume("forged", at=now)
    assert not await store.oauth_states.consume("state-2", at=now + timedelta(minutes=11))
    assert not await store.oauth_states.consume("state-2", at=now)  # gone with the late try
