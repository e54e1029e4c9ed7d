"""Models without a network: a scripted model for tests, and the demo model.

:class:`ScriptedModel` plays canned assistant turns in order and records every
request it was sent; a turn can block on an ``asyncio.Event`` until a test
releases it, so tests check order ("the stop happened while the model was
blocked") instead of timing.

:class:`DemoModel` is what ``make run`` uses with no ``ANTHROPIC_API_KEY``: it
derives its next step from the conversation history alone (plan, look around,
ask, write, finish), so it behaves the same after a restart.

Tool call ids: a model's ids need only be unique within a conversation (tool
records are keyed by conversation and ``tool_use_id``, DESIGN.md "Durability and
exactly-once"). These models number a call by the assistant turns already in the
request's history and its place in the turn (``toolu_<model>_<turn>_<index>``,
``<model>`` being ``scripted``, ``script`` or ``demo``), never by a counter of the
process: a turn never gets the id of an earlier call of its conversation (whose
record, with its result, would be taken for its own and the call never run),
also after a restart.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from core.errors import ModelError
from core.model import (
    Message,
    ModelEvent,
    ModelRequest,
    TextDelta,
    ToolCallEvent,
    TurnEnd,
    Usage,
)


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


class ScriptedModel:
    """Answers each request with the next :class:`ScriptedTurn`.

    Raises :class:`ModelError` (not retryable) when the script has run out, and a
    turn's ``error`` when it has one.
    """

    def __init__(self, turns: Sequence[ScriptedTurn], *, name: str = "scripted") -> None:
        self.name = name
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
        async for event in _events(self.name, "scripted", request, turn.text, turn.calls):
            yield event


def _turn_number(request: ModelRequest) -> int:
    """How many assistant turns the request's history holds (0 for the first call)."""
    return sum(1 for m in request.messages if m["role"] == "assistant")


async def _events(
    model: str, prefix: str, request: ModelRequest, text: str, calls: Sequence[ScriptedCall]
) -> AsyncIterator[ModelEvent]:
    """The stream of one canned turn; a call with no id gets ``toolu_<prefix>_<turn>_<index>``."""
    turn = _turn_number(request)
    if text:
        yield TextDelta(text=text)
    for index, call in enumerate(calls):
        call_id = call.id or f"toolu_{prefix}_{turn}_{index}"
        yield ToolCallEvent(id=call_id, name=call.name, input=call.input)
    yield Usage(model=model, input_tokens=100, output_tokens=20)
    yield TurnEnd(stop_reason="tool_use" if calls else "end_turn")


class ScriptFileModel:
    """Canned turns from a JSON file, chosen by how many turns the history holds.

    The file is a list of turns, ``{"text": str?, "calls": [{"name", "input"?,
    "id"?}]?}``. The turn answered is the one after the assistant messages already
    in the request, so the script goes on where it was after a crash and a
    restart. A call's id defaults to ``toolu_script_<turn>_<index>``. Raises
    ``ValueError`` for a malformed file and :class:`ModelError` past its end.
    """

    def __init__(self, path: str) -> None:
        self.name = "script"
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
        if not isinstance(data, list) or not all(isinstance(t, dict) for t in data):
            raise ValueError(f"{path}: a model script is a JSON list of turns")
        self._turns = data

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Yield the events of the turn after the history's last assistant message."""
        index = _turn_number(request)
        if index >= len(self._turns):
            raise ModelError(f"the model script has no turn {index + 1}", retryable=False)
        turn = self._turns[index]
        calls = [
            ScriptedCall(name=c["name"], input=c.get("input", {}), id=c.get("id", ""))
            for c in turn.get("calls", [])
        ]
        async for event in _events(self.name, "script", request, turn.get("text", ""), calls):
            yield event


class DemoModel:
    """A built-in model that shows the whole flow without an API key.

    Its final answer is made from the results its last tools returned, so it
    never says it wrote a file that a failed, denied or skipped call did not.
    """

    name = "demo"

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Choose the next step from the request's history."""
        text, calls = _demo_step(request.messages)
        async for event in _events(self.name, "demo", request, text, calls):
            yield event


