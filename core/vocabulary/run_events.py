"""Run events: what the engine tells the people, as platform-neutral facts.

The hub renders each into chat actions (``conversations.render``). Milestones
(plan, question, approval request, answer, failure, stop) are always their own
reply; progress notes are batched or shown in one status reply (docs/architecture.md,
"Progress notes"). A closed request (:class:`RequestClosed`) is no new reply: it
edits the request's own message.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from core.vocabulary.approvals import ApprovalScope, CallPattern
from core.vocabulary.entries import FailedCall
from core.vocabulary.people import Person


class _Frozen(BaseModel):
    """Run events and their parts are immutable values."""

    model_config = ConfigDict(frozen=True)


class RoleStats(_Frozen):
    """One model role's share of a request: the models that answered it (each once, in
    the order they first did), its model calls and their cost (micro-dollars of the
    priced calls; None when none had a price)."""

    role: str
    models: tuple[str, ...] = ()
    calls: int = 0
    cost_micro_usd: int | None = None


class RunStats(_Frozen):
    """Totals of a request for the answer's footer and the status line: counts, seconds,
    tokens and cost.

    ``input_tokens`` counts every input token, those read from or written to the
    cache included; ``cache_read_tokens`` is the share of them served from the
    cache. ``cost_micro_usd``: micro-dollars of the priced calls; None when no call
    had a price.
    """

    tool_calls: int = 0
    seconds: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cost_micro_usd: int | None = None
    branch: str | None = None
    """The branch of the conversation's clone, when its workspace is one."""
    changed_files: tuple[str, ...] = ()
    """Paths changed on that branch (committed or not), sorted."""
    roles: tuple[RoleStats, ...] = ()
    """Each model role's calls and cost, in the order the roles were first asked (calls
    recorded without a role are left out)."""


class ProgressNote(_Frozen):
    """A progress note: a batch of tool calls, model text, or ``report_progress``."""

    kind: Literal["progress"] = "progress"
    text: str
    step: str | None = None
    """Where the model says it is, e.g. ``"step 2 of 3"``."""
    totals: RunStats | None = None
    """The request's running totals when the note was made (the ``status`` mode's line)."""
    mark: str | None = None
    """The note's own mark in place of ``⏳`` (``🎓``: the expert's delegation; ``↩️``: a
    refusal or a nudge, :mod:`core.run.nudges`)."""


class PlanProposed(_Frozen):
    """A plan version waits for approval; reactions on its message decide it. ``fixed``:
    the workflow's own plan (a human step that approves the steps it declares), approved
    or rejected but not changed by a reply."""

    kind: Literal["plan_proposed"] = "plan_proposed"
    request_id: str
    version: int
    steps: tuple[str, ...]
    tools: tuple[str, ...] = ()
    fixed: bool = False
    mention: Person | None = None
    """The person the plan waits for, mentioned in its message (the requester, unless
    the conversation's ``mention_requester`` is off: :mod:`core.run.addressed`)."""


class QuestionAsked(_Frozen):
    """A clarification question; any person in the thread may answer."""

    kind: Literal["question"] = "question"
    request_id: str
    question: str
    options: tuple[str, ...] = ()
    mention: Person | None = None
    """The person the question waits for, mentioned in its message (the requester,
    unless ``mention_requester`` is off: :mod:`core.run.addressed`)."""


class GatedCall(_Frozen):
    """One call of a tool approval request: its number (from 1), tool and summary, why
    the policy asks, and the pattern an approval wider than once would remember (None:
    only once is offered)."""

    number: int
    tool: str
    summary: str
    reason: str
    pattern: CallPattern | None = None


class ToolApprovalRequested(_Frozen):
    """The gated calls of one model turn wait for a person; one message, a button each.
    ``scopes``: the approval scopes offered, when more than once (empty: once only)."""

    kind: Literal["tool_approval"] = "tool_approval"
    request_id: str
    calls: tuple[GatedCall, ...]
    scopes: tuple[ApprovalScope, ...] = ()


class Reminder(_Frozen):
    """A pending request is half-way to expiry."""

    kind: Literal["reminder"] = "reminder"
    request_id: str
    prompt: str


class Expired(_Frozen):
    """A pending request expired; the conversation ended."""

    kind: Literal["expired"] = "expired"
    request_id: str


class RunAnswered(_Frozen):
    """The final answer of a run, with its totals; ``workflow``: the name of the
    workflow it ran (the footer names it; empty: not named); ``mark``: the emoji the
    answer opens with (``❌`` for a workflow that ended ``failed``, say)."""

    kind: Literal["answered"] = "answered"
    text: str
    stats: RunStats
    workflow: str = ""
    mark: str = "✅"
    mention: Person | None = None
    """The person the answer is for, mentioned in it (the requester, unless
    ``mention_requester`` is off: :mod:`core.run.addressed`)."""


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
    """The run reached its turn cap in workflow step ``step`` (a position's name; empty:
    not known): ``turns`` model turns there, at or past ``cap`` (None: the same as
    ``turns``). Go on (approve) or stop here (reject)?"""

    kind: Literal["continue"] = "continue"
    request_id: str
    turns: int
    step: str = ""
    cap: int | None = None


class EscalationAsked(_Frozen):
    """The run is stuck: ``failures``, its last calls, failed in a row, or ``reason`` says
    why (words after "I'm stuck: "); the people in the thread are asked for help
    (``waiting(escalation)``), and a reply answers it."""

    kind: Literal["escalation"] = "escalation"
    request_id: str
    failures: tuple[FailedCall, ...]
    reason: str = ""


