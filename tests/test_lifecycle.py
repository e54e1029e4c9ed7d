"""A conversation's lifecycle moves only as its table allows (docs/architecture.md,
"Conversation lifecycle and workflow position").

Every status a change gives a conversation comes from ``lifecycle.move``; the table
lets a run start from rest or from its end, wait for a person and go on, and end;
anything else is a bug, refused before anything is written.
"""

from __future__ import annotations

import re

import pytest

from core.vocabulary import lifecycle
from core.vocabulary.errors import IllegalTransition
from core.vocabulary.lifecycle import MOVES, Lifecycle, Status, WaitKind, move, waiting

L = Lifecycle
QUESTION = waiting(WaitKind.QUESTION)
PLAN = waiting(WaitKind.PLAN_APPROVAL)


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (lifecycle.IDLE, lifecycle.RUNNING),
        (lifecycle.RUNNING, PLAN),
        (PLAN, QUESTION),  # a plan rejected: what should change?
        (QUESTION, lifecycle.RUNNING),
        (lifecycle.RUNNING, lifecycle.DONE),
        (lifecycle.DONE, lifecycle.RUNNING),
        (QUESTION, lifecycle.CANCELLED),
        (lifecycle.RUNNING, lifecycle.FAILED),
        (lifecycle.CANCELLED, lifecycle.RUNNING),
    ],
)
def test_the_table_lets_a_conversation_run_wait_and_end(before: Status, after: Status) -> None:
    assert move(before, after) == after


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (lifecycle.IDLE, lifecycle.DONE),
        (lifecycle.IDLE, QUESTION),
        (lifecycle.DONE, lifecycle.CANCELLED),
        (lifecycle.FAILED, QUESTION),
        (lifecycle.CANCELLED, lifecycle.DONE),
        (QUESTION, lifecycle.DONE),
        (lifecycle.RUNNING, lifecycle.IDLE),
    ],
)
def test_the_table_refuses_a_move_it_does_not_list(before: Status, after: Status) -> None:
    with pytest.raises(IllegalTransition, match=re.escape(f"{before} cannot move to {after}")):
        move(before, after)


def test_the_table_covers_every_lifecycle_and_none_goes_back_to_idle() -> None:
    assert set(MOVES) == set(Lifecycle)
    assert all(L.IDLE not in targets for targets in MOVES.values())
