"""The whole story through the console adapter's streams, with a scripted model.

A person mentions the bot, sees a plan, approves it with a reaction, answers a
clarification question, follows the progress notes and gets the final answer;
the store holds the lifecycle, the journal and one tool record per tool_use_id.
"""

from __future__ import annotations

import io
from pathlib import Path

from adapters.console import ConsoleAdapter
from bot.app import App
from core.models.scripted import ScriptedCall, ScriptedModel, ScriptedTurn
from core.vocabulary.lifecycle import Lifecycle
from core.vocabulary.tool_records import ToolState
from tests.fakes.anthropic_server import check_tool_results


def finish(answer: str) -> ScriptedTurn:
    """The model ends the run with ``answer`` (a ``finish`` call)."""
    return ScriptedTurn(calls=[ScriptedCall("finish", {"answer": answer})])


def story_script() -> list[ScriptedTurn]:
    return [
        ScriptedTurn(
            calls=[
                ScriptedCall(
                    "propose_plan",
                    {
                        "steps": ["Run the login tests", "Fix the fixture"],
                        "tools": ["run_command", "write_file"],
                    },
                )
            ]
        ),
        ScriptedTurn(
            calls=[
                ScriptedCall("report_progress", {"step": "step 1 of 2", "note": "running tests"}),
                ScriptedCall("run_command", {"command": "echo 3 failed"}),
            ]
        ),
        ScriptedTurn(
            calls=[
                ScriptedCall(
                    "ask_user",
                    {"question": "One session per test, or shared?", "options": ["one", "shared"]},
                )
            ]
        ),
        ScriptedTurn(
            text="Rewriting the fixture.",
            calls=[ScriptedCall("write_file", {"path": "conftest.py", "content": "# fixed\n"})],
        ),
        ScriptedTurn(
            calls=[ScriptedCall("finish", {"answer": "Each test now gets its own session."})]
        ),
    ]


async def run_console(app: App, lines: str, *, user: str = "alice") -> str:
    out = io.StringIO()
    console = ConsoleAdapter(
        input=io.StringIO(lines), output=out, user=user, wait_between_lines=True
    )
    app.add_sender(console)
    await app.start()
    assert await console.run(app.hub, settled=app.hub.settled) == 0
    return out.getvalue()


async def only_conversation(app: App) -> str:
    ids = [c.id for c in await app.store.threads.conversations()]
    assert len(ids) == 1
    return ids[0]


async def test_mention_plan_approve_question_answer_progress_final(make_app) -> None:
    model = ScriptedModel(story_script())
    app = await make_app(model)

    transcript = await run_console(app, "the login test is flaky, fix it\n+✅ 2\n>1 one per test\n")

    lines = transcript.splitlines()
    assert lines[0] == "[1] alice: the login test is flaky, fix it"
    assert lines[1].startswith("  [2] ↳1 threadbot: 📋 Plan (v1)")
    assert "      1. Run the login tests" in lines
    assert "      [Approve] [Reject] (reactions: ✅ ❌)" in lines
    assert "  [2] +✅ alice" in lines
    assert any("⏳ step 1 of 2 · running tests" in line for line in lines)
    assert any("⏳ ran `echo 3 failed`: exit 0" in line for line in lines)
    question = next(i for i, line in enumerate(lines) if "❓ One session per test" in line)
    answer = next(i for i, line in enumerate(lines) if "alice: one per test" in line)
    assert question < answer
    assert any("⏳ Rewriting the fixture." in line for line in lines[answer:])
    assert "✅ Each test now gets its own session." in transcript
    assert lines[-2].strip().startswith("— 2 tool calls")
    assert lines[-2].endswith(" · workflow default")  # the footer names the workflow
    assert lines[-1].strip() == "alice, here is the answer."  # the requester, mentioned

    snap = await app.store.journal.load(await only_conversation(app))
    assert snap.status.lifecycle is Lifecycle.DONE
    assert snap.position == "answered"
    kinds = [r.entry.kind for r in snap.journal]
    assert kinds[:3] == ["workflow_chosen", "step_entered", "user_text"]
    assert kinds[-2:] == ["tool_result", "step_entered"]  # the finish, then the end entered
    steps = [r.entry.position for r in snap.journal if r.entry.kind == "step_entered"]
    assert steps == ["planning", "approval", "executing", "answered"]
    assert kinds.count("assistant_turn") == 5
    tool_uses = [
        c.id for r in snap.journal if r.entry.kind == "assistant_turn" for c in r.entry.tool_calls
    ]
    assert sorted(snap.tool_calls) == sorted(tool_uses)
    assert len(set(tool_uses)) == 6
    assert {r.state for r in snap.tool_calls.values()} == {ToolState.DONE}
    assert (Path(snap.workspace) / "conftest.py").read_text() == "# fixed\n"
    for request in model.requests:
        assert check_tool_results(request.messages) is None


