"""A tool call's state moves only as the table allows, its result written with it (issue 11).

The table is the one in docs/architecture.md, "Durability and exactly-once": a call is
admitted ``approved``, ``pending_approval`` or ``denied``; it runs, is decided, or
is closed; a final state never moves again and always comes with the call's one
result. Waiting control calls (``propose_plan``, ``ask_user``) stay ``approved``:
the request they opened carries the wait.
"""

from __future__ import annotations

import itertools

import pytest

from conversations.store import legacy
from core.tool_state import MOVES, admit, allowed, move, opened
from core.vocabulary.entries import ToolCall
from core.vocabulary.errors import IllegalTransition
from core.vocabulary.tool_records import FINAL_TOOL_STATES, ToolCallRecord, ToolState

S = ToolState


def record(state: ToolState, name: str = "run_command") -> ToolCallRecord:
    moved = admit(
        ToolCall(id="toolu_1", name=name, input={"command": "make"}),
        read_only=False,
        state=S.APPROVED,
        turn_seq=3,
        index=0,
    )
    assert moved.record is not None
    return moved.record.model_copy(update={"state": state})  # a stored record, as loaded


def test_a_call_runs_and_its_result_comes_with_its_final_state() -> None:
    running = move(record(S.APPROVED), S.RUNNING)
    assert running.records[0].state is S.RUNNING and running.results == ()

    done = move(running.records[0], S.DONE, result="exit code 0")
    assert done.records[0].state is S.DONE
    (result,) = done.results
    assert (result.tool_use_id, result.content, result.is_error) == (
        "toolu_1",
        "exit code 0",
        False,
    )


def test_every_final_state_but_done_is_an_error_result() -> None:
    for final in FINAL_TOOL_STATES - {S.DONE}:
        before = next(s for s, targets in MOVES.items() if final in targets and s is not None)
        (result,) = move(record(before), final, result="why").results
        assert result.is_error, final


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (S.DONE, S.RUNNING),
        (S.DENIED, S.APPROVED),
        (S.CANCELLED, S.FAILED),
        (S.UNKNOWN, S.DONE),
        (S.PENDING_APPROVAL, S.RUNNING),
        (S.PENDING_APPROVAL, S.DONE),
        (S.RUNNING, S.PENDING_APPROVAL),
        (S.RUNNING, S.APPROVED),
        (S.APPROVED, S.PENDING_APPROVAL),
    ],
)
def test_the_table_refuses_an_illegal_move(before: ToolState, after: ToolState) -> None:
    stored = record(before)
    with pytest.raises(IllegalTransition, match=f"{before} -> {after} is not allowed"):
        move(stored, after, result="x" if after in FINAL_TOOL_STATES else None)
    assert stored.state is before  # nothing moved


def test_the_table_covers_every_pair_of_states() -> None:
    for before, after in itertools.product([None, *ToolState], ToolState):
        assert allowed(before, after) == (after in MOVES[before])
    assert all(MOVES[final] == frozenset() for final in FINAL_TOOL_STATES)
    assert MOVES[None] == {S.APPROVED, S.PENDING_APPROVAL, S.DENIED}


def test_a_final_state_needs_its_result_and_an_open_one_takes_none() -> None:
    with pytest.raises(IllegalTransition, match="needs its result"):
        move(record(S.RUNNING), S.DONE)
    with pytest.raises(IllegalTransition, match="takes no result"):
        move(record(S.PENDING_APPROVAL), S.APPROVED, result="ok")


def test_a_new_call_is_admitted_only_approved_gated_or_denied() -> None:
    call = ToolCall(id="toolu_2", name="write_file", input={"path": "a"})
    with pytest.raises(IllegalTransition, match="new -> running"):
        admit(call, read_only=False, state=S.RUNNING, turn_seq=1, index=0)
    with pytest.raises(IllegalTransition, match="needs its result"):
        admit(call, read_only=False, state=S.DENIED, turn_seq=1, index=0)
    denied = admit(call, read_only=False, state=S.DENIED, turn_seq=1, index=0, result="no")
    assert denied.records[0].state is S.DENIED and denied.results[0].is_error


@pytest.mark.parametrize("name", ["propose_plan", "ask_user", "finish"])
def test_a_waiting_control_call_never_borrows_a_tool_state(name: str) -> None:
    control = record(S.APPROVED, name=name)
    with pytest.raises(IllegalTransition, match="a control call never takes running"):
        move(control, S.RUNNING)
    with pytest.raises(IllegalTransition, match="never takes pending_approval"):
        admit(
            ToolCall(id="toolu_3", name=name, input={}),
            read_only=True,
            state=S.PENDING_APPROVAL,
            turn_seq=1,
            index=0,
        )
    waiting = opened(control, "req42")
    assert (waiting.state, waiting.request_id) == (S.APPROVED, "req42")
    assert move(waiting, S.DONE, result="answered").records[0].state is S.DONE


@pytest.mark.parametrize(
    ("name", "stored"), [("propose_plan", "pending_approval"), ("ask_user", "running")]
)
def test_a_control_record_stored_before_0006_reads_as_approved(name: str, stored: str) -> None:
    loaded = ToolCallRecord.model_validate(
        {
            "tool_use_id": "toolu_9",
            "name": name,
            "input": {},
            "read_only": True,
            "state": legacy.tool_state(name, stored),
            "turn_seq": 2,
            "index": 0,
        }
    )
    assert loaded.state is S.APPROVED and loaded.request_id is None
