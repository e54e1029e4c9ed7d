"""The journal, tool call records, the snapshot and the ``Journal`` protocol.

Everything a run needs to continue lives in a :class:`ConversationSnapshot`, so
that a run which waited for a person and a run which crashed resume on the same
path (docs/architecture.md, "Durability and exactly-once"):

- :data:`Entry`: the append-only journal, ordered per conversation by ``seq``:
  people's messages, model turns, tool results, decisions and stops.
- :class:`ToolCallRecord`: one durable record per ``tool_use_id`` with its state;
  the state moves only through :mod:`core.tool_state`.
- :data:`core.requests.shapes.PendingRequest`: what a waiting conversation waits
  for (a plan version, a question, gated tool calls), decided once by
  compare-and-set.

A run never writes piecemeal: it hands the store one :class:`Change` at a time,
which the store applies in a single transaction together with the run events
that the change emits (the outbox).
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, model_validator

from core import legacy
from core.lifecycle import Status
from core.people import Person
from core.requests.shapes import PendingRequest, RequestState
from core.requests.verdicts import Verdict
from core.run_events import RunEvent


class ToolCall(BaseModel):
    """A ``tool_use`` block the model asked for."""

    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    input: dict[str, Any]


# --- journal entries -------------------------------------------------------------


class ModelUsage(BaseModel):
    """One model call as the store keeps it: the model that answered, its tokens as the
    API reported them, how long it took and what it cost.

    ``latency_ms``: milliseconds from sending the request to the end of the response;
    ``price_id``: the dated price entry the cost was computed with (None: the model
    had no price, so ``cost_micro_usd`` is None too); ``cost_micro_usd``: integer
    micro-dollars, rounded half-up per call (:func:`core.pricing.call_cost`);
    ``run_id``: the engine entry point that made the call; ``position``: the workflow
    position it was made in. Calls journaled before these were kept have them empty.
    """

    model_config = ConfigDict(frozen=True)

    model: str
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    latency_ms: int | None = None
    price_id: int | None = None
    cost_micro_usd: int | None = None
    run_id: str | None = None
    position: str | None = None

    @property
    def total_tokens(self) -> int:
        """Every token of the call: input, output, cache reads and cache writes."""
        return (
            self.input_tokens
            + self.output_tokens
            + self.cache_read_tokens
            + self.cache_write_tokens
        )


class UserText(BaseModel):
    """A person's words: the request, an answer, plan feedback, or a note mid-run.

    ``files``: the files shared with the words, as the model read them: the exact
    Messages API content blocks sent (an image's base64 data included, text inlined,
    notes for what was saved or left out; :class:`core.files.FileReader`), so a
    resume sends the same bytes without fetching anything again.
    """

    model_config = ConfigDict(frozen=True)
    kind: Literal["user_text"] = "user_text"
    author: Person
    text: str
    role: Literal["request", "answer", "feedback", "note"] = "request"
    files: tuple[dict[str, Any], ...] = ()


class AssistantTurn(BaseModel):
    """One model response: its text and its tool calls, in order."""

    model_config = ConfigDict(frozen=True)
    kind: Literal["assistant_turn"] = "assistant_turn"
    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    stop_reason: str = "end_turn"
    model: str = ""
    content: tuple[dict[str, Any], ...] = ()
    """The exact content blocks the API returned (thinking included), sent back as is."""
    usage: ModelUsage | None = None
    """Tokens of the call that produced this turn (also stored per call for queries)."""


class ToolResultEntry(BaseModel):
    """The one result of one ``tool_use``; ``content`` is what the model reads."""

    model_config = ConfigDict(frozen=True)
    kind: Literal["tool_result"] = "tool_result"
    tool_use_id: str
    content: str
    is_error: bool = False


class DecisionEntry(BaseModel):
    """A person decided a pending request (for the record; the model sees the result).

    ``verdict``: :class:`~core.requests.verdicts.Approved` or
    :class:`~core.requests.verdicts.Rejected` for a plan or a go-on request;
    :class:`~core.requests.verdicts.CallsDecided` for a tool approval, keyed by the
    ``tool_use_id`` of each call it decided. ``call``: for a tool approval decided
    call by call, the call's number (from 1); None when the decision was about
    every call still undecided (or no calls). Entries stored with a ``decision``
    text are read by :func:`core.legacy.decision_entry`.
    """

    model_config = ConfigDict(frozen=True)
    kind: Literal["decision"] = "decision"
    request_id: str
    verdict: Verdict
    by: Person
    call: int | None = None

    @model_validator(mode="before")
    @classmethod
    def _read_legacy(cls, data: Any) -> Any:
        return legacy.decision_entry(data)


class StepEntered(BaseModel):
    """The conversation entered a workflow position: its instructions, as the model reads
    them from then on (sent as a message, so the system prompt and the tools, the
    cached prefix of every request, stay the same across positions)."""

    model_config = ConfigDict(frozen=True)
    kind: Literal["step_entered"] = "step_entered"
    position: str
    instructions: str


class Compacted(BaseModel):
    """The oldest part of the conversation, up to entry ``through_seq``, summarized by the
    model when the context grew past its share of the window (:mod:`core.run.compaction`).

    From then on the model reads ``summary`` (and the step it was in, ``step``) in
    place of those entries; they stay in the journal. ``usage``: the summary's model
    call, recorded and priced like any other.
    """

    model_config = ConfigDict(frozen=True)
    kind: Literal["compacted"] = "compacted"
    summary: str
    through_seq: int
    step: StepEntered | None = None
    usage: ModelUsage | None = None


class StopEntry(BaseModel):
    """A person stopped the run."""

    model_config = ConfigDict(frozen=True)
    kind: Literal["stop"] = "stop"
    by: Person


Entry = Annotated[
    UserText
    | AssistantTurn
    | ToolResultEntry
    | DecisionEntry
    | StepEntered
    | Compacted
    | StopEntry,
    Field(discriminator="kind"),
]


class JournalRecord(BaseModel):
    """An entry as stored: its per-conversation sequence number and time (UTC)."""

    model_config = ConfigDict(frozen=True)

    seq: int
    at: datetime
    entry: Entry


# --- tool call records -------------------------------------------------------------


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

    @model_validator(mode="before")
    @classmethod
    def _read_legacy(cls, data: Any) -> Any:
        return legacy.tool_record(data)


# --- snapshot and change ----------------------------------------------------------


class ConversationSnapshot(BaseModel):
    """All a run reads of one conversation."""

    model_config = ConfigDict(frozen=True)

    id: str
    requester: Person
    status: Status
    position: str
    plan_version: int
    workspace: str
    """Directory the conversation's file and command tools are confined to."""
    journal: tuple[JournalRecord, ...]
    tool_calls: dict[str, ToolCallRecord]
    requests: tuple[PendingRequest, ...]
    """Every request of the conversation, oldest first."""

    @property
    def open_requests(self) -> tuple[PendingRequest, ...]:
        """The requests still waiting for a person."""
        return tuple(r for r in self.requests if r.state is RequestState.OPEN)

    @property
    def last_seq(self) -> int:
        """``seq`` of the newest journal entry, 0 for an empty journal."""
        return self.journal[-1].seq if self.journal else 0


