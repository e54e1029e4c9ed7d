"""Run events: what the engine tells the people, as platform-neutral facts.

The hub renders each into chat actions (``conversations.render``). Milestones
(plan, question, approval request, answer, failure, stop) are always their own
reply; progress notes are batched or shown in one status reply (DESIGN.md,
"Progress notes").
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Frozen(BaseModel):
    """Run events and their parts are immutable values."""

    model_config = ConfigDict(frozen=True)


class RunStats(_Frozen):
    """Totals of a run for the answer's footer: counts, seconds and tokens."""

    tool_calls: int = 0
    seconds: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0


class ProgressNote(_Frozen):
    """A progress note: a batch of tool calls, model text, or ``report_progress``."""

    kind: Literal["progress"] = "progress"
    text: str
    step: str | None = None
    """Where the model says it is, e.g. ``"step 2 of 3"``."""


class PlanProposed(_Frozen):
    """A plan version waits for approval; reactions on its message decide it."""

    kind: Literal["plan_proposed"] = "plan_proposed"
    request_id: str
    version: int
    steps: tuple[str, ...]
    tools: tuple[str, ...] = ()


class QuestionAsked(_Frozen):
    """A clarification question; any person in the thread may answer."""

    kind: Literal["question"] = "question"
    request_id: str
    question: str
    options: tuple[str, ...] = ()


class GatedCall(_Frozen):
    """One call of a tool approval request: its number (from 1), tool and summary."""

    number: int
    tool: str
    summary: str
    reason: str


class ToolApprovalRequested(_Frozen):
    """The gated calls of one model turn wait for a person; one message, a button each."""

    kind: Literal["tool_approval"] = "tool_approval"
    request_id: str
    calls: tuple[GatedCall, ...]


class Reminder(_Frozen):
    """A pending request is half-way to expiry."""

    kind: Literal["reminder"] = "reminder"
    request_id: str
    prompt: str


class Expired(_Frozen):
    """A pending request expired; the conversation ended."""

    kind: Literal["expired"] = "expired"
    request_id: str


class Answered(_Frozen):
    """The final answer of a run, with its totals."""

    kind: Literal["answered"] = "answered"
    text: str
    stats: RunStats


class RunFailed(_Frozen):
    """The run could not go on; ``error`` is safe to show to people.

    With ``request_id`` the run waits (``waiting(retry)``): a decision on that
    request, or a reply from the requester or an approver, goes on from where it
    stopped. Without it the run ended ``failed``.
    """

    kind: Literal["failed"] = "failed"
    error: str
    request_id: str | None = None


class ContinueAsked(_Frozen):
    """The run reached its turn cap: go on (approve) or stop here (reject)?"""

    kind: Literal["continue"] = "continue"
    request_id: str
    turns: int


class Stopped(_Frozen):
    """A person stopped the run; nothing is posted after this."""

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
