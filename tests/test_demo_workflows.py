"""The built-in demo model in each shipped workflow (issue 29), through the console.

What ``make run`` does with no API key must make sense whatever workflow a channel
runs: in ``chat`` it looks at the workspace and answers (no plan); at
``validate-fix``'s ``fix`` step it makes a small change (``fix-notes.md``, with the end
of the check's output) and finishes, so the check runs again; at a step of a workflow
it does not know it looks and finishes, never proposing a plan there.
"""

from __future__ import annotations

from pathlib import Path

from core.models.demo import FIX_NOTES, DemoModel, _demo_step
from core.vocabulary.lifecycle import Lifecycle
from tests.check_repo import CHECK, check_repo, check_runs
from tests.test_story_console import only_conversation, run_console


async def test_the_demo_in_chat_looks_and_answers_with_no_plan(make_app) -> None:
    app = await make_app(DemoModel())  # type: ignore[arg-type]

    transcript = await run_console(app, "workflow=chat what is in here?\n>1 and now?\n")

    assert "📋 Plan" not in transcript and "was not run" not in transcript
    assert transcript.count('✅ You asked "what is in here?". The workspace is empty.') == 1
    assert '✅ You asked "and now?". The workspace is empty.' in transcript  # asked again
    *_, footer, mention = transcript.rstrip().splitlines()
    assert footer.endswith("· workflow chat") and mention.endswith(", here is the answer.")
    snap = await app.store.journal.load(await only_conversation(app))
    assert snap.status.lifecycle is Lifecycle.DONE
    assert [r.name for r in snap.tool_calls.values()].count("list_files") == 2


async def test_the_demo_in_validate_fix_writes_its_notes_and_finishes_each_round(
    settings, make_app, tmp_path: Path
) -> None:
    settings.git_repo = str(check_repo(tmp_path, passes_at=3))
    settings.check_command = CHECK
    app = await make_app(DemoModel())  # type: ignore[arg-type]

    transcript = await run_console(app, "workflow=validate-fix\n+✅ 2\n")

    assert "Plan (v2)" not in transcript and "finish refused" not in transcript
    assert transcript.count(f"⏳ fix · I wrote the end of the check's output to {FIX_NOTES}") == 2
    assert f"✅ `{CHECK}` passes." in transcript
    snap = await app.store.journal.load(await only_conversation(app))
    assert snap.status.lifecycle is Lifecycle.DONE
    assert check_runs(snap.workspace) == 3
    notes = (Path(snap.workspace) / FIX_NOTES).read_text()
    assert notes == "# What the check said\n\n```\nexit code 1\ncheck run 2\n```\n"


def marker(step: str) -> dict:
    return {"type": "text", "text": f"[threadbot: the {step} step] Do the {step} work."}


def test_at_a_step_it_does_not_know_the_demo_looks_then_finishes() -> None:
    asked = [
        {"role": "user", "content": [marker("reading"), {"type": "text", "text": "alice: hi"}]}
    ]

    text, calls = _demo_step(asked)
    assert (text, [c.name for c in calls]) == ("", ["list_files"])

    looked = [
        *asked,
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "toolu_demo_0_0", "name": "list_files", "input": {}}
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_demo_0_0", "content": "a.txt"}
            ],
        },
    ]
    text, calls = _demo_step(looked)
    assert [c.name for c in calls] == ["finish"]
    assert (
        calls[0]
        .input["answer"]
        .startswith("Done with the reading step. The workspace holds 1 entry: a.txt.")
    )

    refused = [
        *looked,
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "toolu_demo_1_0", "name": "finish", "input": {}}
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_demo_1_0",
                    "content": "finish refused: the approved plan needs write_file, and no "
                    "change has been made yet.",
                    "is_error": True,
                }
            ],
        },
    ]
    _, calls = _demo_step(refused)
    assert [(c.name, c.input.get("path")) for c in calls] == [("write_file", "reading-notes.md")]

    not_offered = [
        *looked,
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "toolu_demo_1_0", "name": "finish", "input": {}}
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_demo_1_0",
                    "content": "The tool finish is not available at the reading step.",
                    "is_error": True,
                }
            ],
        },
    ]
    text, calls = _demo_step(not_offered)
    assert calls == [] and text.startswith("Done with the reading step.")  # prose: the answer