class RequestResolution(BaseModel):
    """Close a pending request with a state and, for a decision, the verdict and who gave it."""

    model_config = ConfigDict(frozen=True)

    request_id: str
    state: RequestState
    verdict: Verdict | None = None
    by: Person | None = None
    only_if_open: bool = True
    """Compare-and-set: when the request is no longer open, the store raises
    :class:`core.errors.RequestConflict` and applies nothing of the change."""


class Change(BaseModel):
    """One atomic step of a run. Every field is optional; empty lists change nothing.

    The store applies it in one transaction, in this order: journal entries
    (numbered after the last ``seq``), tool records (upserted by ``tool_use_id``),
    request resolutions, the new request, status, position, plan version, and
    the run events (written to the outbox).
    """

    model_config = ConfigDict(frozen=True)

    entries: tuple[Entry, ...] = ()
    tool_calls: tuple[ToolCallRecord, ...] = ()
    resolve: tuple[RequestResolution, ...] = ()
    open_request: PendingRequest | None = None
    status: Status | None = None
    position: str | None = None
    plan_version: int | None = None
    events: tuple[RunEvent, ...] = ()
    handled: tuple[str, ...] = ()
    """Delivery keys of inbound messages whose effect this change records; the
    store marks them handled in the same transaction (a crash before it leaves
    them to be handled again at start)."""
    guard_pending: tuple[str, ...] = ()
    """Compare-and-set on tool calls: when any of these records is no longer
    ``pending_approval``, the store raises :class:`core.errors.RequestConflict`."""


class Committed(BaseModel):
    """What a commit gave a change: the ``seq`` of each new entry, in order, and the time
    (UTC) the store stamped on them."""

    model_config = ConfigDict(frozen=True)

    seqs: tuple[int, ...]
    at: datetime


class Journal(Protocol):
    """Durable state of conversations, as the engine needs it.

    Implemented by ``conversations.store``; raises
    :class:`core.errors.ConversationNotFound` for an unknown id.
    """

    async def load(self, conversation_id: str) -> ConversationSnapshot:
        """Everything about one conversation, read in one transaction."""
        ...

    async def commit(
        self, conversation_id: str, change: Change, *, after_seq: int | None = None
    ) -> Committed:
        """Apply ``change`` atomically; return the ``seq`` given to each new entry and their time.

        ``after_seq``: the ``seq`` of the newest entry the caller knows of; the new
        entries are numbered from the next one, and :class:`core.errors.StaleSnapshot`
        is raised (nothing written) when those numbers are taken. None: the store
        reads the newest ``seq`` itself.
        """
        ...