async def test_a_reaction_from_someone_not_allowed_does_not_approve(make_app) -> None:
    model = ScriptedModel(story_script()[:1])
    app = await make_app(model)

    transcript = await run_console(app, "fix it\n/as bob\n+✅ 2\n")

    assert "Only the requester or an approver can decide this, bob." in transcript
    snap = await app.store.journal.load(await only_conversation(app))
    assert str(snap.status) == "waiting(plan_approval)"
    assert len(model.requests) == 1
    assert [r.state.value for r in snap.requests] == ["open"]


async def test_an_approver_from_settings_may_approve(settings, make_app) -> None:
    settings.approvers = ["bob"]
    # The plan names write_file: a finish before a write would be refused as early.
    write = ScriptedCall("write_file", {"path": "conftest.py", "content": "# fixed\n"})
    model = ScriptedModel([*story_script()[:1], ScriptedTurn(calls=[write]), finish("All done.")])
    app = await make_app(model)

    transcript = await run_console(app, "fix it\n/as bob\n+✅ 2\n")

    assert "✅ All done." in transcript
    snap = await app.store.journal.load(await only_conversation(app))
    assert snap.status.lifecycle is Lifecycle.DONE
    assert snap.requests[0].decided_by is not None and snap.requests[0].decided_by.name == "bob"


async def test_a_new_message_after_done_starts_the_next_run_with_the_history(make_app) -> None:
    model = ScriptedModel([*story_script(), finish("You're welcome.")])
    app = await make_app(model)

    transcript = await run_console(
        app, "the login test is flaky, fix it\n+✅ 2\n>1 one per test\n>1 thanks!\n"
    )

    assert "✅ You're welcome." in transcript
    follow_up = model.requests[-1]
    assert follow_up.messages[0]["content"][1]["text"] == "alice: the login test is flaky, fix it"
    finish_result, planning_again, new_message = follow_up.messages[-1]["content"]
    assert finish_result["type"] == "tool_result"
    assert planning_again["text"].startswith("[threadbot: the planning step]")
    assert new_message == {"type": "text", "text": "alice: thanks!"}
    assert check_tool_results(follow_up.messages) is None
    snap = await app.store.journal.load(await only_conversation(app))
    assert snap.status.lifecycle is Lifecycle.DONE
    assert [r.entry.kind for r in snap.journal].count("user_text") == 3


async def test_rejecting_a_plan_asks_what_to_change_and_the_answer_gives_v2(make_app) -> None:
    plan = story_script()[0]
    plan_v2 = ScriptedTurn(calls=[ScriptedCall("propose_plan", {"steps": ["Only read the tests"]})])
    model = ScriptedModel([plan, plan_v2])
    app = await make_app(model)

    transcript = await run_console(app, "fix it\n+❌ 2\n>1 do not touch the fixture\n+✅ 2\n")

    assert "❓ What should change in plan v1?" in transcript
    assert "📋 Plan (v2)" in transcript
    assert "That plan was replaced by a newer version." in transcript
    feedback = model.requests[1].messages[-1]["content"][0]
    assert feedback["type"] == "tool_result"
    assert "do not touch the fixture" in feedback["content"]
    snap = await app.store.journal.load(await only_conversation(app))
    assert snap.plan_version == 2 and str(snap.status) == "waiting(plan_approval)"


async def test_status_mode_edits_one_progress_reply_in_place(settings, make_app) -> None:
    settings.progress_mode = "status"
    model = ScriptedModel(story_script())
    app = await make_app(model)

    transcript = await run_console(app, "fix it\n+✅ 2\n>1 one per test\n")

    lines = transcript.splitlines()
    status_posts = [line for line in lines if "threadbot: ⏳" in line]
    edits = [line for line in lines if "threadbot (edited): ⏳" in line]
    assert len(status_posts) == 2  # one status reply per run: before and after the question
    assert edits, transcript
    status_id = status_posts[0].split("]")[0].strip()
    assert any(edit.strip().startswith(status_id + "]") for edit in edits)
    assert "✅ Each test now gets its own session." in transcript


async def test_the_demo_revises_its_plan_on_feedback_and_writes_what_was_asked(make_app) -> None:
    from core.models.demo import DemoModel

    app = await make_app(DemoModel())  # type: ignore[arg-type]
    transcript = await run_console(
        app, "write a report\n>1 please also include charts\n+✅ 4\n+❌ 7\n>1 short\n"
    )

    assert "📋 Plan (v2)" in transcript
    assert "1. Take your feedback into account" in transcript
    assert "✅ Done." in transcript
    snap = await app.store.journal.load(await only_conversation(app))
    summary = (Path(snap.workspace) / "summary.md").read_text()
    assert "# Request\n\nwrite a report" in summary
    assert "alice answered: short" in summary  # the ❌ on the question was no answer
