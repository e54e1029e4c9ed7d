"""Models without a network for tests: canned turns, in order or from a file.

:class:`ScriptedModel` plays canned assistant turns in order and records every
request it was sent (:class:`ScriptedRoles`: one script per model role); a turn
can block on an ``asyncio.Event`` until a test releases it, so tests check order
("the stop happened while the model was blocked") instead of timing.

The demo model (:mod:`core.models.demo`) streams its steps with
:func:`canned_events` too.

Tool call ids: a model's ids need only be unique within a conversation (tool
records are keyed by conversation and ``tool_use_id``, docs/architecture.md,
"Durability and exactly-once"). These models number a call by the assistant turns
already in the request's history and its place in the turn
(``toolu_<model>_<turn>_<index>``, ``<model>`` being ``scripted``, ``script`` or
``demo``), never by a counter of the process: a turn never gets the id of an
earlier call of its conversation (whose record, with its result, would be taken
for its own and the call never run), also after a restart. :class:`ScriptedRoles`
names each role in its ids (``toolu_scripted_executor_<turn>_<index>``): the
executor's own view of the history (its model differing from the planner's) starts
after the planning turns, so its turn numbers start again from 0. The expert's requests
start from its brief (a delegation's view of its own, :mod:`core.run.delegation`),
so its calls are numbered within that view and named after it:
``toolu_<model>_expert<digest of the brief>_<turn>_<index>``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from core.models.base import (
    ModelEvent,
    ModelRequest,
    TextDelta,
    ToolCallEvent,
    ToolInputDelta,
    TurnEnd,
    Usage,
)
from core.vocabulary.entries import WORKFLOW_CALL_ID, ModelRole
from core.vocabulary.errors import ModelError


@dataclass(frozen=True)
class ScriptedCall:
    """A tool call in a scripted turn; ``id`` defaults to ``toolu_<model>_<turn>_<index>``
    (see the module's docstring)."""

    name: str
    input: dict[str, Any] = field(default_factory=dict)
    id: str = ""


@dataclass
class ScriptedTurn:
    """One canned response: text, tool calls, and an optional gate to wait on first."""

    text: str = ""
    calls: Sequence[ScriptedCall] = ()
    gate: asyncio.Event | None = None
    error: ModelError | None = None
    started: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when the model starts answering with this turn (before the gate)."""
    chunk: int = 0
    """Characters per :class:`~core.models.base.TextDelta` of the text and per
    :class:`~core.models.base.ToolInputDelta` of each call's input JSON (0: each whole in
    one), so a test cuts a streamed text or answer where it wants."""
    between: asyncio.Event | None = None
    """When given, the model waits on it after its first piece (of text, else of input),
    so a test acts (a restart) while a streamed text or answer is half written."""


class ScriptedModel:
    """Answers each request with the next :class:`ScriptedTurn`.

    Raises :class:`ModelError` (not retryable) when the script has run out, and a
    turn's ``error`` when it has one.
    """

    def __init__(
        self, turns: Sequence[ScriptedTurn], *, name: str = "scripted", prefix: str = "scripted"
    ) -> None:
        self.name = name
        self._prefix = prefix
        """The ids' ``<model>`` (see the module docstring)."""
        self._turns = list(turns)
        self.requests: list[ModelRequest] = []

    def add(self, *turns: ScriptedTurn) -> None:
        """Append turns to the script."""
        self._turns.extend(turns)

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Yield the next turn's events; waits on its gate first."""
        self.requests.append(request)
        if not self._turns:
            raise ModelError("the scripted model has no turns left", retryable=False)
        turn = self._turns.pop(0)
        turn.started.set()
        if turn.gate is not None:
            await turn.gate.wait()
        if turn.error is not None:
            raise turn.error
        events = canned_events(
            self.name, self._prefix, request, turn.text, turn.calls, chunk=turn.chunk
        )
        pieces = 0
        async for event in events:
            yield event
            if isinstance(event, TextDelta | ToolInputDelta) and turn.between is not None:
                pieces += 1
                if pieces == 1:
                    await turn.between.wait()


class ScriptedRoles:
    """A :class:`ScriptedModel` per role: each request is answered from the script of
    its role (:attr:`ModelRequest.role`), so a test gives the planner, the executor and
    the expert their own turns and sees which one was asked.

    ``requests``: every request, in order; :meth:`of` a role's own model (its
    ``requests`` and :meth:`ScriptedModel.add`). A role with no script raises
    :class:`ModelError` (not retryable), as a script that has run out does. A call's id
    names its role: ``toolu_scripted_planner_0_0``.
    """

    def __init__(
        self,
        *,
        planner: Sequence[ScriptedTurn] = (),
        executor: Sequence[ScriptedTurn] = (),
        expert: Sequence[ScriptedTurn] = (),
        name: str = "scripted",
    ) -> None:
        self.name = name
        self._roles: dict[ModelRole, ScriptedModel] = {
            "planner": ScriptedModel(planner, name=name, prefix="scripted_planner"),
            "executor": ScriptedModel(executor, name=name, prefix="scripted_executor"),
            "expert": ScriptedModel(expert, name=name, prefix="scripted_expert"),
        }
        self.requests: list[ModelRequest] = []

    def of(self, role: ModelRole) -> ScriptedModel:
        """The scripted model that answers ``role``'s requests."""
        return self._roles[role]

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Yield the next turn of the request's role's script."""
        self.requests.append(request)
        async for event in self._roles[request.role].stream(request):
            yield event


def _turn_number(request: ModelRequest) -> int:
    """How many assistant turns of a model the request's history holds (0 for the first
    call): a turn a workflow state made itself (its calls' ids begin with
    :data:`core.vocabulary.entries.WORKFLOW_CALL_ID`) is not the script's."""
    return sum(1 for m in request.messages if m["role"] == "assistant" and not _workflows(m))


