"""Model turns on the timeline: the text, the calls asked for (plans with their version),
the usage with its cache share and cost (docs/architecture.md, "The run inspector")."""

from __future__ import annotations

import json
from collections.abc import Mapping, Set
from typing import Any

from conversations.inspect.items import CallAsked, ModelTurn, Spent
from core.tools import control
from core.vocabulary.entries import AssistantTurn, JournalRecord, ModelUsage
from core.vocabulary.requests import PendingRequest, PlanApproval
from core.vocabulary.tool_records import ToolCallRecord


def spent(usage: ModelUsage | None) -> Spent | None:
    """A model call's usage as the timeline shows it (None for None)."""
    if usage is None:
        return None
    return Spent(
        model=usage.model,
        role=usage.role,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cache_read_tokens=usage.cache_read_tokens,
        cache_write_tokens=usage.cache_write_tokens,
        latency_ms=usage.latency_ms,
        cost_micro_usd=usage.cost_micro_usd,
    )


def arguments(value: Mapping[str, Any]) -> str:
    """A call's input as indented JSON (non-ASCII kept), keys in the model's order."""
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def plan_versions(requests: tuple[PendingRequest, ...]) -> dict[str, int]:
    """The plan version each ``propose_plan`` call became, by ``tool_use_id``."""
    return {r.tool_use_id: r.plan_version for r in requests if isinstance(r, PlanApproval)}


def model_turn(
    record: JournalRecord,
    records: Mapping[str, ToolCallRecord],
    versions: Mapping[str, int],
    answered: Set[str],
    waits: Mapping[str, str] | None = None,
) -> ModelTurn:
    """The item of the turn ``record`` (its entry an :class:`AssistantTurn`): each call
    with its record's state (``records``, by ``tool_use_id``), whether its result is in
    the journal (``answered``), what it waits for when a person's answer is to be its
    result (``waits``, by ``tool_use_id``) and, for a plan, its steps and version
    (``versions``)."""
    waits = waits or {}
    turn = record.entry
    assert isinstance(turn, AssistantTurn)
    calls = []
    for call in turn.tool_calls:
        found = records.get(call.id)
        steps = control.plan_steps(call.name, call.input) or []
        calls.append(
            CallAsked(
                id=call.id,
                name=call.name,
                arguments=arguments(call.input),
                state=found.state if found is not None else None,
                answered=call.id in answered,
                steps=tuple(steps),
                version=versions.get(call.id),
                waiting=None if call.id in answered else waits.get(call.id),
            )
        )
    return ModelTurn(
        seq=record.seq,
        at=record.at,
        text=turn.text,
        calls=tuple(calls),
        spent=spent(turn.usage),
        stop_reason=turn.stop_reason,
        model=turn.usage.model if turn.usage is not None else turn.model,
        workflow=turn.workflow,
    )