class BudgetReached(_Frozen):
    """A budget is used up (``waiting(continue)``): raise it by one more budget and go on
    (approve), or stop here (reject)? Tokens count every kind; money is micro-dollars.

    ``scope``: ``conversation``, or ``channel_day`` (the channel's, this UTC day);
    ``limit_*``: the budget in force (raises included); ``budget_*``: one budget,
    what a raise adds. A ``None`` limit is not set.
    """

    kind: Literal["budget"] = "budget"
    request_id: str
    scope: Literal["conversation", "channel_day"]
    spent_tokens: int
    spent_micro_usd: int
    limit_tokens: int | None = None
    limit_micro_usd: int | None = None
    budget_tokens: int | None = None
    budget_micro_usd: int | None = None


class Stopped(_Frozen):
    """A person stopped the run; nothing is posted after this."""

    kind: Literal["stopped"] = "stopped"
    by_name: str
    cancelled_calls: int = 0
    interrupted_calls: int = 0


class WorkflowRefused(_Frozen):
    """A request asked for workflow ``asked`` (``workflow=NAME``), which this channel does
    not allow (or no such workflow exists); ``allowed`` lists the ones it may ask for.
    ``missing``: the setting the workflow needs and the channel does not set (it is
    allowed, and cannot run here: ``check_command``, say). Nothing started: the request
    is kept as a note."""

    kind: Literal["workflow_refused"] = "workflow_refused"
    asked: str
    allowed: tuple[str, ...]
    missing: str = ""


class Refused(_Frozen):
    """Someone who may not ``action`` (decide, stop, restart) tried; the thread is told,
    nothing changed.

    The engine emits it for a bystander's reply to a retry or go-on request (the
    hub answers reactions and buttons with the same words itself), with
    ``restart`` for a bystander's message after a stop (:mod:`core.run.restart`), and with
    ``raise_in_words`` for a reply to a budget request: money is raised only with a
    reaction or the button, so a "no" in words never spends it.
    """

    kind: Literal["refused"] = "refused"
    action: Literal["decide", "stop", "restart", "raise_in_words"]
    by_name: str


class CallOutcome(_Frozen):
    """How one call of a tool approval ended: its number (from 1), verdict and who gave it.

    ``undecided``: nobody decided the call before the request was stopped or expired
    (``by_name`` is None then). ``scope`` and ``pattern``: an allowed call's approval
    when it was wider than once (for the run, or always in the channel).
    """

    number: int
    outcome: Literal["allowed", "denied", "undecided"]
    by_name: str | None = None
    scope: ApprovalScope | None = None
    pattern: CallPattern | None = None


class RequestClosed(_Frozen):
    """A request whose message asks for a decision was closed: that message is edited.

    Emitted in the change that resolves the request, so the edit is written with
    the resolution (``conversations.render``). Requests with such a message are
    ``request``: a plan, a tool approval, a go-on (turn cap) or a retry request, or a
    question with options (its buttons go); a question without options invites a reply
    only, and its message is left as it is.

    ``outcome``:

    - ``approved`` / ``rejected``: ``by_name`` decided (for go-on and retry: go on
      or stop here);
    - ``revised``: ``by_name`` replied to the plan with a change to make;
    - ``replaced``: plan version ``replaced_by`` took the open plan's place;
    - ``decided``: every call of a tool approval was decided, as ``calls`` say;
    - ``answered``: ``by_name`` (platform id ``by_id``) answered a question with
      ``answer``: option ``option`` (from 1) picked, or words (``option`` None);
    - ``stopped``: ``by_name`` stopped the run; ``expired``: it waited too long.

    ``plan_version`` is the plan's version; ``calls`` (tool approvals only) how
    each call stands, also when the request was stopped or expired.
    """

    kind: Literal["request_closed"] = "request_closed"
    request_id: str
    request: Literal["plan", "tool_approval", "continue", "budget", "retry", "question"]
    outcome: Literal[
        "approved", "rejected", "revised", "replaced", "decided", "answered", "stopped", "expired"
    ]
    by_name: str | None = None
    by_id: str | None = None
    plan_version: int | None = None
    replaced_by: int | None = None
    calls: tuple[CallOutcome, ...] = ()
    answer: str | None = None
    option: int | None = None


StepStatus = Literal["pending", "in_progress", "complete", "error"]
"""Where one step of an approved plan stands (Slack's ``task_card`` statuses,
https://docs.slack.dev/reference/block-kit/blocks/task-card-block)."""


class PlanProgress(_Frozen):
    """The steps of the approved plan ``request_id`` (version ``version``) stand as
    ``statuses`` now (one per step, in order): emitted in a change that moves one
    (docs/architecture.md, "Plan cards"). ``approved_by``: the name of who approved it."""

    kind: Literal["plan_progress"] = "plan_progress"
    request_id: str
    version: int
    steps: tuple[str, ...]
    statuses: tuple[StepStatus, ...]
    approved_by: str | None = None


RunEvent = Annotated[
    ProgressNote
    | PlanProposed
    | QuestionAsked
    | ToolApprovalRequested
    | Reminder
    | Expired
    | RunAnswered
    | RunFailed
    | ContinueAsked
    | EscalationAsked
    | BudgetReached
    | Stopped
    | Refused
    | WorkflowRefused
    | RequestClosed
    | PlanProgress,
    Field(discriminator="kind"),
]
