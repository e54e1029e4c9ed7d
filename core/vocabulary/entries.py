"""Journal entries: what a conversation's append-only journal holds, in ``seq`` order.

People's messages, model turns (with the tool calls they asked for and their usage),
tool results, decisions, entered workflow positions, compaction summaries, stops, the
failed attempts of tool calls tried again, context strategies' notes, nested
scopes entered and left, escalations and the resets of the failure streak, the
expert's consultations, and the delegations to the expert (handed over, briefed,
checked, ended: those of a stuck run are defined in :mod:`core.vocabulary.escalations`),
joined in one tagged union (:data:`Entry`);
:class:`JournalRecord` is an entry as stored, with its ``seq`` and time
(docs/architecture.md, "Durability and exactly-once").
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializationInfo, model_serializer

from core.vocabulary.approvals import ApprovalScope, CallPattern, RuleApplied
from core.vocabulary.escalations import Delegated as Delegated
from core.vocabulary.escalations import DelegationBrief as DelegationBrief
from core.vocabulary.escalations import DelegationChecked as DelegationChecked
from core.vocabulary.escalations import DelegationEnded as DelegationEnded
from core.vocabulary.escalations import Escalated as Escalated
from core.vocabulary.escalations import FailedCall as FailedCall
from core.vocabulary.escalations import FailuresReset as FailuresReset
from core.vocabulary.escalations import Nudged as Nudged
from core.vocabulary.people import Person
from core.vocabulary.verdicts import Verdict


class ToolCall(BaseModel):
    """A ``tool_use`` block the model asked for."""

    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    input: dict[str, Any]


ModelRole = Literal["planner", "executor", "expert"]
"""Whose model a call is made with: the planner plans, the executor carries the approved
plan out, the expert advises. A workflow position names its role
(:class:`core.workflows.model.State`; docs/architecture.md, "Conversation lifecycle and
workflow position"); the settings name each role's model
(:meth:`core.run.settings.EngineSettings.model_of`)."""


class ModelUsage(BaseModel):
    """One model call as the store keeps it: the model that answered, its tokens as the
    API reported them, how long it took and what it cost.

    ``latency_ms``: milliseconds from sending the request to the end of the response;
    ``price_id``: the dated price entry the cost was computed with (None: the model
    had no price, so ``cost_micro_usd`` is None too); ``cost_micro_usd``: integer
    micro-dollars, rounded half-up per call (:func:`core.pricing.call_cost`);
    ``run_id``: the engine entry point that made the call; ``position``: the workflow
    position it was made in; ``role``: the role whose model was asked (:data:`ModelRole`).
    Calls journaled before these were kept have them empty.
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
    role: ModelRole | None = None

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
    """A person's words: the request, an answer, plan feedback, a note mid-run, or an
    instruction that interrupted the run (busy mode ``interrupt``).

    ``files``: the files shared with the words, as the model read them: the exact
    Messages API content blocks sent (an image's base64 data included, text inlined,
    notes for what was saved or left out; :class:`core.files.FileReader`), so a
    resume sends the same bytes without fetching anything again.
    """

    model_config = ConfigDict(frozen=True)
    kind: Literal["user_text"] = "user_text"
    author: Person
    text: str
    role: Literal["request", "answer", "feedback", "note", "instruction"] = "request"
    files: tuple[dict[str, Any], ...] = ()


WORKFLOW_CALL_ID = "toolu_workflow_"
"""How the id of a call a workflow state makes itself begins (its turn's
``AssistantTurn.workflow`` names the state): a scripted model tells the turns it made
from the workflow's by it (:mod:`core.models.scripted`)."""


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
    workflow: str = ""
    """The workflow state that made this turn itself (a fixed action, a fixed plan, a
    human step's question: no model was asked); empty: a model's turn."""

    @property
    def experts(self) -> bool:
        """Whether the expert's model made this turn, in a delegation (its usage names
        the role)."""
        return self.usage is not None and self.usage.role == "expert"


class ToolResultEntry(BaseModel):
    """The one result of one ``tool_use``; ``content`` is what the model reads."""

    model_config = ConfigDict(frozen=True)
    kind: Literal["tool_result"] = "tool_result"
    tool_use_id: str
    content: str
    is_error: bool = False


class DecisionEntry(BaseModel):
    """A person decided a pending request (for the record; the model sees the result).

    ``verdict``: :class:`~core.vocabulary.verdicts.Approved` or
    :class:`~core.vocabulary.verdicts.Rejected` for a plan or a go-on request;
    :class:`~core.vocabulary.verdicts.CallsDecided` for a tool approval, keyed by the
    ``tool_use_id`` of each call it decided. ``call``: for a tool approval decided
    call by call, the call's number (from 1); None when the decision was about
    every call still undecided (or no calls). ``scope``: how far a tool approval's
    approval reaches (:mod:`core.vocabulary.approvals`; None: once), and ``patterns``
    the rules it remembered. Entries stored with a ``decision`` text are read at the
    store's load edge (:mod:`conversations.store.legacy`).
    """

    model_config = ConfigDict(frozen=True)
    kind: Literal["decision"] = "decision"
    request_id: str
    verdict: Verdict
    by: Person
    call: int | None = None
    scope: ApprovalScope | None = None
    patterns: tuple[CallPattern, ...] = ()


class StepEntered(BaseModel):
    """The conversation entered a workflow position: its instructions, as the model reads
    them from then on (sent as a message, so the system prompt and the tools, the
    cached prefix of every request, stay the same across positions)."""

    model_config = ConfigDict(frozen=True)
    kind: Literal["step_entered"] = "step_entered"
    position: str
    instructions: str


class WorkflowChosen(BaseModel):
    """The workflow a conversation runs, journaled when its first request starts it:
    ``name`` and ``definition``, the workflow as loaded (JSON of
    :class:`core.workflows.model.Workflow`, sub-workflows inlined). The conversation keeps
    it: editing the file later never changes a conversation already under way
    (docs/architecture.md, "Workflows"). ``check_command``: what the workflow's
    ``{check_command}`` stands for in the conversation, the setting's value then: the
    plan a person approves names it, so a setting changed later never runs another
    command than the one approved (None: journaled before it was kept; the setting's)."""

    model_config = ConfigDict(frozen=True)
    kind: Literal["workflow_chosen"] = "workflow_chosen"
    name: str
    definition: str
    check_command: str | None = None


class Compacted(BaseModel):
    """The oldest part of the conversation, up to entry ``through_seq``, summarized by the
    model when the context grew past its share of the window (:mod:`core.run.compaction`).

    From then on the model reads ``summary`` (and the step it was in, ``step``) in
    place of those entries; they stay in the journal. ``usage``: the summary's model
    call, recorded and priced like any other. ``dropped``: the ``seq`` of each
    :class:`ContextNote` after ``through_seq`` that had expired when the summary was
    made: the model's view leaves them out too (stored only when there is one, so a
    compaction without notes is stored as before).
    """

    model_config = ConfigDict(frozen=True)
    kind: Literal["compacted"] = "compacted"
    summary: str
    through_seq: int
    step: StepEntered | None = None
    usage: ModelUsage | None = None
    dropped: tuple[int, ...] = ()

    @model_serializer(mode="wrap")
    def _without_empty_dropped(
        self, handler: Callable[[Any], dict[str, Any]], info: SerializationInfo
    ) -> dict[str, Any]:
        data = handler(self)
        if not self.dropped:
            data.pop("dropped", None)
        return data


class StopEntry(BaseModel):
    """A person stopped the run."""

    model_config = ConfigDict(frozen=True)
    kind: Literal["stop"] = "stop"
    by: Person


class ToolAttempt(BaseModel):
    """A failed attempt of a tool call that its retry policy tries again
    (:mod:`core.retry`): its number (from 1), its error (redacted) and the seconds
    waited before the next attempt, journaled before that wait.

    Only the attempts that are tried again are kept: the call's last attempt is its
    one result (:class:`ToolResultEntry`), which names them all. A run that goes on
    after a crash takes the call's attempts from these entries, so it makes the
    next attempt after the same delay (:mod:`core.run.tool_step`). Not a message:
    the model's history, the open calls and the totals pass over it.
    """

    model_config = ConfigDict(frozen=True)
    kind: Literal["tool_attempt"] = "tool_attempt"
    tool_use_id: str
    attempt: int
    error: str
    delay_seconds: float


class ContextNote(BaseModel):
    """What a context strategy tells the model, journaled when it changed
    (:mod:`core.contexts`, docs/architecture.md, "Context strategies and notes").

    ``scope``: the scope it belongs to (``run`` for the run itself); ``strategy``: the
    context strategy that wrote it (``task_list``, ``task_tree``); ``text``: what the
    model reads, as a block of the user message after the tool results.
    ``lifetime_turns``: the model turns after it during which it holds (None: no
    limit); ``task``: the plan step it is about, done with it (None: none). An
    expired note is never restated and is left out at the next compaction
    (:attr:`Compacted.dropped`); no message already sent is ever rewritten.
    """

    model_config = ConfigDict(frozen=True)
    kind: Literal["context_note"] = "context_note"
    scope: str = "run"
    strategy: str
    text: str
    lifetime_turns: int | None = None
    task: str | None = None


class ScopeEntered(BaseModel):
    """The run went on in a nested scope (``scope``, unique among the run's scopes) for
    ``task``, inside the scope ``parent`` (``run``: the run's own). Until its
    :class:`ScopeLeft`, the run is inside it: a restart enters it again, and a loop
    inside it counts the model turns since this entry (docs/architecture.md, "The
    agent as a composition"). Not a message: the model's history passes over it.

    ``role``: the role whose model works in the scope on a view of its own (the
    expert's, in a delegation: :mod:`core.run.delegation`): the run's history passes
    over everything journaled in the scope, and that model reads only it
    (:mod:`core.run.history`). None (journals from before it, and every other scope):
    the run's own models, on the run's history."""

    model_config = ConfigDict(frozen=True)
    kind: Literal["scope_entered"] = "scope_entered"
    scope: str
    parent: str = "run"
    task: str = ""
    role: ModelRole | None = None

    @model_serializer(mode="wrap")
    def _without_role(
        self, handler: Callable[[Any], dict[str, Any]], info: SerializationInfo
    ) -> dict[str, Any]:
        data = handler(self)
        if self.role is None:  # stored as before for a scope of the run's own models
            data.pop("role", None)
        return data


class ScopeLeft(BaseModel):
    """The run left the nested scope ``scope``; ``outcome`` names how its work ended."""

    model_config = ConfigDict(frozen=True)
    kind: Literal["scope_left"] = "scope_left"
    scope: str
    outcome: str = ""


class ExpertConsulted(BaseModel):
    """An ``ask_expert`` call (``tool_use_id``) and what became of it: the expert model was
    asked ``question`` (redacted) and ``answered`` (its answer is the call's result), or
    its API call ``failed``, or the call was ``refused``, no model asked, because the
    conversation's consultations are spent (``reason`` says which budget, or the
    failure's message). ``usage``: the expert's model call, recorded and priced like
    any other (role ``expert``; None when no answer came).

    Committed with the call's result (:mod:`core.run.consultation`); the budget counts
    the answered ones and their cost, from the journal, so a restart changes nothing.
    Not a message: the model reads the result."""

    model_config = ConfigDict(frozen=True)
    kind: Literal["expert_consulted"] = "expert_consulted"
    tool_use_id: str
    question: str
    outcome: Literal["answered", "failed", "refused"] = "answered"
    reason: str = ""
    usage: ModelUsage | None = None


class ForkedFrom(BaseModel):
    """Where a fork came from: operator ``by`` forked conversation ``conversation`` at its
    entry ``at``, so entries 1..``at`` are that one's, copied (their model calls were
    made and are counted there). The first entry the fork adds (:mod:`core.run.fork`);
    not a message: the model's history passes over it."""

    model_config = ConfigDict(frozen=True)
    kind: Literal["forked_from"] = "forked_from"
    conversation: str
    at: int
    by: str


Entry = Annotated[
    UserText
    | AssistantTurn
    | ToolResultEntry
    | DecisionEntry
    | StepEntered
    | Compacted
    | StopEntry
    | ToolAttempt
    | ContextNote
    | ScopeEntered
    | ScopeLeft
    | Escalated
    | FailuresReset
    | ExpertConsulted
    | Delegated
    | DelegationBrief
    | DelegationChecked
    | DelegationEnded
    | Nudged
    | WorkflowChosen
    | RuleApplied
    | ForkedFrom,
    Field(discriminator="kind"),
]


PricedEntry = AssistantTurn | Compacted | ExpertConsulted
"""The entries that may hold a model call's usage (``usage``): a turn, a compaction's
summary, an expert's consultation; every reader of spend and usage reads them all."""


class JournalRecord(BaseModel):
    """An entry as stored: its per-conversation sequence number and time (UTC)."""

    model_config = ConfigDict(frozen=True)

    seq: int
    at: datetime
    entry: Entry
