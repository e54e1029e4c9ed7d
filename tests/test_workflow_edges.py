"""Workflows as a new user might break them, through Slack (the real bolt app and
slack-sdk against the fakes, :mod:`tests.slack_harness`) and Discord (discord.py against
its fake, :mod:`tests.platform_threads`) (issue 29).

A mention asking for a workflow in odd words; someone who may not approve reacting on
``validate-fix``'s plan; a stop while the check runs; a check whose output is long and
holds a code fence of its own, whose report must keep within each platform's limits and
keep its output inside its code block.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from adapters.slack.outbound import escape
from core.models.scripted import ScriptedModel
from core.vocabulary.lifecycle import Lifecycle
from core.vocabulary.tool_records import ToolState
from tests.check_repo import CHECK, check_repo
from tests.conftest import wait_for
from tests.platform_threads import on
from tests.process_harness import live_with, sleep_marker
from tests.slack_harness import ALICE, BOB, CHANNEL, slack_workspace
from tests.test_slack_story import FENCE, finish

REFUSED = "ask for one of: default, chat, validate-fix (workflow=NAME in the mention). "
"""The end of a refusal where every shipped workflow is allowed."""


@pytest.mark.parametrize(
    "mention",
    [
        "workflow=chat! what is here?",
        "Workflow=CHAT what is here?",
        "what is here? workflow=*chat*.",
    ],
)
async def test_an_ask_in_other_case_or_with_punctuation_around_it_runs_that_workflow(
    settings, mention: str
) -> None:
    model = ScriptedModel([finish("Nothing yet.")])
    async with slack_workspace(settings, model) as ws:
        root = await ws.mention(mention)

        answer = ws.posts(root)[-1]["text"]
        assert answer.startswith("✅ Nothing yet.")
        assert answer.endswith(" · workflow chat\n<@U0ALICE001>, here is the answer.")
        said = model.requests[0].messages[0]["content"][-1]["text"]
        assert "workflow" not in said.lower() and "what is here?" in said


@pytest.mark.parametrize(
    ("mention", "said"),
    [
        ("workflow=<b>`deploy`</b> now", "Workflow `b??deploy??/b` is not allowed in this channel"),
        ("workflow= now", "`workflow=` names no workflow"),
        ("workflow=" + "x" * 500, f"Workflow `{'x' * 64}…` is not allowed in this channel"),
    ],
    ids=["markup", "empty", "long"],
)
async def test_an_ask_for_no_such_workflow_is_refused_whatever_it_holds(
    settings, mention: str, said: str
) -> None:
    model = ScriptedModel([])
    async with slack_workspace(settings, model) as ws:
        root = await ws.mention(mention)

        assert ws.api.posted_texts(CHANNEL, root) == [
            escape(f"{said}; {REFUSED}Nothing was started.")
        ]
        assert (await ws.snapshot(root)).status.lifecycle is Lifecycle.IDLE
        assert model.requests == []


async def test_someone_not_allowed_to_approve_reacting_on_the_check_plan_runs_nothing(
    settings, tmp_path: Path
) -> None:
    settings.git_repo = str(check_repo(tmp_path, passes_at=1))
    settings.check_command = CHECK
    async with slack_workspace(settings, ScriptedModel([])) as ws:
        root = await ws.mention("make the check pass workflow=validate-fix")
        plan = ws.post(root, "📋 Plan (v1)")

        await ws.react(plan["ts"], "white_check_mark", by=BOB)

        assert ws.api.posted_texts(CHANNEL, root)[1:] == [
            f"Only the requester or an approver can decide this, <@{BOB}>."
        ]
        assert ws.api.message(CHANNEL, plan["ts"])["text"] == plan["text"]  # still open
        snap = await ws.snapshot(root)
        assert str(snap.status) == "waiting(plan_approval)"
        assert [r.name for r in snap.tool_calls.values()] == ["propose_plan"]  # no check ran
        assert not (Path(snap.workspace) / "check-runs").exists()


async def test_a_stop_while_the_check_runs_ends_it_and_a_reply_asks_for_the_plan_again(
    settings, tmp_path: Path
) -> None:
    marker = sleep_marker()
    settings.git_repo = str(check_repo(tmp_path, passes_at=None, output=f"sleep {marker}\n"))
    settings.check_command = CHECK
    async with slack_workspace(settings, ScriptedModel([])) as ws:
        root = await ws.mention("make the check pass workflow=validate-fix")
        approve = ws.reaction_body(ws.post(root, "📋 Plan (v1)")["ts"])
        await ws.deliver("events_api", approve)  # not settled: the check runs on
        await wait_for(lambda: live_with(marker))

        await ws.slash("/stop")

        stopped = ws.post(root, "⏹ Stopped by")["text"]
        assert stopped == f"⏹ Stopped by <@{ALICE}>. 1 tool call interrupted while running."
        await wait_for(lambda: not live_with(marker))
        snap = await ws.snapshot(root)
        assert snap.status.lifecycle is Lifecycle.CANCELLED
        assert [r.state for r in snap.tool_calls.values() if r.name == "run_command"] == [
            ToolState.INTERRUPTED
        ]

        await ws.reply(root, "go on")

        again = ws.posts(root)[-1]["text"]  # no approval outlives a stop
        assert again.startswith("📋 Plan (v2)") and f"1. Run the check: `{CHECK}`" in again
        assert str((await ws.snapshot(root)).status) == "waiting(plan_approval)"
        assert not live_with(marker)


LONG = (
    'i=0; while [ $i -lt 2000 ]; do echo "line $i of what the check says"; i=$((i+1)); done\n'
    "echo '```'\necho 'a fence in the output'\n"
)
"""What the check prints before its ``check run N``: 2,000 lines and a code fence."""


@pytest.mark.parametrize(("platform", "limit"), [("slack", 3_900), ("discord", 2_000)])
async def test_a_long_check_output_keeps_to_the_platform_s_limit_inside_its_code_block(
    settings, tmp_path: Path, platform: str, limit: int
) -> None:
    settings.git_repo = str(check_repo(tmp_path, passes_at=1, output=LONG))
    settings.check_command = CHECK
    async with on(platform, settings, ScriptedModel([])) as thread:
        await thread.mention("make the check pass workflow=validate-fix")
        await thread.react(thread.message("📋 Plan (v1)"), approve=True, by="alice")
        await thread.settle()

        posts = thread.posts()
        start = max(i for i, text in enumerate(posts) if text.startswith(f"✅ `{CHECK}` passes."))
        parts = posts[start:]
        assert all(len(part) <= limit for part in parts)
        assert all(len(FENCE.findall(part)) % 2 == 0 for part in parts)  # each renders alone
        whole = "\n".join(parts)
        shown = whole.split("Its last output:\n```\n", 1)[1]
        assert shown.startswith("…\nline ")  # cut where a line starts
        assert re.match(r"…\nline \d+ of what the check says\n", shown)
        body = shown.rsplit("\n```\n", 1)[0]  # the block's text: the fence in it broken
        assert "`\u200b`\u200b`\na fence in the output\ncheck run 1" in body
        assert whole.rsplit("\n", 1)[0].endswith(" · workflow validate-fix")  # then the mention
        assert (await thread.snapshot()).status.lifecycle is Lifecycle.DONE


async def test_a_check_the_policy_denies_says_why_and_the_run_stops_there(
    settings, tmp_path: Path
) -> None:
    settings.git_repo = str(check_repo(tmp_path, passes_at=1))
    settings.check_command = CHECK
    settings.mutating_tools = False
    async with slack_workspace(settings, ScriptedModel([])) as ws:
        root = await ws.mention("make the check pass workflow=validate-fix")
        await ws.react(ws.post(root, "📋 Plan (v1)")["ts"])

        assert ws.api.posted_texts(CHANNEL, root)[-2:] == [
            f"⏳ `{CHECK}` was not run: Denied by policy: mutating tools are off here "
            "(the settings' `mutating_tools`)",
            "⚠️ The workflow cannot go on: the check step's run_command call was denied.\n"
            "Reply in this thread to start again.",
        ]
        snap = await ws.snapshot(root)
        assert snap.status.lifecycle is Lifecycle.FAILED
        assert not (Path(snap.workspace) / "check-runs").exists()


async def test_the_check_plan_is_not_offered_for_change_by_a_reply_and_a_reply_changes_nothing(
    settings, tmp_path: Path
) -> None:
    settings.git_repo = str(check_repo(tmp_path, passes_at=1))
    settings.check_command = CHECK
    model = ScriptedModel([])
    async with slack_workspace(settings, model) as ws:
        root = await ws.mention("make the check pass workflow=validate-fix")
        plan = ws.post(root, "📋 Plan (v1)")
        assert plan["text"].splitlines()[0] == (
            "📋 Plan (v1) — react :white_check_mark: to approve / :x: to reject"
        )

        await ws.reply(root, "use make lint instead")

        assert len(ws.posts(root)) == 1  # no plan v2: the workflow's plan is not revised
        snap = await ws.snapshot(root)
        assert str(snap.status) == "waiting(plan_approval)" and snap.plan_version == 1
        assert model.requests == []
