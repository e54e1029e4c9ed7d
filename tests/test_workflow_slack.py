"""Each shipped workflow end to end through Slack: the real bolt app and slack-sdk against
the fakes (:mod:`tests.slack_harness`), a scripted model (issue 29).

``default`` is the Slack story (:mod:`tests.test_slack_story`, its footer naming the
workflow); here ``chat`` answers with no plan and no reaction asked and refuses a
mutating call; ``validate-fix`` proposes its fixed plan naming the check command,
Alice approves it with the ✅ reaction, the check runs from the repository each
workspace is cloned from (:mod:`tests.check_repo`), the model fixes until it passes, or
the cap; and a workflow the channel does not allow is refused in the thread with the
ones it does. Each asserts what the fake Slack received and what the store holds.
"""

from __future__ import annotations

from pathlib import Path

from adapters.slack.outbound import escape
from core.models.scripted import ScriptedCall, ScriptedModel, ScriptedTurn
from core.vocabulary.entries import WorkflowChosen
from core.vocabulary.lifecycle import Lifecycle
from core.vocabulary.requests import PlanApproval
from core.vocabulary.tool_records import ToolState
from core.vocabulary.verdicts import Approved
from tests.check_repo import CHECK, check_repo, check_runs
from tests.fakes.slack_api import TEAM_ID
from tests.slack_harness import ALICE, CHANNEL, slack_workspace
from tests.test_settings_layers import layered
from tests.test_slack_story import STATS, finish, where
from tests.test_workflow_console import fix


def footer(text: str) -> str:
    """The final answer's footer (its last line but the requester's mention)."""
    return next(line for line in reversed(text.split("\n")) if line.startswith("— "))


async def test_chat_answers_with_no_plan_no_reaction_and_a_mutating_call_denied(
    settings,
) -> None:
    write = ScriptedCall("write_file", {"path": "notes.md", "content": "changed"})
    model = ScriptedModel([ScriptedTurn(calls=[write]), finish("The workspace is empty.")])
    async with slack_workspace(settings, model) as ws:
        root = await ws.mention("workflow=chat what is in the workspace?")

        answer = ws.post(root, "✅ The workspace is empty.")["text"]
        assert STATS.fullmatch(footer(answer)) and footer(answer).endswith(" · workflow chat")
        assert ws.calls("reactions.add") == []  # nothing to approve
        assert not any("📋" in text for text in ws.api.posted_texts(CHANNEL, root))
        denied = ws.post(root, "write_file notes.md was not run")["text"]
        assert "not available at the answering step" in denied
        snap = await ws.snapshot(root)
        assert snap.status.lifecycle is Lifecycle.DONE
        assert snap.requests == ()
        assert [r.state for r in snap.tool_calls.values() if r.name == "write_file"] == [
            ToolState.DENIED
        ]
        assert not (Path(snap.workspace) / "notes.md").exists()


async def test_validate_fix_approved_by_reaction_fixes_until_the_check_passes(
    settings, tmp_path: Path
) -> None:
    settings.git_repo = str(check_repo(tmp_path, passes_at=3))
    settings.check_command = CHECK
    model = ScriptedModel(
        [*fix("echo one >> fixes.txt", "fixed one"), *fix("echo two >> fixes.txt", "fixed two")]
    )
    async with slack_workspace(settings, model) as ws:
        root = await ws.mention("make the check pass workflow=validate-fix")

        plan = ws.post(root, "📋 Plan (v1)")
        assert f"1. Run the check: `{CHECK}`" in plan["text"]
        assert [(*where(r), r.args["name"]) for r in ws.calls("reactions.add")] == [
            ("reactions.add", CHANNEL, plan["ts"], "white_check_mark"),
            ("reactions.add", CHANNEL, plan["ts"], "x"),
        ]
        assert model.requests == []  # nothing asked of the model before the approval

        await ws.react(plan["ts"], "white_check_mark", by=ALICE)

        assert ws.api.message(CHANNEL, plan["ts"])["text"].startswith(
            f"✅ Approved by <@{ALICE}> (plan v1)"
        )
        answer = ws.posts(root)[-1]["text"]
        assert answer.startswith(f"✅ `{CHECK}` passes.\n\nIts last output:\n```\n")
        assert "check run 3" in answer
        assert footer(answer).endswith(" · workflow validate-fix")
        snap = await ws.snapshot(root)
        assert snap.status.lifecycle is Lifecycle.DONE
        (request,) = snap.requests
        assert isinstance(request, PlanApproval) and request.verdict == Approved()
        assert check_runs(snap.workspace) == 3
        assert (Path(snap.workspace) / "fixes.txt").read_text() == "one\ntwo\n"
        assert len(model.requests) == 4


async def test_validate_fix_with_a_check_that_never_passes_stops_at_the_cap(
    settings, tmp_path: Path
) -> None:
    settings.git_repo = str(check_repo(tmp_path, passes_at=None))
    settings.check_command = CHECK
    model = ScriptedModel([turn for n in range(3) for turn in fix(f"echo {n} >> f", f"try {n}")])
    async with slack_workspace(settings, model) as ws:
        root = await ws.mention("workflow=validate-fix")
        await ws.react(ws.post(root, "📋 Plan (v1)")["ts"])

        answer = ws.posts(root)[-1]["text"]
        assert answer.startswith(f"❌ `{CHECK}` still fails after 4 runs.\n\nIts last output:")
        assert "check run 4" in answer
        assert footer(answer).endswith(" · workflow validate-fix")
        snap = await ws.snapshot(root)
        assert snap.status.lifecycle is Lifecycle.FAILED
        assert check_runs(snap.workspace) == 4
        assert len(model.requests) == 6


async def test_a_workflow_the_channel_does_not_allow_is_refused_in_the_thread(settings) -> None:
    channel = {"workflows": ["chat"], "check_command": CHECK}
    settings = layered(settings, slack={TEAM_ID: {"channels": {CHANNEL: channel}}})
    model = ScriptedModel([])
    async with slack_workspace(settings, model) as ws:
        root = await ws.mention("workflow=validate-fix fix the build")

        assert ws.api.posted_texts(CHANNEL, root) == [
            escape(
                "Workflow `validate-fix` is not allowed in this channel; ask for one of: "
                "default, chat (workflow=NAME in the mention). Nothing was started."
            )
        ]
        assert [where(c) for c in ws.calls()] == [("chat.postMessage", CHANNEL, root)]
        snap = await ws.snapshot(root)
        assert snap.status.lifecycle is Lifecycle.IDLE
        assert not any(isinstance(r.entry, WorkflowChosen) for r in snap.journal)
        assert model.requests == []
