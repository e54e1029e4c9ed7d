"""The shapes of a conversation's timeline: one item per journal entry shown, and its header.

Each item carries the ``seq`` and time (UTC) of the journal entry it shows, so a page
can name it (a fork point: docs/architecture.md, "The run inspector"), and ``kind``, the
name a page gives its kind (``data-kind``). People are named by their platform user
id, never a display name. Texts are as journaled: the page redacts what it serves.

An item is ``settled`` when nothing that comes later can change it; one that is not
(a call still running, a plan whose version is not known yet) is shown again when it
changes (:mod:`conversations.inspect.follow`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import ClassVar

from conversations.store.inspection import ran
from core.vocabulary.tool_records import FINAL_TOOL_STATES, ToolState

MARKED_STATES = frozenset(
    {ToolState.INTERRUPTED, ToolState.UNKNOWN, ToolState.DENIED, ToolState.CANCELLED}
)
"""The states a page marks on a call: its outcome is partial, not known, or it never ran
(docs/architecture.md, "Durability and exactly-once")."""


@dataclass(frozen=True)
class Spent:
    """One model call's usage: ``model`` (and its ``role``), tokens as the API reported
    them, ``latency_ms`` and ``cost_micro_usd`` (None: no price).

    ``cache_share``: the part of every input token (``input_tokens`` +
    ``cache_read_tokens`` + ``cache_write_tokens``) read from the prompt cache, from 0
    to 1 (None: no input)."""

    model: str
    role: str | None
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    latency_ms: int | None
    cost_micro_usd: int | None

    @property
    def all_input(self) -> int:
        """Every input token: fresh, read from the cache, written to it."""
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens

    @property
    def cache_share(self) -> float | None:
        """``cache_read_tokens`` over :attr:`all_input`; None without input."""
        return self.cache_read_tokens / self.all_input if self.all_input else None


@dataclass(frozen=True)
class Item:
    """What every timeline item has: the journal entry's ``seq`` and time."""

    kind: ClassVar[str] = "item"
    seq: int
    at: datetime

    @property
    def settled(self) -> bool:
        """Whether anything committed later can change how this item shows."""
        return True


@dataclass(frozen=True)
class Message(Item):
    """A person's words (``role``: request, answer, feedback, note, instruction), and
    the names of the files shared with them."""

    kind: ClassVar[str] = "message"
    who: str
    role: str
    text: str
    files: tuple[str, ...] = ()


@dataclass(frozen=True)
class CallAsked:
    """A tool call a model turn asked for: its id, tool, arguments (JSON, indented) and
    its record's state now (None: no record), whether its result is journaled
    (``answered``). A ``propose_plan`` call has its ``steps`` and the plan ``version``
    it became (None: not known yet, or never one). ``waiting``: what a control call
    waits for while a person's answer is its result (``waiting for an answer``: see
    :func:`waiting_for`); the state shown then, rather than its record's."""

    id: str
    name: str
    arguments: str
    state: ToolState | None
    answered: bool = False
    steps: tuple[str, ...] = ()
    version: int | None = None
    waiting: str | None = None

    @property
    def plan(self) -> bool:
        """Whether the call proposes a plan (a well-formed ``propose_plan``)."""
        return bool(self.steps)

    @property
    def marked(self) -> bool:
        """Whether its state is one a page marks (:data:`MARKED_STATES`)."""
        return self.state in MARKED_STATES


@dataclass(frozen=True)
class ModelTurn(Item):
    """A model's response: its text, the calls it asked for, its usage (None: a turn a
    workflow state made itself, ``workflow`` naming the state; or journaled before usage
    was kept) and why it stopped."""

    kind: ClassVar[str] = "model_turn"
    text: str
    calls: tuple[CallAsked, ...]
    spent: Spent | None
    stop_reason: str
    model: str
    workflow: str = ""

    @property
    def settled(self) -> bool:
        """Once every call has its result (or a final state) and every plan its version."""
        return all(
            c.answered or (c.state in FINAL_TOOL_STATES and (not c.plan or c.version is not None))
            for c in self.calls
        )


@dataclass(frozen=True)
class ToolResult(Item):
    """The one result of a call: the call (``call_id``, ``name``, ``arguments``), its
    record's ``state``, whether the model was told it failed (``is_error``), the seconds
    from when it could run (its turn, or the approval that let it) to its result, and
    the result's first page (``output``; ``more``: there is more to page through, the
    whole of a large output kept under ``output_id`` when the result names one)."""

    kind: ClassVar[str] = "tool_result"
    call_id: str
    name: str
    arguments: str
    state: ToolState | None
    is_error: bool
    seconds: float | None
    output: str
    more: bool
    output_id: str | None = None
    attempts: int = 1

    @property
    def marked(self) -> bool:
        """Whether its state is one a page marks (:data:`MARKED_STATES`)."""
        return self.state in MARKED_STATES


