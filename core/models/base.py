"""The ``Model`` protocol: one request in, a stream of events out.

Requests and messages use the Messages API shapes (``{"role": "user", "content":
[...]}`` with ``text``, ``tool_use`` and ``tool_result`` blocks), the most widely
spoken format for tool-using models:
https://docs.anthropic.com/en/api/messages

A model yields, in order: any number of :class:`TextDelta` and
:class:`ToolInputDelta` (a ``tool_use`` block's input JSON as it is written, the
Messages API's ``input_json_delta`` events:
https://docs.anthropic.com/en/docs/build-with-claude/streaming), then one
:class:`ToolCallEvent` per ``tool_use`` block, then one :class:`Usage` and one
:class:`TurnEnd`. Scripted and real models yield the same stream, so progress
notes and stop behave the same for every model.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from enum import StrEnum
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from core.vocabulary.entries import ModelRole

Message = dict[str, Any]
"""A Messages API message: ``{"role": "user" | "assistant", "content": [block, ...]}``."""


class ToolKind(StrEnum):
    """What a tool is, as data (pydantic-ai's ``ToolKind`` is the model): the engine and
    the tool policy decide on it, never on a tool's name.

    ``control``: the agent's own tools (propose a plan, ask, finish, report progress),
    done by the engine, always allowed, changing nothing; ``read_only``: changes
    nothing, so it may run beside its read-only neighbours and run again after a
    crash; ``mutating``: may change the workspace or the world.
    """

    CONTROL = "control"
    READ_ONLY = "read_only"
    MUTATING = "mutating"


class ToolSpec(BaseModel):
    """A tool: its name, description and input JSON Schema, as the model sees them, and
    its kind (not sent to the model; a tool that says nothing is ``mutating``)."""

    model_config = ConfigDict(frozen=True)

    name: str
    description: str
    input_schema: dict[str, Any]
    kind: ToolKind = ToolKind.MUTATING
    repeatable: bool = True
    """A ``read_only`` tool's call may be tried again after a failure, by the run's retry
    policy (:mod:`core.retry`); a read-only tool whose every call costs (a paid lookup)
    says False. Mutating and control tools are never tried again, whatever this says."""
    ends_turn: bool = False
    """A control tool whose call ends the model's turn and moves the workflow on
    (``propose_plan``, ``ask_user``, ``finish``: :func:`core.tools.control.ends_turn`): a
    workflow state offers it only by naming it, never through the ``read_only`` group
    (:meth:`core.tools.base.Toolbox.select`). Not sent to the model."""


ToolChoice = Literal["auto", "none"]
"""Whether the model may call the offered tools (:attr:`ModelRequest.tool_choice`)."""


class ModelRequest(BaseModel):
    """One model call: system prompt, the whole message history, the offered tools."""

    model_config = ConfigDict(frozen=True)

    system: str
    messages: list[Message]
    tools: list[ToolSpec] = Field(default_factory=list)
    max_tokens: int = 4096
    model: str | None = None
    """The model id to ask (a channel's setting); None: the model's own default."""
    fallbacks: tuple[str, ...] = ()
    """Model ids to ask in turn when the one before is overloaded (529, or 429 after
    the client's retries) before any of its answer arrived."""
    role: ModelRole = "executor"
    """Whose call this is (the workflow position's role); not sent to the API: a model
    id is (``model``). Scripted models answer each role from its own script."""
    tool_choice: ToolChoice = "auto"
    """How the model may use ``tools``: ``auto``, it decides (the API's default, so not
    sent); ``none``, it may not call any and answers in prose, with the tools still
    defined, as a history holding ``tool_use`` blocks needs them (an expert's
    consultation, :mod:`core.run.consultation`). The Messages API's ``tool_choice``:
    https://docs.anthropic.com/en/api/messages (``tool_choice``), and
    https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/implement-tool-use
    ("Forcing tool use"); it is given only with tools (the API refuses it without)."""


class TextDelta(BaseModel):
    """A piece of assistant text, in order."""

    model_config = ConfigDict(frozen=True)
    kind: Literal["text"] = "text"
    text: str


class ToolInputDelta(BaseModel):
    """A piece of a ``tool_use`` block's input JSON, in order: the pieces of one block
    (``index``: its place among the response's content blocks) join to its input's
    JSON text, a prefix of which is not valid JSON yet. ``id`` and ``name`` are the
    block's, so a reader knows whose input grows (``finish``'s answer streams,
    docs/architecture.md "Streamed answers"). The complete input still comes in the
    block's :class:`ToolCallEvent`."""

    model_config = ConfigDict(frozen=True)
    kind: Literal["tool_input"] = "tool_input"
    index: int
    id: str
    name: str
    partial_json: str


class ToolCallEvent(BaseModel):
    """A complete ``tool_use`` block: its id, tool name and parsed input."""

    model_config = ConfigDict(frozen=True)
    kind: Literal["tool_call"] = "tool_call"
    id: str
    name: str
    input: dict[str, Any]


class Usage(BaseModel):
    """Tokens of one model call (counts, not cost)."""

    model_config = ConfigDict(frozen=True)
    kind: Literal["usage"] = "usage"
    model: str
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0


class TurnEnd(BaseModel):
    """The end of the response, with the API's ``stop_reason`` (``end_turn``, ``tool_use``...)."""

    model_config = ConfigDict(frozen=True)
    kind: Literal["turn_end"] = "turn_end"
    stop_reason: str
    content: tuple[dict[str, Any], ...] = ()
    """The response's content blocks exactly as the API returned them, when the model
    has them: thinking blocks must be sent back unchanged with the tool results
    (https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking)."""


ModelEvent = TextDelta | ToolInputDelta | ToolCallEvent | Usage | TurnEnd


class Model(Protocol):
    """Anything that answers a :class:`ModelRequest` with a stream of :data:`ModelEvent`.

    Implementations raise :class:`core.vocabulary.errors.ModelError` when the call fails for
    good (after their own retries). Cancelling the consuming task stops the call.
    """

    name: str

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Yield the events of one response to ``request``."""
        ...
