"""Pending requests as a tagged union: what a waiting conversation waits for.

One model per kind, each with a ``kind`` literal, joined by a discriminator and
serialised with :data:`request_adapter`. A request is open until decided once
(compare-and-set), cancelled by a stop, superseded by a newer plan, or expired.
The request carries the wait: :attr:`wait` is the ``waiting(kind)`` status the
conversation takes while it is open, and the control call that opened it
(``propose_plan``, ``ask_user``) keeps its ``approved`` record, pointing at it.

Kinds (one module each in :mod:`core.requests`, which opens and decides them)::

    PlanApproval    a plan version to approve          -> plan_approval.py
    PlanRevision    "what should change in plan vN?"   -> plan_revision.py
    Question        an ``ask_user`` question            -> question.py
    ToolApproval    gated calls of one model turn       -> tool_approval.py
    ContinueRequest the turn cap: go on?                -> go_on.py
    RetryRequest    the model API failed: try again?    -> go_on.py
    Escalation      stuck: the people are asked for help -> escalation.py

Rows stored before these types (a ``decision`` text, a plan question stored as a
``question``) are read at the store's load edge (:mod:`conversations.store.legacy`).
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated, ClassVar, Literal, assert_never

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from core.vocabulary.lifecycle import WaitKind
from core.vocabulary.people import Person
from core.vocabulary.verdicts import Verdict


class RequestKind(StrEnum):
    """What a pending request asks a person for."""

    PLAN_APPROVAL = "plan_approval"
    PLAN_REVISION = "plan_revision"
    TOOL_APPROVAL = "tool_approval"
    QUESTION = "question"
    CONTINUE = "continue"
    RETRY = "retry"
    ESCALATION = "escalation"
    WAIT = "wait"


class RequestState(StrEnum):
    """A pending request is open until decided once, cancelled, superseded or expired."""

    OPEN = "open"
    DECIDED = "decided"
    CANCELLED = "cancelled"
    SUPERSEDED = "superseded"
    EXPIRED = "expired"


class _Request(BaseModel):
    """Fields every request has: its id, state, prompt, times and, once decided, the verdict.

    ``expires_at`` and ``remind_at`` are timezone-aware UTC (the sweeper reminds
    at ``remind_at`` and expires at ``expires_at``); ``verdict`` and
    ``decided_by`` are set by the decision that closed it.
    """

    model_config = ConfigDict(frozen=True)

    wait: ClassVar[WaitKind]
    """The ``waiting(kind)`` status of the conversation while the request is open."""

    id: str
    state: RequestState = RequestState.OPEN
    prompt: str = ""
    expires_at: datetime | None = None
    remind_at: datetime | None = None
    verdict: Verdict | None = None
    decided_by: Person | None = None


class PlanApproval(_Request):
    """Plan version ``plan_version`` waits for approval; ``tool_use_id`` is its ``propose_plan``."""

    wait = WaitKind.PLAN_APPROVAL
    kind: Literal[RequestKind.PLAN_APPROVAL] = RequestKind.PLAN_APPROVAL
    tool_use_id: str
    plan_version: int


class PlanRevision(_Request):
    """After plan ``plan_version`` was rejected: what should change? (answered in words)."""

    wait = WaitKind.QUESTION
    kind: Literal[RequestKind.PLAN_REVISION] = RequestKind.PLAN_REVISION
    tool_use_id: str
    plan_version: int


class Question(_Request):
    """An ``ask_user`` question (``tool_use_id``), answered in words by anyone in the thread."""

    wait = WaitKind.QUESTION
    kind: Literal[RequestKind.QUESTION] = RequestKind.QUESTION
    tool_use_id: str


class ToolApproval(_Request):
    """The gated calls of one model turn, in call order (call N is ``tool_use_ids[N - 1]``)."""

    wait = WaitKind.TOOL_APPROVAL
    kind: Literal[RequestKind.TOOL_APPROVAL] = RequestKind.TOOL_APPROVAL
    tool_use_ids: tuple[str, ...] = Field(min_length=1)


class ContinueRequest(_Request):
    """The run used its model turns, or a budget: go on (approve) or stop here (reject)?

    ``budget``: the budget that was reached (``conversation``, or ``channel_day``: the
    channel's for the UTC day), None for the turn cap. Approving a budget request
    raises that budget by one more of its size (:mod:`core.pricing`).
    """

    wait = WaitKind.CONTINUE
    kind: Literal[RequestKind.CONTINUE] = RequestKind.CONTINUE
    budget: Literal["conversation", "channel_day"] | None = None


class RetryRequest(_Request):
    """The model API failed in a way a retry may mend: try again (approve) or stop (reject)?"""

    wait = WaitKind.RETRY
    kind: Literal[RequestKind.RETRY] = RequestKind.RETRY


class Escalation(_Request):
    """The run is stuck: its last ``failures`` commands failed in a row (the settings'
    ``failure_limit`` reached), so the people in the thread are asked for help.

    Answered in words, like a :class:`Question`, by anyone who may answer one; the
    answer becomes the model's next instruction and resets the failure streak
    (:mod:`core.requests.escalation`). No control call: the run asked, not the model.
    """

    wait = WaitKind.ESCALATION
    kind: Literal[RequestKind.ESCALATION] = RequestKind.ESCALATION
    failures: int = 0


class WaitRequest(_Request):
    """A workflow's ``wait`` state for a duration or until a time: a durable timer. Its
    ``expires_at`` is when it fires; the sweeper fires it once (compare-and-set, like any
    expiry), and the workflow takes the state's ``timeout`` transition
    (docs/architecture.md, "Workflows"). No person decides it; a stop cancels it."""

    wait = WaitKind.TIMER
    kind: Literal[RequestKind.WAIT] = RequestKind.WAIT


PendingRequest = Annotated[
    PlanApproval
    | PlanRevision
    | Question
    | ToolApproval
    | ContinueRequest
    | RetryRequest
    | Escalation
    | WaitRequest,
    Field(discriminator="kind"),
]
"""Any pending request; ``kind`` tells which."""

request_adapter: TypeAdapter[PendingRequest] = TypeAdapter(PendingRequest)
"""Validates and dumps :data:`PendingRequest` (the one serialiser of requests)."""


def control_call(request: PendingRequest) -> str | None:
    """The control call whose result the request's answer becomes, if it has one."""
    match request:
        case PlanApproval() | PlanRevision() | Question():
            return request.tool_use_id
        case ToolApproval() | ContinueRequest() | RetryRequest() | Escalation() | WaitRequest():
            return None
        case _:
            assert_never(request)
