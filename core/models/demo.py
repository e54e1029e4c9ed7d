"""The built-in demo model: the whole flow without an API key.

:class:`DemoModel` is what ``make run`` uses with no ``ANTHROPIC_API_KEY``: it
derives its next step from the conversation history alone (plan, look around,
ask, write, finish), so it behaves the same after a restart. It follows the
workflow position the history names last (``[threadbot: the planning step]``):
at planning it proposes a plan, whatever it did before (a conversation started
again after a stop plans again), so it never calls a tool its step does not
offer. Its tool call ids
are ``toolu_demo_<turn>_<index>`` (:func:`core.models.scripted.canned_events`).
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Sequence
from typing import Any

from core.models.base import Message, ModelEvent, ModelRequest
from core.models.scripted import ScriptedCall, canned_events


class DemoModel:
    """A built-in model that shows the whole flow without an API key.

    Its final answer is made from the results its last tools returned, so it
    never says it wrote a file that a failed, denied or skipped call did not.
    """

    name = "demo"

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Choose the next step from the request's history."""
        text, calls = _demo_step(request.messages)
        async for event in canned_events(self.name, "demo", request, text, calls):
            yield event


def _demo_step(messages: Sequence[Message]) -> tuple[str, list[ScriptedCall]]:
    last_call = _last_tool_name(messages)
    result = _last_result_text(messages)
    request = _latest_request(messages)
    approved = " was approved by " in result
    if _position(messages) == "planning" or last_call in (None, "finish"):
        revised = last_call == "propose_plan" and not approved and "Stopped by" not in result
        return "", [_plan_call(request, revised=revised)]
    if last_call == "propose_plan":
        if not approved:
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


_STEP = re.compile(r"\[threadbot: the (\S+) step\]")


def _position(messages: Sequence[Message]) -> str | None:
    """The workflow position the newest step marker names (None: no marker)."""
    for block in reversed(_blocks(messages, "user")):
        found = _STEP.match(block["text"]) if block.get("type") == "text" else None
        if found:
            return found.group(1)
    return None


def _latest_request(messages: Sequence[Message]) -> str:
    """The newest request: a person's words with no role label ("alice: ...")."""
    texts = [
        b["text"]
        for b in _blocks(messages, "user")
        if b.get("type") == "text" and not b["text"].startswith("[threadbot")  # a step's
    ]
    requests = [t.split(": ", 1) for t in texts if ": " in t]
    plain = [text for speaker, text in requests if "(" not in speaker]
    return plain[-1] if plain else "your request"
