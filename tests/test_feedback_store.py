"""Feedback in the store (docs/architecture.md, "What a person sees"): the ``feedback``
contract on each backend, ``test_store_contract.py`` checking that every method is called.

One row per (conversation, person): a person's later feedback replaces theirs, two
people's both count, each conversation is counted on its own, and feedback on a
conversation that does not exist is refused.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from conversations.store import Store
from conversations.store.feedback import FeedbackCounts
from core.vocabulary.errors import ConversationNotFound
from tests.test_store_contract import BACKENDS, new_conversation, opened_store

ALICE, BOB = "U0ALICE001", "U0BOB00001"


@pytest.fixture(params=BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """A new, empty store of each backend (as in the contract suite)."""
    async with opened_store(request.param, request, tmp_path) as new:
        yield new


async def test_a_later_press_by_the_same_person_replaces_theirs(store: Store) -> None:
    cid = await new_conversation(store)
    first = await store.feedback.give(cid, ALICE, positive=True)
    second = await store.feedback.give(cid, ALICE, positive=False)

    [kept] = await store.feedback.of(cid)
    assert (kept.user_id, kept.positive) == (ALICE, False)
    assert kept.at == second.at >= first.at
    assert await store.feedback.counts() == {cid: FeedbackCounts(positive=0, negative=1)}


async def test_two_people_both_count_and_each_conversation_on_its_own(store: Store) -> None:
    one = await new_conversation(store)
    other = await new_conversation(store, "Ev2", thread="2.0")
    await store.feedback.give(one, ALICE, positive=True)
    await store.feedback.give(one, BOB, positive=True)
    await store.feedback.give(other, BOB, positive=False)

    assert [(f.user_id, f.positive) for f in await store.feedback.of(one)] == [
        (ALICE, True),
        (BOB, True),
    ]
    assert await store.feedback.counts() == {
        one: FeedbackCounts(positive=2, negative=0),
        other: FeedbackCounts(positive=0, negative=1),
    }


async def test_feedback_on_an_unknown_conversation_is_refused(store: Store) -> None:
    with pytest.raises(ConversationNotFound):
        await store.feedback.give("no-such-conversation", ALICE, positive=True)
    assert await store.feedback.counts() == {}
    assert await store.feedback.of("no-such-conversation") == []