def _workflows(message: dict[str, Any]) -> bool:
    content = message.get("content")
    if not isinstance(content, list) or not content:
        return False
    return all(
        isinstance(b, dict)
        and b.get("type") == "tool_use"
        and str(b.get("id", "")).startswith(WORKFLOW_CALL_ID)
        for b in content
    )


async def canned_events(
    model: str,
    prefix: str,
    request: ModelRequest,
    text: str,
    calls: Sequence[ScriptedCall],
    *,
    chunk: int = 0,
) -> AsyncIterator[ModelEvent]:
    """The stream of one canned turn; a call with no id gets ``toolu_<prefix>_<turn>_<index>``.

    ``model`` names the model in the usage event; ``<turn>`` is the number of
    assistant turns in ``request``'s history, the expert's named after its view (see
    the module docstring). The text comes as :class:`~core.models.base.TextDelta` pieces
    and each call's input JSON as :class:`~core.models.base.ToolInputDelta` pieces, of
    ``chunk`` characters each (0: one piece), as the Messages API streams them.
    """
    turn = _turn_number(request)
    if request.role == "expert" and request.messages:  # a view of its own: see the docstring
        first = json.dumps(request.messages[0]["content"], sort_keys=True, default=str)
        prefix += "_expert" + hashlib.sha256(first.encode()).hexdigest()[:8]
    size = chunk if chunk > 0 else max(len(text), 1)
    for start in range(0, len(text), size):
        yield TextDelta(text=text[start : start + size])
    ids = [call.id or f"toolu_{prefix}_{turn}_{index}" for index, call in enumerate(calls)]
    opening = 1 if text else 0  # the text block comes first among the content blocks
    for index, call in enumerate(calls):
        written = json.dumps(call.input)
        size = chunk if chunk > 0 else max(len(written), 1)
        for start in range(0, len(written), size):
            piece = written[start : start + size]
            yield ToolInputDelta(
                index=opening + index, id=ids[index], name=call.name, partial_json=piece
            )
    for index, call in enumerate(calls):
        yield ToolCallEvent(id=ids[index], name=call.name, input=call.input)
    yield Usage(model=request.model or model, input_tokens=100, output_tokens=20)
    yield TurnEnd(stop_reason="tool_use" if calls else "end_turn")


class ScriptFileModel:
    """Canned turns from a JSON file, chosen by how many turns the history holds.

    The file is a list of turns, ``{"text": str?, "calls": [{"name", "input"?,
    "id"?}]?, "role": "expert"?}``. The turn answered is the one after the assistant
    messages already in the request, so the script goes on where it was after a
    crash and a restart. The turns marked ``"role": "expert"`` answer the expert's
    requests (a delegation's view of its own: its brief and its own turns), the
    others every other request, each in their order. The file is read again for
    each request, so a test may add turns while the bot runs (one that names what
    an earlier turn made, an output's id). A call's id defaults to
    ``toolu_script_<turn>_<index>``. Raises ``ValueError`` for a malformed file (not
    JSON, not a list of turns, a turn of the wrong shape: named by its number, from 1),
    checked whole at every read, and :class:`ModelError` past its end.

    One script plays one model for the planner and the executor: with an executor
    model of its own, the executor reads a view that starts after the planning turns
    (:func:`core.run.model_turn.own_plan`), so its count starts again and the script
    would replay the planner's turns; such a run is scripted in-process, with
    :class:`ScriptedRoles`.
    """

    def __init__(self, path: str) -> None:
        self.name = "script"
        self._path = path
        self._read()

    def _read(self) -> list[dict[str, Any]]:
        with open(self._path, encoding="utf-8") as handle:
            try:
                data = json.load(handle)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{self._path}: a model script is JSON: {exc}") from exc
        if not isinstance(data, list) or not all(isinstance(t, dict) for t in data):
            raise ValueError(f"{self._path}: a model script is a JSON list of turns")
        for number, turn in enumerate(data, start=1):
            problem = _turn_problem(turn)
            if problem:
                raise ValueError(f"{self._path}: turn {number}: {problem}")
        return data

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Yield the events of the turn after the history's last assistant message."""
        index = _turn_number(request)
        expert = request.role == "expert"
        turns = [t for t in self._read() if (t.get("role") == "expert") == expert]
        if index >= len(turns):
            raise ModelError(f"the model script has no turn {index + 1}", retryable=False)
        turn = turns[index]
        calls = [
            ScriptedCall(name=c["name"], input=c.get("input", {}), id=c.get("id", ""))
            for c in turn.get("calls", [])
        ]
        async for event in canned_events(self.name, "script", request, turn.get("text", ""), calls):
            yield event


def _turn_problem(turn: dict[str, Any]) -> str:
    """What is wrong with one turn of a model script ("" when nothing): ``text`` a
    string, ``calls`` a list of ``{"name": str, "input": object?, "id": str?}``,
    ``role`` absent or ``"expert"``, and no other key."""
    unknown = set(turn) - {"text", "calls", "role"}
    if unknown:
        return f"unknown keys {sorted(unknown)} (a turn has text, calls and role)"
    if not isinstance(turn.get("text", ""), str):
        return "text is a string"
    if turn.get("role", "expert") != "expert":
        return 'role is "expert" or absent (the planner and the executor share the others)'
    calls = turn.get("calls", [])
    if not isinstance(calls, list):
        return "calls is a list"
    for call in calls:
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            return 'each call is an object with a "name" (a string)'
        if not isinstance(call.get("input", {}), dict) or not isinstance(call.get("id", ""), str):
            return 'a call\'s "input" is an object and its "id" a string'
    return ""
