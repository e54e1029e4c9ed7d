"""The durable core's rules, driven through the hub with the scripted model.

Each test tells one story and asserts the journal, the tool records and what was
posted: gated calls, decisions (one wins), superseded plans, replies at once,
stop in each place, reminders and expiry with the sweeper's clock.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from core.models.scripted import ScriptedCall, ScriptedModel, ScriptedTurn
from core.vocabulary.inputs import StopOutcome
from core.vocabulary.lifecycle import Lifecycle
from core.vocabulary.requests import RequestState
from core.vocabulary.tool_records import ToolState
from core.vocabulary.verdicts import Approved
from tests.fakes.anthropic_server import check_tool_results
from tests.harness import Chat
from tests.pids import gone_holder

PLAN = ScriptedTurn(calls=[ScriptedCall("propose_plan", {"steps": ["Clean up", "Report"]})])


def plan() -> ScriptedTurn:
    return ScriptedTurn(calls=list(PLAN.calls))


def done(answer: str) -> ScriptedTurn:
    """The model ends the run with ``answer`` (a ``finish`` call)."""
    return ScriptedTurn(calls=[ScriptedCall("finish", {"answer": answer})])


async def approved_chat(
    make_app, turns: list[ScriptedTurn], *, settle: bool = True
) -> tuple[Chat, ScriptedModel]:
    model = ScriptedModel([plan(), *turns])
    app = await make_app(model)
    chat = Chat(app)
    await app.start()
    await chat.mention("clean up the build")
    await chat.react(chat.bot_message("📋 Plan (v1)"))
    if settle:
        await app.hub.settled()
    return chat, model


async def test_gated_calls_wait_while_allowed_calls_of_the_turn_run(make_app, tmp_path) -> None:
    chat, model = await approved_chat(
        make_app,
        [
            ScriptedTurn(
                calls=[
                    ScriptedCall("run_command", {"command": "rm -rf build"}),
                    ScriptedCall("write_file", {"path": "notes.md", "content": "x"}),
                    ScriptedCall("run_command", {"command": "git push origin main"}),
                ]
            ),
            done("Done."),
        ],
    )

    snap = await chat.snapshot()
    states = {r.input.get("command", r.name): r.state for r in snap.tool_calls.values()}
    assert states["write_file"] is ToolState.DONE
    assert states["rm -rf build"] is ToolState.PENDING_APPROVAL
    assert states["git push origin main"] is ToolState.PENDING_APPROVAL
    assert str(snap.status) == "waiting(tool_approval)"
    approval = chat.bot_message("🔐 May I run these?")
    assert "[Allow 1] [Deny 1] [Allow 2] [Deny 2]" in chat.out.getvalue()  # a button per call
    assert "1. `rm -rf build`" in chat.out.getvalue()
    assert "2. `git push origin main`" in chat.out.getvalue()
    assert len(model.requests) == 2  # the gated calls did not lead to another model call

    await chat.decide(approval, 1, "white_check_mark")
    await chat.app.hub.settled()
    assert str((await chat.snapshot()).status) == "waiting(tool_approval)"  # a partial decision
    await chat.decide(approval, 2, "x")
    await chat.app.hub.settled()

    snap = await chat.snapshot()
    states = {r.input.get("command", r.name): r.state for r in snap.tool_calls.values()}
    assert states["rm -rf build"] is ToolState.DONE
    assert states["git push origin main"] is ToolState.DENIED
    assert snap.status.lifecycle is Lifecycle.DONE
    denied = next(
        r.entry
        for r in snap.journal
        if r.entry.kind == "tool_result" and "Denied by alice" in r.entry.content
    )
    assert denied.is_error
    for request in model.requests:
        assert check_tool_results(request.messages) is None


async def test_a_call_with_no_decision_never_runs(make_app, tmp_path) -> None:
    marker = tmp_path / "pushed"
    chat, _ = await approved_chat(
        make_app,
        [ScriptedTurn(calls=[ScriptedCall("run_command", {"command": f"curl x; touch {marker}"})])],
    )
    await chat.react(chat.bot_message("🔐 May I run this?"), "heavy_check_mark", by="mallory")
    await chat.app.hub.settled()

    assert not marker.exists()
    assert "Only the requester or an approver can decide this, mallory." in chat.out.getvalue()
    snap = await chat.snapshot()
    assert [r.state for r in snap.tool_calls.values() if r.name == "run_command"] == [
        ToolState.PENDING_APPROVAL
    ]


async def test_a_reaction_decides_every_call_still_undecided(make_app) -> None:
    chat, _ = await approved_chat(
        make_app,
        [
            ScriptedTurn(
                calls=[
                    ScriptedCall("run_command", {"command": "rm -rf a"}),
                    ScriptedCall("run_command", {"command": "rm -rf b"}),
                ]
            ),
            done("Both gone."),
        ],
    )
    approval = chat.bot_message("🔐")
    await chat.decide(approval, 1, "x")
    await chat.react(approval, "white_check_mark")
    await chat.app.hub.settled()

    snap = await chat.snapshot()
    assert sorted(r.state for r in snap.tool_calls.values() if r.name == "run_command") == [
        ToolState.DENIED,
        ToolState.DONE,
    ]
    assert "✅ Both gone." in chat.out.getvalue()


async def test_two_approvals_together_give_one_decision_and_one_execution(make_app) -> None:
    chat, model = await approved_chat(
        make_app,
        [
            ScriptedTurn(calls=[ScriptedCall("run_command", {"command": "rm -rf x"})]),
            done("ok"),
        ],
    )
    approval = chat.bot_message("🔐")

    await asyncio.gather(
        chat.react(approval, "white_check_mark"),
        chat.react(approval, "x", by="alice"),
        chat.react(approval, "+1"),
    )
    await chat.app.hub.settled()

    snap = await chat.snapshot()
    decisions = [r.entry for r in snap.journal if r.entry.kind == "decision"]
    assert len([d for d in decisions if d.request_id != snap.requests[0].id]) == 1
    assert chat.out.getvalue().count("This was already decided, alice.") == 2
    results = [r.entry for r in snap.journal if r.entry.kind == "tool_result"]
    assert len({r.tool_use_id for r in results}) == len(results)
    assert len(model.requests) == 3


async def test_concurrent_plan_approval_and_rejection_give_one_decision(make_app) -> None:
    model = ScriptedModel([plan(), done("Went ahead.")])
    app = await make_app(model)
    chat = Chat(app)
    await app.start()
    await chat.mention("do it")
    message = chat.bot_message("📋")

    await asyncio.gather(chat.react(message, "white_check_mark"), chat.react(message, "x"))
    await app.hub.settled()

    snap = await chat.snapshot()
    plan_request = snap.requests[0]
    assert plan_request.state is RequestState.DECIDED
    assert chat.out.getvalue().count("This was already decided") == 1
    decided = [r.entry for r in snap.journal if r.entry.kind == "decision"]
    assert len(decided) == 1


async def test_removing_a_reaction_after_the_decision_changes_nothing(make_app) -> None:
    chat, _ = await approved_chat(make_app, [done("Finished.")])
    from conversations.events import ReactionChanged

    await chat.app.hub.handle(
        ReactionChanged(
            delivery_key="unreact",
            ref=chat._ref(chat.bot_message("📋")),
            author=chat.person("alice"),
            emoji="white_check_mark",
            added=False,
        )
    )
    await chat.app.hub.settled()
    snap = await chat.snapshot()
    assert snap.status.lifecycle is Lifecycle.DONE
    assert snap.requests[0].verdict == Approved()


async def test_two_replies_at_once_give_one_run_on_the_journal(make_app) -> None:
    model = ScriptedModel(
        [
            ScriptedTurn(calls=[ScriptedCall("ask_user", {"question": "Which branch?"})]),
            done("Using main."),
            done("Noted the second message."),
        ]
    )
    app = await make_app(model)
    chat = Chat(app)
    await app.start()
    await chat.mention("deploy")
    await asyncio.gather(
        chat.reply("main", settle=False),
        chat.reply("actually, also tag it", by="bob", settle=False),
    )
    await app.hub.settled()

    snap = await chat.snapshot()
    seqs = [r.seq for r in snap.journal]
    assert seqs == list(range(1, len(seqs) + 1))
    texts = [(r.entry.role, r.entry.text) for r in snap.journal if r.entry.kind == "user_text"]
    replies = {text: role for role, text in texts[1:]}
    assert set(replies) == {"main", "actually, also tag it"}
    assert sorted(replies.values()) == ["answer", "note"]  # one answers, the other is a note
    for request in model.requests:
        assert check_tool_results(request.messages) is None


async def test_a_reply_while_the_agent_works_reaches_the_next_turn_as_a_note(make_app) -> None:
    gate = asyncio.Event()
    slow = ScriptedTurn(calls=[ScriptedCall("list_files", {})], gate=gate)
    chat, model = await approved_chat(make_app, [slow, done("Thanks for the hint.")], settle=False)
    await asyncio.wait_for(slow.started.wait(), 5)
    await chat.reply("check the docs folder too", by="bob", settle=False)
    gate.set()
    await chat.app.hub.settled()

    last = model.requests[-1].messages[-1]["content"]
    assert last[0]["type"] == "tool_result"
    assert last[-1] == {
        "type": "text",
        "text": "bob (note while you work): check the docs folder too",
    }


async def test_a_reply_while_a_plan_waits_is_feedback_for_a_revised_plan(make_app) -> None:
    revised = ScriptedTurn(calls=[ScriptedCall("propose_plan", {"steps": ["Clean up only"]})])
    model = ScriptedModel([plan(), revised])
    app = await make_app(model)
    chat = Chat(app)
    await app.start()
    await chat.mention("clean up")
    first_plan = chat.bot_message("📋 Plan (v1)")
    await chat.reply("skip the report")

    assert "📋 Plan (v2)" in chat.out.getvalue()
    await chat.react(first_plan, "white_check_mark")
    await app.hub.settled()
    assert "That plan was replaced by a newer version." in chat.out.getvalue()
    snap = await chat.snapshot()
    assert str(snap.status) == "waiting(plan_approval)" and snap.plan_version == 2


async def test_stop_between_a_tool_result_and_the_next_model_call(make_app) -> None:
    gate = asyncio.Event()
    next_turn = ScriptedTurn(text="never", gate=gate)
    chat, _ = await approved_chat(
        make_app, [ScriptedTurn(calls=[ScriptedCall("list_files", {})]), next_turn], settle=False
    )
    # the model call after the tool result is in flight (blocked): stop now
    await asyncio.wait_for(next_turn.started.wait(), 5)
    await chat.stop()
    await chat.app.hub.settled()
    gate.set()

    snap = await chat.snapshot()
    assert snap.status.lifecycle is Lifecycle.CANCELLED
    assert [r.state for r in snap.tool_calls.values() if r.name == "list_files"] == [ToolState.DONE]
    assert chat.said()[-1] == "⏹ Stopped by alice."
    assert all(r.state is not RequestState.OPEN for r in snap.requests)


async def test_stop_while_waiting_resolves_every_pending_request_cancelled(make_app) -> None:
    model = ScriptedModel([plan()])
    app = await make_app(model)
    chat = Chat(app)
    await app.start()
    await chat.mention("clean")
    await chat.stop(by="bob")
    await app.hub.settled()
    assert "Only the requester or an approver can stop this, bob." in chat.out.getvalue()
    await chat.stop()
    await app.hub.settled()

    snap = await chat.snapshot()
    assert [r.state for r in snap.requests] == [RequestState.CANCELLED]
    assert snap.status.lifecycle is Lifecycle.CANCELLED
    await chat.react(chat.bot_message("📋"), "white_check_mark")
    await app.hub.settled()
    assert (await chat.snapshot()).status.lifecycle is Lifecycle.CANCELLED


async def test_a_reminder_at_half_life_and_an_expiry_at_the_end(make_app) -> None:
    model = ScriptedModel(
        [ScriptedTurn(calls=[ScriptedCall("ask_user", {"question": "Which env?"})])]
    )
    app = await make_app(model)
    chat = Chat(app)
    await app.start()
    await chat.mention("deploy")
    now = datetime.now(UTC)
    sweeper = app.sweeper

    sweeper._clock = lambda: now + timedelta(hours=1)
    assert await sweeper.sweep_once() == 0
    sweeper._clock = lambda: now + timedelta(hours=12, minutes=1)
    assert await sweeper.sweep_once() == 1
    assert await sweeper.sweep_once() == 0  # one reminder only
    await app.hub.settled()
    assert chat.said()[-1] == "⏰ Still waiting for an answer here: Which env?"

    sweeper._clock = lambda: now + timedelta(hours=24, minutes=1)
    assert await sweeper.sweep_once() == 1
    await app.hub.settled()

    assert chat.said()[-1] == (
        "⌛ This request expired and the run stopped here; reply in this thread to start again."
    )
    snap = await chat.snapshot()
    assert [r.state for r in snap.requests] == [RequestState.EXPIRED]
    assert snap.status.lifecycle is Lifecycle.CANCELLED
    await chat.reply("prod")
    assert (
        model.requests[-1] is not None and check_tool_results(model.requests[-1].messages) is None
    )


async def test_a_denied_call_never_runs_and_the_model_is_told_why(
    settings, make_app, tmp_path
) -> None:
    settings.policy = {
        "rules": [
            {
                "tool": "run_command",
                "command_prefix": "make deploy",
                "decision": "deny",
                "reason": "deploys go through CI",
            }
        ]
    }
    marker = tmp_path / "deployed"
    chat, model = await approved_chat(
        make_app,
        [
            ScriptedTurn(
                calls=[ScriptedCall("run_command", {"command": f"make deploy; touch {marker}"})]
            ),
            done("I will leave the deploy to CI."),
        ],
    )

    assert not marker.exists()
    snap = await chat.snapshot()
    assert [r.state for r in snap.tool_calls.values() if r.name == "run_command"] == [
        ToolState.DENIED
    ]
    result = model.requests[-1].messages[-1]["content"][0]
    assert result["is_error"] and result["content"] == "Denied by policy: deploys go through CI"
    assert snap.status.lifecycle is Lifecycle.DONE
    assert any(
        line.startswith("⏳ `make deploy; touch ")
        and line.endswith("` was not run: Denied by policy: deploys go through CI")
        for line in chat.said()
    )


async def test_the_policy_comes_from_threadbot_toml(tmp_path, monkeypatch) -> None:
    from bot.settings import Settings
    from core.policy.policy import Permission

    monkeypatch.chdir(tmp_path)
    (tmp_path / "threadbot.toml").write_text(
        '[[policy.rules]]\ntool = "write_file"\npath_glob = "secrets/**"\ndecision = "ask"\n'
    )
    verdict = (
        Settings()
        .tool_policy()
        .check(
            tool_name="write_file",
            read_only=False,
            arguments={"path": "secrets/key"},
            plan_approved=True,
        )
    )
    assert verdict.decision is Permission.ASK


async def test_a_read_only_call_found_running_after_a_crash_is_run_again(make_app) -> None:
    from core.vocabulary import lifecycle
    from core.vocabulary.entries import AssistantTurn, ToolCall
    from core.vocabulary.journal import Change
    from core.vocabulary.tool_records import ToolCallRecord

    model = ScriptedModel([plan(), done("Listed.")])
    app = await make_app(model)
    chat = Chat(app)
    await app.start()
    await chat.mention("look")
    conversation_id = (await chat.snapshot()).id
    await app.store.journal.commit(
        conversation_id, Change(status=lifecycle.RUNNING, position="executing")
    )
    call = ToolCall(id="toolu_ro", name="list_files", input={})
    seqs = (
        await app.store.journal.commit(
            conversation_id, Change(entries=(AssistantTurn(tool_calls=(call,)),))
        )
    ).seqs
    # what a crash leaves behind: the record says running, no result was stored
    await app.store.journal.commit(
        conversation_id,
        Change(
            tool_calls=(
                ToolCallRecord(
                    tool_use_id="toolu_ro",
                    name="list_files",
                    input={},
                    read_only=True,
                    state=ToolState.RUNNING,
                    turn_seq=seqs[0],
                    index=0,
                ),
            )
        ),
    )

    assert await app.hub.resume_running() == [conversation_id]
    await app.hub.settled()

    snap = await chat.snapshot()
    assert snap.tool_calls["toolu_ro"].state is ToolState.DONE
    assert snap.status.lifecycle is Lifecycle.DONE
    assert check_tool_results(model.requests[-1].messages) is None


async def test_a_lease_held_by_another_instance_holds_the_run_back(make_app) -> None:
    model = ScriptedModel(
        [
            ScriptedTurn(calls=[ScriptedCall("ask_user", {"question": "Which?"})]),
            done("OK."),
        ]
    )
    app = await make_app(model)
    chat = Chat(app)
    await app.start()
    await chat.mention("go")
    conversation_id = (await chat.snapshot()).id
    other = await app.store.leases.acquire_lease(conversation_id, "other-instance", ttl=60)
    assert other is not None

    await chat.reply("this one", settle=False)
    await asyncio.sleep(0.3)
    assert len(model.requests) == 1  # the other instance holds the conversation
    assert await app.store.leases.acquire_lease(conversation_id, "third-instance", ttl=60) is None

    assert await app.store.leases.release_lease(other)
    await app.hub.settled()
    assert len(model.requests) == 2
    assert (await chat.snapshot()).status.lifecycle is Lifecycle.DONE


async def test_a_lease_left_by_a_dead_process_of_this_host_is_taken_over_at_once(make_app) -> None:
    model = ScriptedModel(
        [
            ScriptedTurn(calls=[ScriptedCall("ask_user", {"question": "Which?"})]),
            done("OK."),
        ]
    )
    app = await make_app(model)
    chat = Chat(app)
    await app.start()
    await chat.mention("go")
    conversation_id = (await chat.snapshot()).id
    assert await app.store.leases.acquire_lease(conversation_id, gone_holder(), ttl=3600)

    await chat.reply("this one")  # settles: the lease did not hold it back

    assert len(model.requests) == 2
    assert await app.store.leases.lease_owner(conversation_id) is None


class Probe:
    """A read-only test tool that records when it starts and can wait for another one."""

    def __init__(self, name: str, started: dict[str, asyncio.Event], waits_for: str | None) -> None:
        from core.models.base import ToolKind, ToolSpec

        self.spec = ToolSpec(
            name=name,
            description="probe",
            input_schema={"type": "object"},
            kind=ToolKind.READ_ONLY,
        )
        self._started = started
        self._waits_for = waits_for

    async def run(self, args, ctx):  # type: ignore[no-untyped-def]
        from core.tools.base import ToolOutput

        self._started[self.spec.name].set()
        if self._waits_for:
            await asyncio.wait_for(self._started[self._waits_for].wait(), 5)
        return ToolOutput(content="ok", note=f"{self.spec.name} ran")


async def test_read_only_calls_of_a_turn_run_concurrently(settings) -> None:
    from bot.app import build
    from bot.engines import default_toolbox
    from core.tools.base import Toolbox

    started = {"probe_a": asyncio.Event(), "probe_b": asyncio.Event()}
    tools = list(default_toolbox())
    toolbox = Toolbox(
        [*tools, Probe("probe_a", started, "probe_b"), Probe("probe_b", started, None)]
    )
    model = ScriptedModel(
        [
            plan(),
            ScriptedTurn(calls=[ScriptedCall("probe_a", {}), ScriptedCall("probe_b", {})]),
            done("Both ran."),
        ]
    )
    app = await build(settings, model=model, toolbox=toolbox)
    try:
        chat = Chat(app)
        await app.start()
        await chat.mention("probe")
        await chat.react(chat.bot_message("📋"))
        await app.hub.settled()
        # probe_a waits until probe_b has started: only a concurrent run finishes
        assert "✅ Both ran." in chat.out.getvalue()
        snap = await chat.snapshot()
        assert {r.name: r.state for r in snap.tool_calls.values()}["probe_a"] is ToolState.DONE
    finally:
        await app.close()


async def test_buttons_decide_like_reactions_and_stop_from_the_list(make_app) -> None:
    from conversations.events import ButtonPressed, CommandInvoked, PlatformRef

    model = ScriptedModel(
        [
            plan(),
            ScriptedTurn(
                calls=[
                    ScriptedCall("run_command", {"command": "rm -rf a"}),
                    ScriptedCall("run_command", {"command": "rm -rf b"}),
                ]
            ),
            done("One of two."),
            plan(),
            plan(),
        ]
    )
    app = await make_app(model)
    chat = Chat(app)
    await app.start()
    await chat.mention("clean")
    first = await chat.snapshot()

    async def press(action: str, by: str = "alice") -> None:
        await app.hub.handle(
            ButtonPressed(
                delivery_key=f"b-{action}-{by}",
                ref=chat._ref("x", by),
                author=chat.person(by),
                action=action,
            )
        )
        await app.hub.settled()

    await press(f"approve:{first.requests[0].id}", by="bob")  # bob may not
    assert str((await chat.snapshot()).status) == "waiting(plan_approval)"
    await press(f"approve:{first.requests[0].id}")
    approval = next(r for r in (await chat.snapshot()).requests if r.kind.value == "tool_approval")
    await press(f"deny:{approval.id}:1")
    await press(f"allow:{approval.id}:2")
    assert "✅ One of two." in chat.out.getvalue()
    assert "Only the requester or an approver can decide this, bob." in chat.out.getvalue()

    await chat.reply("and again")  # a second plan waits in the same thread
    await chat.mention("another one")  # a second conversation, also waiting
    ref = PlatformRef(platform="console", channel="console", user="console:alice")
    await app.hub.handle(
        CommandInvoked(delivery_key="stop-list", ref=ref, author=chat.person("alice"), name="stop")
    )
    await app.hub.settled()
    assert "You have 2 active conversations here" in chat.out.getvalue()
    assert "[Stop " in chat.out.getvalue()  # a Stop button for each
    await press(f"stop:{first.id}")
    assert (await app.store.threads.info(first.id)).status.lifecycle is Lifecycle.CANCELLED
    assert len(await app.store.threads.active(platform="console")) == 1


async def test_no_approval_outlives_a_stop(make_app) -> None:
    gate = asyncio.Event()
    blocked = ScriptedTurn(gate=gate, text="never")
    chat, model = await approved_chat(make_app, [blocked, plan()], settle=False)
    await asyncio.wait_for(blocked.started.wait(), 5)
    await chat.stop()
    await chat.app.hub.settled()

    await chat.reply("carry on")  # the requester: after a stop, only they or an approver

    newest = model.requests[-1].messages[-1]
    assert "[threadbot: the planning step]" in str(newest)  # planning again
    assert str((await chat.snapshot()).status) == "waiting(plan_approval)"


async def test_a_failed_run_continues_only_for_the_requester_or_an_approver(make_app) -> None:
    from core.vocabulary.errors import ModelError

    failing = ScriptedTurn(error=ModelError("The model API is overloaded"))
    chat, model = await approved_chat(make_app, [failing, done("Back at it."), plan()])
    assert "⚠️ The model API is overloaded" in chat.out.getvalue()

    await chat.reply("retry")  # alice asked: the approved plan goes on
    assert "run_command" in {t.name for t in model.requests[-1].tools}
    assert "✅ Back at it." in chat.out.getvalue()

    snap = await chat.snapshot()
    assert snap.position == "answered"


async def test_someone_elses_reply_to_a_failed_call_is_a_note_not_a_retry(make_app) -> None:
    from core.vocabulary.errors import ModelError

    failing = ScriptedTurn(error=ModelError("The model API is overloaded"))
    chat, model = await approved_chat(make_app, [failing, done("Back.")])
    asked = len(model.requests)

    await chat.reply("retry", by="bob")

    assert len(model.requests) == asked
    assert str((await chat.snapshot()).status) == "waiting(retry)"
    await chat.react(chat.bot_message("⚠️"), "repeat")  # 🔁 from the requester
    await chat.app.hub.settled()
    assert "✅ Back." in chat.out.getvalue()


async def test_the_turn_cap_asks_to_go_on_and_stop_here_ends_it(settings, make_app) -> None:
    settings.step_turn_limit = 2
    looping = [ScriptedTurn(calls=[ScriptedCall("list_files", {})]) for _ in range(4)]
    chat, model = await approved_chat(make_app, [*looping, ScriptedTurn(text="Finally.")])

    assert str((await chat.snapshot()).status) == "waiting(continue)"
    asked = "⏸ I've used 2 model turns in the executing step without finishing (its turn cap: 2)"
    assert f"{asked} — react" in chat.out.getvalue()
    await chat.react(chat.bot_message("⏸"))  # go on: two more turns, then the cap again
    await chat.app.hub.settled()
    assert str((await chat.snapshot()).status) == "waiting(continue)"
    await chat.react(chat.bot_message("⏸"), "x")
    await chat.app.hub.settled()

    snap = await chat.snapshot()
    assert snap.status.lifecycle is Lifecycle.CANCELLED
    assert chat.said()[-1] == "⏹ Stopped by alice."
    assert check_tool_results(model.requests[-1].messages) is None


async def test_a_reply_the_platform_withheld_is_no_answer(make_app) -> None:
    from adapters.discord.texts import UNREADABLE
    from conversations.events import MessagePosted
    from conversations.texts import PlatformTexts

    model = ScriptedModel([ScriptedTurn(calls=[ScriptedCall("ask_user", {"question": "Which?"})])])
    app = await make_app(model)
    chat = Chat(app)
    # The console never withholds a message's text; Discord does, and says so in these words.
    app.add_texts(PlatformTexts(platform="console", unreadable=UNREADABLE))
    await app.start()
    await chat.mention("go")
    await app.hub.handle(
        MessagePosted(
            delivery_key="withheld",
            ref=chat._ref("w1"),
            author=chat.person("alice"),
            text="",
            unreadable=True,
        )
    )
    await app.hub.settled()

    assert "Message Content intent is off" in chat.said()[-1]
    assert len(model.requests) == 1
    assert str((await chat.snapshot()).status) == "waiting(question)"


async def test_two_stops_at_once_journal_one_stop(make_app) -> None:
    """Both read the conversation running; the second commit finds it ended meanwhile
    (its journal position taken) and stops nothing: one stop, one "Stopped" (on
    PostgreSQL, whose reads do not wait for the writer, both stops were journaled)."""
    gate = asyncio.Event()
    working = ScriptedTurn(text="done", gate=gate)
    chat, _model = await approved_chat(make_app, [working], settle=False)
    await working.started.wait()
    cid = (await chat.snapshot()).id

    stops = await asyncio.gather(
        chat.app.engine.stop(cid, "alice", "U0ALICE001"),
        chat.app.engine.stop(cid, "bob", "U0BOB0001"),
    )
    gate.set()
    await chat.app.hub.settled()

    assert sorted(stops) == [StopOutcome.ALREADY_STOPPED, StopOutcome.STOPPED]
    snap = await chat.snapshot()
    assert snap.status.lifecycle is Lifecycle.CANCELLED
    assert [r.entry.kind for r in snap.journal].count("stop") == 1


async def test_a_start_leaves_the_runs_another_live_instance_holds_to_it(make_app) -> None:
    """A restarted instance resumes the runs nobody runs, and queues no job that would
    wait (polling the store) for each run a live instance on another host holds."""
    from core.vocabulary import lifecycle
    from core.vocabulary.journal import Change

    app = await make_app(ScriptedModel([plan(), plan()]))
    chat = Chat(app)
    await app.start()
    await chat.mention("first")
    await chat.mention("second")
    await app.hub.settled()
    held, orphan = [c.id for c in await app.store.threads.conversations()]
    for cid in (held, orphan):
        await app.store.journal.commit(cid, Change(status=lifecycle.RUNNING))
    elsewhere = await app.store.leases.acquire_lease(held, "other-host:1", ttl=600)
    assert elsewhere is not None

    assert await app.hub.resume_running() == [orphan]
    async with asyncio.timeout(60):  # no job waits here for the lease the other one holds
        await app.hub.settled()
    state = await app.store.leases.lease_state(held)
    assert state is not None and (state.owner, state.epoch) == ("other-host:1", elsewhere.epoch)
