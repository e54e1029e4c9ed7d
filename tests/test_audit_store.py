"""The audit trail in the store (docs/architecture.md, "The audit trail"): the ``audit``
contract on each backend, ``test_store_contract.py`` checking that every method is called.

A decision's row is written by the commit that makes the decision, and not at all when
that commit is refused; a refused attempt's row goes with its notice in one write, its
request's kind and plan version read from the request; rows come back oldest first,
filtered by conversation, channel and time; a stop request keeps the means of its stop.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from conversations.events import PostReply
from conversations.store import OutboxRecord, Outgoing, Store
from core.vocabulary.audit import Audited
from core.vocabulary.errors import ConversationNotFound, RequestConflict
from tests.test_store_contract import (
    ALICE,
    BACKENDS,
    BOB,
    THREAD,
    decision,
    new_conversation,
    open_request,
    opened_store,
)


@pytest.fixture(params=BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """A new, empty store of each backend (as in the contract suite)."""
    async with opened_store(request.param, request, tmp_path) as new:
        yield new


def approved_by(user_id: str) -> Audited:
    return Audited(
        request_kind="plan_approval",
        request_id="req1",
        version=1,
        user_id=user_id,
        means="reaction",
        outcome="approved",
        reason="run resumed",
    )


def refused(user_id: str, reason: str, request_id: str | None = "req1") -> Audited:
    return Audited(
        request_id=request_id, user_id=user_id, means="button", outcome="refused", reason=reason
    )


async def test_a_decision_s_row_is_written_by_its_commit_and_not_by_a_refused_one(
    store: Store,
) -> None:
    cid = await new_conversation(store)
    await open_request(store, cid)

    committed = await store.journal.commit(
        cid, decision(ALICE, "approve").model_copy(update={"audit": (approved_by(ALICE.id),)})
    )
    with pytest.raises(RequestConflict):  # decided already: the second commit writes nothing
        await store.journal.commit(
            cid, decision(BOB, "reject").model_copy(update={"audit": (approved_by(BOB.id),)})
        )

    [row] = await store.audit.entries()
    assert dataclasses.asdict(row) == {
        "id": row.id,
        "at": committed.at,  # the commit's own time
        "conversation_id": cid,
        "platform": "slack",
        "workspace": "T1",
        "channel": "C1",
        "request_kind": "plan_approval",
        "request_id": "req1",
        "version": 1,
        "user_id": ALICE.id,
        "means": "reaction",
        "outcome": "approved",
        "reason": "run resumed",
    }


async def test_a_refused_attempt_goes_with_its_notice_and_its_request_s_kind_is_read(
    store: Store,
) -> None:
    cid = await new_conversation(store)
    await open_request(store, cid)
    handed: list[list[OutboxRecord]] = []
    store.on_outbox = handed.append
    notice = PostReply(ref=THREAD, text="Only the requester or an approver can decide this, bob.")

    row = await store.audit.record(
        refused(BOB.id, "not an approver"),
        where=THREAD,
        conversation_id=cid,
        notices=[Outgoing(notice)],
    )

    assert (row.request_kind, row.version, row.user_id, row.means) == (
        "plan_approval",  # read from the request, which the refusal only named
        1,
        BOB.id,
        "button",
    )
    assert await store.audit.entries() == [row]
    [[posted]] = handed
    assert posted.action == notice
    assert [r.action for r in await store.outbox.rows(cid)] == [notice]


async def test_a_refusal_in_an_unknown_conversation_writes_nothing(store: Store) -> None:
    with pytest.raises(ConversationNotFound):
        await store.audit.record(
            refused(BOB.id, "not an approver"),
            where=THREAD,
            conversation_id="no-such-conversation",
            notices=[Outgoing(PostReply(ref=THREAD, text="no"))],
        )
    assert await store.audit.entries() == []
    assert await store.outbox.rows() == []


async def test_entries_come_oldest_first_filtered_by_conversation_channel_and_time(
    store: Store,
) -> None:
    one = await new_conversation(store)
    other = await new_conversation(store, "Ev2", thread="2.0", channel="C2")
    elsewhere = THREAD.model_copy(update={"channel": "C2", "thread": "2.0"})
    first = await store.audit.record(
        refused(BOB.id, "stale version"), where=THREAD, conversation_id=one
    )
    second = await store.audit.record(
        refused(ALICE.id, "already decided", request_id=None),
        where=elsewhere,
        conversation_id=other,
    )
    in_channel = await store.audit.record(
        refused(BOB.id, "nothing they may stop here", request_id=None),
        where=THREAD.model_copy(update={"thread": None}),
    )

    assert await store.audit.entries() == [first, second, in_channel]
    assert first.at < second.at < in_channel.at
    assert (first.request_kind, second.request_kind) == (None, None)  # no such request
    assert in_channel.conversation_id is None  # a /stop in a channel, about no conversation
    assert await store.audit.entries(conversation_id=one) == [first]
    assert await store.audit.entries(channel="C2") == [second]
    assert await store.audit.entries(channel="C1") == [first, in_channel]
    assert await store.audit.entries(since=second.at) == [second, in_channel]
    assert await store.audit.entries(conversation_id=one, since=second.at) == []


async def test_a_discord_thread_s_rows_are_its_channel_s(store: Store) -> None:
    thread = THREAD.model_copy(
        update={"platform": "discord", "workspace": "G1", "channel": "T77", "parent": "C9"}
    )
    cid = await new_conversation(store)
    row = await store.audit.record(
        refused(BOB.id, "not an approver"), where=thread, conversation_id=cid
    )
    assert (row.platform, row.workspace, row.channel) == ("discord", "G1", "C9")
    assert await store.audit.entries(channel="C9") == [row]


async def test_a_stop_request_keeps_how_the_stop_was_given(store: Store) -> None:
    cid = await new_conversation(store)
    lease = await store.leases.acquire_lease(cid, "host-a:1", ttl=60)
    assert lease is not None

    assert await store.stops.request_stop(
        cid, holder="host-a:1", epoch=lease.epoch, by=BOB, run=3, means="native_stop"
    )
    assert await store.stops.request_stop(cid, holder="host-a:1", epoch=lease.epoch, by=ALICE)

    given, unsaid = await store.stops.stop_requests({cid})
    assert (given.by, given.run, given.means) == (BOB, 3, "native_stop")
    assert (unsaid.by, unsaid.means) == (ALICE, None)
