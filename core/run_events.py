"""Run events: what the engine tells the people, as platform-neutral facts.

The hub renders each into chat actions (``conversations.render``). Milestones
(plan, question, approval request, answer, failure, stop) are always their own
reply; progress notes are batched or shown in one status reply (DESIGN.md,
"Progress notes").
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field


class RunStats(BaseModel):
    """Totals of a run for the answer's footer: counts, seconds and tokens."""

    model_config = ConfigDict(frozen=True)

    tool_calls: int = 0
    seconds: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0


class ProgressNote(BaseModel):
    """A progress note: a batch of tool calls, model text, or ``report_progress``."""

    model_config = ConfigDict(frozen=True)
    kind: Literal["progress"] = "progress"
    text: str
    step: str | None = None
    """Where the model says it is, e.g. ``"step 2 of 3"``."""


class PlanProposed(BaseModel):
    """A plan version waits for approval; reactions on its message decide it."""

    model_config = ConfigDict(frozen=True)
    kind: Literal["plan_proposed"] = "plan_proposed"
    request_id: str
    version: int
    steps: tuple[str, ...]
    tools: tuple[str, ...] = ()


class QuestionAsked(BaseModel):
    """A clarification question; any person in the thread may answer."""

    model_config = ConfigDict(frozen=True)
    kind: Literal["question"] = "question"
    request_id: str
    question: str
    options: tuple[str, ...] = ()


class GatedCall(BaseModel):
    """One call of a tool approval request: its number (from 1), tool and summary."""

    model_config = ConfigDict(frozen=True)
    number: int
    tool: str
    summary: str
    reason: str


class ToolApprovalRequested(BaseModel):
    """The gated calls of one model turn wait for a person; one message, a button each."""

    model_config = ConfigDict(frozen=True)
    kind: Literal["tool_approval"] = "tool_approval"
    request_id: str
    calls: tuple[GatedCall, ...]


class Reminder(BaseModel):
    """A pending request is half-way to expiry."""

    model_config = ConfigDict(frozen=True)
    kind: Literal["reminder"] = "reminder"
    request_id: str
    prompt: str


class Expired(BaseModel):
    """A pending request expired; the conversation ended."""

    model_config = ConfigDict(frozen=True)
    kind: Literal["expired"] = "expired"
    request_id: str


class Answered(BaseModel):
    """The final answer of a run, with its totals."""

    model_config = ConfigDict(frozen=True)
    kind: Literal["answered"] = "answered"
    text: str
    stats: RunStats


class RunFailed(BaseModel):
    """The run could not go on; ``error`` is safe to show to people.

    With ``request_id`` the run waits (``waiting(retry)``): a decision on that
    request, or a reply from the requester or an approver, goes on from where it
    stopped. Without it the run ended ``failed``.
    """

    model_config = ConfigDict(frozen=True)
    kind: Literal["failed"] = "failed"
    error: str
    request_id: str | None = None


class ContinueAsked(BaseModel):
    """The run reached its turn cap: go on (approve) or stop here (reject)?"""

    model_config = ConfigDict(frozen=True)
    kind: Literal["continue"] = "continue"
    request_id: str
    turns: int


class Stopped(BaseModel):
    """A person stopped the run; nothing is posted after this."""

    model_config = ConfigDict(frozen=True)
    kind: Literal["stopped"] = "stopped"
    by_name: str
    cancelled_calls: int = 0
    interrupted_calls: int = 0


RunEvent = Annotated[
    ProgressNote
    | PlanProposed
    | QuestionAsked
    | ToolApprovalRequested
    | Reminder
    | Expired
    | Answered
    | RunFailed
    | ContinueAsked
    | Stopped,
    Field(discriminator="kind"),
]
