"""Tool call records: one durable record per ``tool_use_id``, with its state.

The states are those of docs/architecture.md, "Durability and exactly-once"; a
record's state moves only through :mod:`core.tool_state`, checked against its table.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict


class ToolState(StrEnum):
    """States of a tool call record (docs/architecture.md, "Durability and exactly-once").

    ``cancelled``: stopped before it ran. ``interrupted``: stopped while running, the
    outcome may be partial. ``unknown``: found running after a crash.
    """

    PENDING_APPROVAL = "pending_approval"
    APPROVED = "approved"
    DENIED = "denied"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"
    INTERRUPTED = "interrupted"
    UNKNOWN = "unknown"


FINAL_TOOL_STATES = frozenset(
    {
        ToolState.DENIED,
        ToolState.DONE,
        ToolState.FAILED,
        ToolState.CANCELLED,
        ToolState.INTERRUPTED,
        ToolState.UNKNOWN,
    }
)


class CommandProcess(BaseModel):
    """The process group a running command leads, named so that it can be found again.

    ``group``: the process group id (the leader's pid); ``started``: the leader's
    start time in clock ticks since boot; ``boot_id``: the host's boot id; ``cgroup``:
    the name of the command's own cgroup (``threadbot-<hex>``), None where commands
    run in none (rows written before cgroups have none). See
    :mod:`core.tools.processes`.
    """

    model_config = ConfigDict(frozen=True)

    group: int
    started: int
    boot_id: str
    cgroup: str | None = None


class ToolCallRecord(BaseModel):
    """The durable record of one tool call, keyed by its conversation and ``tool_use_id``."""

    model_config = ConfigDict(frozen=True)

    tool_use_id: str
    name: str
    input: dict[str, Any]
    read_only: bool
    state: ToolState
    turn_seq: int
    """``seq`` of the assistant turn that asked for the call."""
    index: int
    """Position of the call within its turn, from 0."""
    process: CommandProcess | None = None
    """The command's process group while it runs (``run_command``), if it started one."""
    request_id: str | None = None
    """The request a control call opened (``propose_plan``, ``ask_user``); the request
    carries the wait, the record stays ``approved`` until the answer is its result."""