def _demo_step(messages: Sequence[Message]) -> tuple[str, list[ScriptedCall]]:
    last_call = _last_tool_name(messages)
    result = _last_result_text(messages)
    request = _latest_request(messages)
    if last_call is None or last_call == "finish":
        return "", [_plan_call(request)]
    if last_call == "propose_plan":
        if " was approved by " not in result:
            return "", [_plan_call(request, revised=True)]
        return "", [
            ScriptedCall("report_progress", {"step": "step 1 of 3", "note": "looking around"}),
            ScriptedCall("list_files", {"path": "."}),
        ]
    if last_call == "list_files":
        question = "Should the summary be short or detailed?"
        return "", [
            ScriptedCall("ask_user", {"question": question, "options": ["short", "detailed"]})
        ]
    if last_call == "ask_user":
        summary = f"# Request\n\n{request}\n\n# Answer to my question\n\n{result}\n"
        return "", [
            ScriptedCall("report_progress", {"step": "step 3 of 3", "note": "writing summary.md"}),
            ScriptedCall("write_file", {"path": "summary.md", "content": summary}),
            ScriptedCall("run_command", {"command": "wc -c summary.md"}),
        ]
    return "", [ScriptedCall("finish", {"answer": _final_answer(messages)})]


_DEMO_NOTE = " (This is the built-in demo model: set ANTHROPIC_API_KEY to work with Claude.)"


def _final_answer(messages: Sequence[Message]) -> str:
    """What the last turn's ``write_file`` and ``run_command`` results say, and no more."""
    results = _last_turn_results(messages)
    written, write_failed = results.get("write_file", ("no result was recorded", True))
    if write_failed:
        return f"I could not write summary.md: {written.rstrip('.')}.{_DEMO_NOTE}"
    did = f"I {written}" if written.startswith("wrote ") else f"write_file said: {written}"
    checked, check_failed = results.get("run_command", ("no result was recorded", True))
    _, _, output = checked.partition("\n")
    check = (
        f"checking it failed: {' '.join(checked.split())}"
        if check_failed
        else f"`wc -c` counts {' '.join(output.split()) or '(nothing)'}"
    )
    return (
        f"Done. {did} in this conversation's workspace, with your request and your "
        f"answer; {check}.{_DEMO_NOTE}"
    )


def _last_turn_results(messages: Sequence[Message]) -> dict[str, tuple[str, bool]]:
    """``{tool name: (result text, is_error)}`` for the calls of the last assistant turn."""
    turns = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
    if not turns:
        return {}
    last = turns[-1]
    uses = _blocks(messages[last : last + 1], "assistant")
    answers = _blocks(messages[last + 1 : last + 2], "user")
    names = {b["id"]: str(b["name"]) for b in uses if b.get("type") == "tool_use"}
    return {
        names[b["tool_use_id"]]: (_result_text(b), bool(b.get("is_error")))
        for b in answers
        if b.get("type") == "tool_result" and b.get("tool_use_id") in names
    }


def _plan_call(request: str, *, revised: bool = False) -> ScriptedCall:
    steps = [
        f"Look at the workspace for: {request[:80]}",
        "Ask you one clarification question",
        "Write summary.md and check it with a command",
    ]
    if revised:
        steps.insert(0, "Take your feedback into account")
    return ScriptedCall(
        "propose_plan", {"steps": steps, "tools": ["list_files", "write_file", "run_command"]}
    )


def _blocks(messages: Sequence[Message], role: str) -> list[dict[str, Any]]:
    return [
        block
        for message in messages
        if message["role"] == role and isinstance(message["content"], list)
        for block in message["content"]
    ]


def _last_tool_name(messages: Sequence[Message]) -> str | None:
    for message in reversed(messages):
        if message["role"] != "assistant":
            continue
        uses = [b for b in message["content"] if b.get("type") == "tool_use"]
        if uses:
            return str(uses[-1]["name"])
    return None


def _last_result_text(messages: Sequence[Message]) -> str:
    results = [b for b in _blocks(messages, "user") if b.get("type") == "tool_result"]
    if not results:
        return ""
    return _result_text(results[-1])


def _result_text(block: dict[str, Any]) -> str:
    content = block.get("content", "")
    return content if isinstance(content, str) else json.dumps(content)


def _latest_request(messages: Sequence[Message]) -> str:
    """The newest request: a person's words with no role label ("alice: ...")."""
    texts = [b["text"] for b in _blocks(messages, "user") if b.get("type") == "text"]
    requests = [t.split(": ", 1) for t in texts if ": " in t]
    plain = [text for speaker, text in requests if "(" not in speaker]
    return plain[-1] if plain else "your request"
