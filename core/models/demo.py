"""The built-in demo model: the whole flow without an API key.

:class:`DemoModel` is what ``make run`` uses with no ``ANTHROPIC_API_KEY``: it
derives its next step from the conversation history alone (plan, look around,
ask, write, finish), so it behaves the same after a restart. It follows the
workflow position the history names last (``[threadbot: the planning step]``):
at planning it proposes a plan, whatever it did before (a conversation started
again after a stop plans again), so it never calls a tool its step does not
offer. In the other shipped workflows (docs/architecture.md, "Workflows"): at
``chat``'s ``answering`` step it lists the workspace and answers with ``finish`` (no
plan); at ``validate-fix``'s ``fix`` step it writes :data:`FIX_NOTES` (the end of the
check's output: a small change, since it cannot fix code) and finishes, so the check
runs again; at a step of a workflow it does not know it lists the workspace and
finishes (a ``finish`` refused for want of a change writes ``<step>-notes.md`` first;
where ``finish`` is not offered it answers in prose). Its tool call ids
are ``toolu_demo_<turn>_<index>`` (:func:`core.models.scripted.canned_events`).
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

from core.models.base import Message, ModelEvent, ModelRequest
from core.models.scripted import ScriptedCall, canned_events
from core.vocabulary.entries import WORKFLOW_CALL_ID


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
    position = _position(messages)
    if position == "answering":  # chat: look, then answer
        return "", _answering(messages)
    if position == "fix":  # validate-fix: a small change, then finish
        return "", _fixing(messages)
    if position not in (None, "planning", "executing"):
        return _other_step(position, messages)
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

FIX_NOTES = "fix-notes.md"
"""The file the demo writes at ``validate-fix``'s ``fix`` step (it cannot fix code)."""


@dataclass(frozen=True)
class _Call:
    """One of the model's calls since the newest step marker, with its result."""

    name: str
    result: str
    is_error: bool


def _answering(messages: Sequence[Message]) -> list[ScriptedCall]:
    """``chat``'s answering step: list the workspace, then finish with what is there
    (nothing to plan, nothing changed)."""
    looked = [c for c in _since_step(messages) if c.name == "list_files"]
    if not looked:
        return [ScriptedCall("list_files", {"path": "."})]
    request = _latest_request(messages)
    answer = f'You asked "{request[:200]}". {_listing(looked[-1])}{_DEMO_NOTE}'
    return [ScriptedCall("finish", {"answer": answer})]


def _listing(call: _Call) -> str:
    """What a ``list_files`` call found, in a sentence."""
    if call.is_error:
        return f"I could not look at the workspace: {call.result.rstrip('.')}."
    entries = [line.strip() for line in call.result.splitlines() if line.strip()]
    if not entries or entries == ["[empty directory]"]:
        return "The workspace is empty."
    shown = ", ".join(entries[:10]) + (" and more" if len(entries) > 10 else "")
    counted = "1 entry" if len(entries) == 1 else f"{len(entries)} entries"
    return f"The workspace holds {counted}: {shown}."


def _fixing(messages: Sequence[Message]) -> list[ScriptedCall]:
    """``validate-fix``'s fix step: write :data:`FIX_NOTES` with the end of the check's
    output (a small change: the demo cannot fix code), then finish saying so."""
    written = [c for c in _since_step(messages) if c.name == "write_file"]
    if not written:
        output = _workflow_output(messages)[-1500:].strip() or "(no output)"
        notes = f"# What the check said\n\n```\n{output}\n```\n"
        return [
            ScriptedCall("report_progress", {"note": f"writing {FIX_NOTES}"}),
            ScriptedCall("write_file", {"path": FIX_NOTES, "content": notes}),
        ]
    if written[-1].is_error:
        answer = f"I could not write {FIX_NOTES}: {written[-1].result.rstrip('.')}."
    else:
        answer = (
            f"I wrote the end of the check's output to {FIX_NOTES}; a demo cannot fix the "
            "code itself. The check runs again now."
        )
    return [ScriptedCall("finish", {"answer": answer + _DEMO_NOTE})]


def _other_step(position: str, messages: Sequence[Message]) -> tuple[str, list[ScriptedCall]]:
    """A step of a workflow the demo does not know: list the workspace, then finish; a
    finish refused for want of a change writes ``<step>-notes.md`` first; where
    ``finish`` is not offered, the answer in prose."""
    since = _since_step(messages)
    finished = [c for c in since if c.name == "finish"]
    if finished and "not available" in finished[-1].result:
        return f"Done with the {position} step.{_DEMO_NOTE}", []
    if finished and not any(c.name == "write_file" for c in since):
        notes = f"# The {position} step\n\n{_latest_request(messages)}\n"
        return "", [ScriptedCall("write_file", {"path": f"{position}-notes.md", "content": notes})]
    looked = [c for c in since if c.name == "list_files"]
    if not looked and not finished:
        return "", [ScriptedCall("list_files", {"path": "."})]
    found = _listing(looked[-1]) if looked else ""
    answer = f"Done with the {position} step. {found}".strip() + _DEMO_NOTE
    return "", [ScriptedCall("finish", {"answer": answer})]


def _since_step(messages: Sequence[Message]) -> list[_Call]:
    """The model's calls (not the workflow's own) after the newest step marker, oldest
    first, each with its result."""
    start = 0
    for index, message in enumerate(messages):
        if message["role"] == "user" and _marker(message) is not None:
            start = index
    later = messages[start:]
    results = {
        b["tool_use_id"]: b for b in _blocks(later, "user") if b.get("type") == "tool_result"
    }
    calls = []
    for block in _blocks(later, "assistant"):
        if block.get("type") != "tool_use" or str(block["id"]).startswith(WORKFLOW_CALL_ID):
            continue
        result = results.get(block["id"], {})
        calls.append(_Call(str(block["name"]), _result_text(result), bool(result.get("is_error"))))
    return calls


def _workflow_output(messages: Sequence[Message]) -> str:
    """The result of the workflow's own newest call (its check command's output)."""
    ids = {
        str(b["id"])
        for b in _blocks(messages, "assistant")
        if b.get("type") == "tool_use" and str(b["id"]).startswith(WORKFLOW_CALL_ID)
    }
    found = [
        b
        for b in _blocks(messages, "user")
        if b.get("type") == "tool_result" and b.get("tool_use_id") in ids
    ]
    return _result_text(found[-1]) if found else ""


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
    for message in reversed(messages):
        if message["role"] == "user" and (found := _marker(message)) is not None:
            return found
    return None


def _marker(message: Message) -> str | None:
    """The position the newest step marker of ``message`` names (None: it has none)."""
    for block in reversed(_blocks([message], "user")):
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
