"""The agent's own tools are typed: a call is parsed once, when its turn is admitted.

``propose_plan``, ``ask_user``, ``finish`` and ``report_progress`` take pydantic input
models joined in one tagged union (``core.tools.control.ControlCall``), and their
JSON schemas, like the workspace tools', are generated from those models
(docs/architecture.md, "Tools and the sandbox"). A malformed control call is refused
when its turn is admitted, with the words the model reads; a tool's kind is data.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conversations.events import PlatformRef
from conversations.render import render_event
from conversations.store.memory import MemoryStore
from core.models.base import ToolKind
from core.models.scripted import ScriptedCall, ScriptedModel, ScriptedTurn
from core.run.engine import Engine
from core.tools import control
from core.tools.base import Toolbox
from core.tools.command import RunCommand
from core.tools.control import AskUser, Finish, ProposePlan, ReportProgress, control_tools
from core.tools.workspace import ListFiles, ReadFile, WriteFile
from core.vocabulary.entries import ToolResultEntry
from core.vocabulary.errors import ToolError
from core.vocabulary.inputs import ThreadMessage
from core.vocabulary.lifecycle import Lifecycle
from core.vocabulary.people import Person
from core.vocabulary.tool_records import ToolState
from core.workflows import default_workflow

ALICE = Person(id="U0ALICE001", name="alice")


def test_each_control_call_is_parsed_into_its_own_type() -> None:
    plan = control.parse("propose_plan", {"steps": [" Look ", "Fix"], "tools": ["read_file"]})
    assert plan == ProposePlan(steps=["Look", "Fix"], tools=["read_file"])
    assert control.parse("ask_user", {"question": "Which?", "options": [1, "b"]}) == AskUser(
        question="Which?", options=["1", "b"]
    )
    assert control.parse("finish", {"answer": " Done. "}) == Finish(answer="Done.")
    progress = control.parse("report_progress", {"note": "reading", "step": "step 1 of 2"})
    assert progress == ReportProgress(note="reading", step="step 1 of 2")


@pytest.mark.parametrize(
    ("name", "args", "said"),
    [
        ("finish", {"answer": "  "}, "`answer` must be a non-empty string"),
        ("finish", {}, "`answer` is required"),
        ("propose_plan", {"steps": []}, "`steps` must be a list of non-empty strings"),
        ("propose_plan", {"steps": "look"}, "`steps` must be a list of non-empty strings"),
        ("ask_user", {"question": 3}, "`question` must be a non-empty string"),
        ("report_progress", {"step": "1 of 2"}, "`note` is required"),
    ],
)
def test_a_malformed_control_call_is_refused_in_words(name: str, args: dict, said: str) -> None:
    with pytest.raises(ToolError) as refused:
        control.parse(name, args)
    assert str(refused.value) == said


def test_the_tools_kinds_are_data_and_their_schemas_come_from_their_inputs() -> None:
    box = Toolbox([*control_tools(), ListFiles(), ReadFile(), WriteFile(), RunCommand()])
    kinds = {tool.spec.name: box.kind(tool.spec.name) for tool in box}
    assert kinds == {
        "propose_plan": ToolKind.CONTROL,
        "ask_user": ToolKind.CONTROL,
        "finish": ToolKind.CONTROL,
        "report_progress": ToolKind.CONTROL,
        "ask_expert": ToolKind.CONTROL,
        "list_files": ToolKind.READ_ONLY,
        "read_file": ToolKind.READ_ONLY,
        "write_file": ToolKind.MUTATING,
        "run_command": ToolKind.MUTATING,
    }
    assert ReadFile.spec.input_schema == {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "Path relative to the workspace root."},
            "offset": {"type": "integer", "minimum": 1, "description": "First line, 1-based."},
            "limit": {"type": "integer", "minimum": 1, "description": "Number of lines."},
        },
        "required": ["path"],
        "additionalProperties": False,
    }
    plan = box.get("propose_plan")
    assert plan is not None and plan.spec.input_schema["required"] == ["steps"]
    assert "tool" not in plan.spec.input_schema["properties"]  # the union's tag is not input
    again = [json.dumps(t.spec.input_schema) for t in [*control_tools(), ReadFile(), RunCommand()]]
    assert again == [
        json.dumps(t.spec.input_schema) for t in [*control_tools(), ReadFile, RunCommand]
    ]


async def test_a_malformed_finish_is_refused_at_admission_and_the_model_goes_on(
    tmp_path: Path,
) -> None:
    store = MemoryStore(render=render_event)
    model = ScriptedModel(
        [
            ScriptedTurn(calls=[ScriptedCall("finish", {"answer": " "})]),
            ScriptedTurn(calls=[ScriptedCall("finish", {"answer": "Nothing to change."})]),
        ]
    )
    engine = Engine(
        journal=store.journal,
        model=model,
        toolbox=Toolbox(control_tools()),
    )
    cid = await store.threads.open_conversation(
        delivery_key="m1",
        binding=PlatformRef(platform="console", channel="console", thread="m1"),
        requester=ALICE,
        workspace_root=tmp_path,
        position=default_workflow().start,
    )
    assert cid is not None

    await engine.start(cid, ThreadMessage(text="anything to do?", author=ALICE))

    snap = await store.journal.load(cid)
    assert snap.status.lifecycle is Lifecycle.DONE
    first, second = (r for r in snap.tool_calls.values())
    assert (first.state, second.state) == (ToolState.DENIED, ToolState.DONE)
    results = {
        r.entry.tool_use_id: r.entry for r in snap.journal if isinstance(r.entry, ToolResultEntry)
    }
    assert results[first.tool_use_id].content == "`answer` must be a non-empty string"
    assert results[first.tool_use_id].is_error
    [_, retried] = model.requests
    last = retried.messages[-1]["content"]
    assert {"type": "tool_result", "tool_use_id": first.tool_use_id} | {
        "content": "`answer` must be a non-empty string",
        "is_error": True,
    } in last


def test_a_plan_step_is_one_line_however_the_model_wrote_it() -> None:
    """A step with a line break would print as an extra numbered step above the next one
    (``2. write a summary`` then ``2. rm -rf the repo``), in the plan people approve."""
    call = control.parse(
        "propose_plan", {"steps": ["read the notes\n2. write a summary", " rm -rf\tthe repo "]}
    )
    assert isinstance(call, ProposePlan)
    assert call.steps == ["read the notes 2. write a summary", "rm -rf the repo"]
    assert control.plan_steps("propose_plan", {"steps": ["a\r\nb"]}) == ["a b"]