@dataclass(frozen=True)
class Decision(Item):
    """A person's decision on a pending request: ``who``, ``means`` (reaction, button,
    reply, command; None: not recorded), the ``verdict`` (approved, rejected, ...), the
    request's kind and plan version, and for a tool approval each call decided
    (``calls``: tool name and verdict), how far the approval reaches (``scope``) and the
    call's number when decided call by call."""

    kind: ClassVar[str] = "decision"
    who: str
    means: str | None
    verdict: str
    request_id: str
    request_kind: str | None
    version: int | None
    calls: tuple[tuple[str, str], ...] = ()
    scope: str | None = None
    call: int | None = None


@dataclass(frozen=True)
class Stop(Item):
    """A person stopped the run: ``who``, by what ``means`` (None: not recorded)."""

    kind: ClassVar[str] = "stop"
    who: str
    means: str | None


@dataclass(frozen=True)
class Note(Item):
    """Any other entry, as a title, the person it names (``who``), a text and facts
    (label, value): workflow states, compactions, escalations, nudges, context notes,
    expert consultations, delegations, scopes, retried attempts, approvals by rule.
    ``entry``: the journal entry's kind (the item's ``data-kind``)."""

    kind: ClassVar[str] = "note"
    entry: str
    title: str
    text: str = ""
    facts: tuple[tuple[str, str], ...] = ()
    who: str | None = None
    spent: Spent | None = None


WAITING_FOR = {
    "question": "waiting for an answer",
    "plan_approval": "waiting for approval",
    "plan_revision": "waiting for a revision",
}
"""What a control call without its result waits for, by the kind of its open request:
its record says ``approved`` (it may run), but it runs no tool: a person's answer
becomes its result."""


def waiting_for(kind: str) -> str:
    """What a control call waits for while its request of ``kind`` is open."""
    return WAITING_FOR.get(kind, f"waiting for a person ({kind.replace('_', ' ')})")


@dataclass(frozen=True)
class InFlight:
    """A call without its result yet: its tool, state, and since when (its turn);
    ``waiting``: what it waits for when a person's answer is to be its result (an
    ``ask_user`` question, a plan), shown instead of its record's state."""

    call_id: str
    name: str
    state: ToolState
    since: datetime
    waiting: str | None = None


@dataclass(frozen=True)
class ForkLink:
    """A fork: conversation ``conversation`` forked from, or into, at entry ``at`` by the
    operator ``by`` (their name)."""

    conversation: str
    at: int
    by: str


@dataclass(frozen=True)
class Waiting:
    """An open request: its id, kind, plan version (plan requests) and prompt."""

    request_id: str
    kind: str
    version: int | None
    prompt: str


@dataclass(frozen=True)
class Header:
    """What the top of a conversation's page says: where (platform, workspace, channel,
    thread), who asked (``requester``, a platform user id), its lifecycle status and
    workflow position, the workflow it runs, when it was opened (``started``; None: not
    known) and when its run ended (``ended``, None while it is idle, runs or waits:
    :meth:`duration`), the tokens and cost of the model calls it made (a fork's own; the
    priced calls' cost, None when none had a price; ``unpriced``: calls without a
    price), as the list of conversations counts them
    (:mod:`conversations.store.inspection`), and what is open now: calls without their
    result, requests waiting for a person. ``origin``: where a fork came from (None:
    not a fork); ``forks``: the forks made of it (from its audit trail), oldest first.
    ``last_seq``: the newest entry's."""

    id: str
    platform: str
    workspace: str
    channel: str
    thread: str | None
    requester: str
    status: str
    lifecycle: str
    position: str
    workflow: str | None
    started: datetime | None
    ended: datetime | None
    model_calls: int
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    cost_micro_usd: int | None
    unpriced: int
    in_flight: tuple[InFlight, ...]
    waiting: tuple[Waiting, ...]
    last_seq: int
    origin: ForkLink | None = None
    forks: tuple[ForkLink, ...] = ()

    def duration(self, now: datetime) -> timedelta | None:
        """How long it ran: to ``ended``, or to ``now`` while it is idle, runs or waits
        (:func:`conversations.store.inspection.ran`, as the list says it)."""
        return ran(self.started, self.ended, now)

    @property
    def cache_share(self) -> float | None:
        """The part of every input token read from the prompt cache (None: no input)."""
        total = self.input_tokens + self.cache_read_tokens + self.cache_write_tokens
        return self.cache_read_tokens / total if total else None
