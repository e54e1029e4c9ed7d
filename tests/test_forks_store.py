"""Forks in the store (docs/architecture.md, "Rewind and fork"): the ``forks`` contract on
each backend, ``test_store_contract.py`` checking that every method is called.

A fork is one write: the new conversation (bound to its placeholder thread, ``running``
at its position and plan version), its journal (each entry's ``seq`` and time as
given), its tool records, its requests (decided ones with who decided them, oldest
first), its one outbox row (handed on once written) and the audit trail's row; the
original conversation is not written. A fork left ``running`` on its placeholder is not
resumed at start nor taken over, until its thread is bound. A taken id writes nothing.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from conversations.events import PlatformRef, StartThread
from conversations.store import Outgoing, Store
from conversations.store.forks import ForkOpening
from conversations.store.records import new_conversation_id
from conversations.store.schedules import awaits_thread
from core.run.fork import fork_of
from core.tool_state import admit, move, opened
from core.vocabulary import lifecycle
from core.vocabulary.audit import FORK, Audited
from core.vocabulary.entries import AssistantTurn, DecisionEntry, ToolCall, UserText
from core.vocabulary.journal import Change, RequestResolution
from core.vocabulary.lifecycle import Lifecycle
from core.vocabulary.requests import PlanApproval, RequestState
from core.vocabulary.tool_records import ToolState
from core.vocabulary.verdicts import Approved
from core.workflows.loading import default_workflow
from tests.test_store_contract import ALICE, BACKENDS, BOB, THREAD, new_conversation, opened_store

AT = datetime(2026, 12, 7, 10, 0, tzinfo=UTC)
PLACE = PlatformRef(platform="slack", workspace="T1", channel="C1")


@pytest.fixture(params=BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """A new, empty store of each backend (as in the contract suite)."""
    async with opened_store(request.param, request, tmp_path) as new:
        yield new


async def an_original(store: Store) -> str:
    """A conversation with a request, a plan approved, and a turn whose call is open."""
    cid = await new_conversation(store)
    plan_call = ToolCall(id="toolu_1", name="propose_plan", input={"steps": ["Write"]})
    plan_turn = AssistantTurn(tool_calls=(plan_call,), stop_reason="tool_use")
    admitted = admit(plan_call, read_only=False, state=ToolState.APPROVED, turn_seq=2, index=0)
    assert admitted.record is not None
    record = opened(admitted.record, "plan-1")
    await store.journal.commit(
        cid,
        Change(
            entries=(UserText(author=ALICE, text="write it", role="request"), plan_turn),
            tool_calls=(record,),
            open_request=PlanApproval(id="plan-1", tool_use_id="toolu_1", plan_version=1),
            status=lifecycle.move(lifecycle.IDLE, lifecycle.RUNNING),
            plan_version=1,
        ),
    )
    write = ToolCall(id="toolu_2", name="write_file", input={"path": "a", "content": "b"})
    answered = move(record, ToolState.DONE, result="Plan v1 was approved by bob.")
    await store.journal.commit(
        cid,
        Change(
            entries=(
                DecisionEntry(request_id="plan-1", verdict=Approved(), by=BOB),
                *answered.results,
                AssistantTurn(tool_calls=(write,), stop_reason="tool_use"),
            ),
            tool_calls=answered.records,
            resolve=(
                RequestResolution(
                    request_id="plan-1", state=RequestState.DECIDED, verdict=Approved(), by=BOB
                ),
            ),
        ),
    )
    return cid


def opening(original: str, forked_from: object, new: str) -> ForkOpening:
    """The fork of ``forked_from`` (a snapshot) at entry 5, as ``new``, by operator dana."""
    ids = itertools.count(1)
    forked = fork_of(
        forked_from,  # type: ignore[arg-type]
        5,
        by="dana",
        workflow=default_workflow(),
        cloned=False,
        now=AT,
        new_id=lambda: f"copy-{next(ids)}",
    )
    return ForkOpening(
        conversation_id=new,
        place=PLACE,
        requester=ALICE,
        workspace_root=Path("workspaces"),
        forked=forked,
        announce=Outgoing(StartThread(ref=PLACE, text="🍴 Forked by operator dana")),
        audited=Audited(
            request_kind=FORK,
            request_id="5",
            user_id="operator:dana",
            means="command",
            outcome="forked",
            reason=f"forked into conversation {new}",
        ),
        original=original,
        where=THREAD,
    )


async def test_a_fork_is_written_whole_and_the_original_is_not_written(store: Store) -> None:
    original = await an_original(store)
    before = await store.journal.load(original)
    outbox_before = await store.outbox.rows(original)
    handed: list[list[str]] = []
    store.on_outbox = lambda rows: handed.append([r.action.kind for r in rows])
    new = new_conversation_id()

    await store.forks.open_fork(opening(original, before, new))

    fork = await store.journal.load(new)
    assert [(r.seq, r.entry.kind) for r in fork.journal] == [
        (1, "user_text"),
        (2, "assistant_turn"),
        (3, "decision"),
        (4, "tool_result"),
        (5, "assistant_turn"),
        (6, "forked_from"),  # where it came from
        (7, "tool_result"),  # the open write_file, cancelled
        (8, "context_note"),  # the fork's note
    ]
    assert [r.at for r in fork.journal[:5]] == [r.at for r in before.journal]
    assert [r.at for r in fork.journal[5:]] == [AT, AT, AT]
    (plan,) = fork.requests
    assert (plan.id, plan.state, plan.verdict, plan.decided_by) == (
        "copy-1",
        RequestState.DECIDED,
        Approved(),
        BOB,
    )
    decided = fork.journal[2].entry
    assert isinstance(decided, DecisionEntry) and decided.request_id == "copy-1"
    assert fork.tool_calls["toolu_1"] == before.tool_calls["toolu_1"].model_copy(
        update={"request_id": "copy-1"}
    )
    assert fork.tool_calls["toolu_2"].state is ToolState.CANCELLED
    assert fork.status.lifecycle is Lifecycle.RUNNING and fork.position == "planning"
    assert fork.plan_version == 1
    assert fork.requester == ALICE and fork.workspace == str(Path("workspaces") / new)
    info = await store.threads.info(new)
    assert awaits_thread(info.binding) and info.binding.channel == "C1"
    (row,) = await store.outbox.rows(new)
    assert isinstance(row.action, StartThread) and row.state == "pending"
    assert handed == [["start_thread"]]
    (audited,) = await store.audit.entries(conversation_id=original)
    assert (audited.request_kind, audited.request_id, audited.user_id) == (
        "fork",
        "5",
        "operator:dana",
    )
    assert (audited.channel, audited.outcome) == ("C1", "forked")
    assert await store.journal.load(original) == before
    assert await store.outbox.rows(original) == outbox_before


async def test_a_fork_waiting_for_its_thread_is_neither_resumed_nor_taken_over(
    store: Store,
) -> None:
    original = await an_original(store)
    new = new_conversation_id()
    await store.forks.open_fork(opening(original, await store.journal.load(original), new))

    assert new not in await store.threads.running()
    assert new not in [
        t.conversation_id for t in await store.leases.take_lapsed("i1", ttl=60, limit=10)
    ]
    thread = PLACE.in_thread("1712345678.000100")
    assert await store.schedules.bind_thread(new, thread)
    assert new in await store.threads.running()
    taken = await store.leases.take_lapsed("i1", ttl=60, limit=10)
    assert new in [t.conversation_id for t in taken]


async def test_a_fork_whose_id_is_taken_writes_nothing(store: Store) -> None:
    original = await an_original(store)
    snap = await store.journal.load(original)
    new = new_conversation_id()
    await store.forks.open_fork(opening(original, snap, new))
    rows = await store.outbox.rows()
    with pytest.raises(ValueError, match="exists already"):
        await store.forks.open_fork(opening(original, snap, new))
    assert await store.outbox.rows() == rows
    assert len(await store.audit.entries(conversation_id=original)) == 1
    assert (await store.journal.load(new)).journal[-1].seq == 8
