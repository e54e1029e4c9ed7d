"""Each shipped workflow end to end through the console adapter's streams (issue 29).

A person types into the console (:func:`tests.test_story_console.run_console`: piped
lines, each waited on until every run ends or waits for a person) and reads the
transcript; the store says where the conversation went. ``default`` is the console
story itself (:mod:`tests.test_story_console`, its footer naming the workflow);
here ``chat`` answers with no plan and refuses a mutating call, and ``validate-fix``
runs a check from the repository each workspace is cloned from
(:mod:`tests.check_repo`) until it passes, or stops at its cap.
"""

from __future__ import annotations

from pathlib import Path

from core.models.scripted import ScriptedCall, ScriptedModel, ScriptedTurn
from core.vocabulary.lifecycle import Lifecycle
from core.vocabulary.requests import PlanApproval
from core.vocabulary.tool_records import ToolState
from tests.check_repo import CHECK, check_repo, check_runs
from tests.test_story_console import finish, only_conversation, run_console


def fix(line: str, summary: str) -> list[ScriptedTurn]:
    """The model's fix at the ``fix`` step: one mutating call, then ``finish``."""
    return [
        ScriptedTurn(calls=[ScriptedCall("run_command", {"command": line})]),
        finish(summary),
    ]


def footer(transcript: str) -> str:
    """The final answer's footer: the transcript's last line but the requester's mention."""
    lines = [line.strip() for line in transcript.rstrip("\n").splitlines()]
    assert lines[-1].endswith(", here is the answer."), lines[-1]
    return lines[-2]


async def test_chat_answers_with_no_plan_and_denies_a_plan_and_a_mutating_call(make_app) -> None:
    plan = ScriptedCall("propose_plan", {"steps": ["Change notes.md"]})
    write = ScriptedCall("write_file", {"path": "notes.md", "content": "changed"})
    model = ScriptedModel(
        [
            ScriptedTurn(calls=[plan]),  # read_only names no tool that moves the workflow
            ScriptedTurn(calls=[write]),
            finish("The workspace is empty."),
        ]
    )
    app = await make_app(model)

    transcript = await run_console(app, "workflow=chat what is in the workspace?\n")

    assert "📋 Plan" not in transcript and "reactions:" not in transcript  # nothing to approve
    assert "was not run: The tool propose_plan is not available at the answering" in transcript
    assert "write_file notes.md was not run: The tool write_file is not available" in transcript
    assert "✅ The workspace is empty." in transcript
    assert footer(transcript).endswith("· workflow chat")
    snap = await app.store.journal.load(await only_conversation(app))
    assert snap.status.lifecycle is Lifecycle.DONE
    assert snap.requests == ()
    denied = {r.name for r in snap.tool_calls.values() if r.state is ToolState.DENIED}
    assert denied == {"propose_plan", "write_file"}
    assert not (Path(snap.workspace) / "notes.md").exists()
    offered = {t.name for t in model.requests[0].tools}
    assert {"propose_plan", "write_file"} <= offered  # every request offers every tool
    said = model.requests[0].messages[0]["content"][-1]["text"]
    assert said == "alice: what is in the workspace?"  # workflow=chat is not the model's


async def test_validate_fix_runs_the_approved_check_fixes_twice_and_reports_it_passes(
    settings, make_app, tmp_path: Path
) -> None:
    settings.git_repo = str(check_repo(tmp_path, passes_at=3))
    settings.check_command = CHECK
    model = ScriptedModel(
        [*fix("echo one >> fixes.txt", "fixed one"), *fix("echo two >> fixes.txt", "fixed two")]
    )
    app = await make_app(model)

    transcript = await run_console(app, "make the check pass workflow=validate-fix\n+✅ 2\n")

    lines = transcript.splitlines()
    assert lines[1].startswith("  [2] ↳1 threadbot: 📋 Plan (v1)")
    assert f"      1. Run the check: `{CHECK}`" in lines
    assert "  [2] ↳1 threadbot (edited): ✅ Approved by alice (plan v1)" in lines
    assert transcript.count(f"⏳ ran `{CHECK}`: exit 1") == 2
    assert "⏳ fix · fixed one" in transcript and "⏳ fix · fixed two" in transcript
    answer = transcript[transcript.index(f"✅ `{CHECK}` passes.") :]
    assert "check run 3" in answer
    assert footer(transcript).endswith("· workflow validate-fix")
    snap = await app.store.journal.load(await only_conversation(app))
    assert snap.status.lifecycle is Lifecycle.DONE
    assert check_runs(snap.workspace) == 3
    assert (Path(snap.workspace) / "fixes.txt").read_text() == "one\ntwo\n"
    (plan,) = snap.requests
    assert isinstance(plan, PlanApproval) and plan.decided_by is not None
    assert len(model.requests) == 4  # the model's turns only: two fixes of two


async def test_validate_fix_stops_at_its_cap_and_says_the_check_still_fails(
    settings, make_app, tmp_path: Path
) -> None:
    settings.git_repo = str(check_repo(tmp_path, passes_at=None))
    settings.check_command = CHECK
    model = ScriptedModel([turn for n in range(3) for turn in fix(f"echo {n} >> f", f"try {n}")])
    app = await make_app(model)

    transcript = await run_console(app, "workflow=validate-fix\n+✅ 2\n")

    answer = transcript[transcript.index("❌ ") :]
    assert answer.startswith(f"❌ `{CHECK}` still fails after 4 runs.")
    assert "check run 4" in answer
    assert footer(transcript).endswith("· workflow validate-fix")
    snap = await app.store.journal.load(await only_conversation(app))
    assert snap.status.lifecycle is Lifecycle.FAILED
    assert snap.position == "still_failing"
    assert check_runs(snap.workspace) == 4
    assert len(model.requests) == 6
