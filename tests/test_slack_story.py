"""The Slack issue's acceptance stories, with the real bolt app and slack-sdk against fakes.

Alice mentions the bot in C0PROJ0001; the bot answers in the thread with a plan
(Approve / Reject buttons, its ✅ and ❌ reactions seeded); she approves with a
reaction (HTTP) or the Approve button (Socket Mode); the model asks a question,
she answers in the thread, the final answer comes. Around that story: the ack
before the model, duplicates and retries, the bot's own echoes, a person who
may not approve, ``/stop`` and the stop word, and a long answer (rate limits and
the status line under them: ``tests/test_delivery_slack.py``). Each test asserts
what the fake Slack received and what the store holds (:mod:`tests.slack_harness`
speaks for the people).
"""

from __future__ import annotations

import asyncio
import re

import aiohttp
import pytest

from adapters.slack.outbound import escape, render
from conversations.events import PlatformRef, PostReply
from core.models.scripted import ScriptedCall, ScriptedModel, ScriptedTurn
from core.vocabulary.lifecycle import Lifecycle
from core.vocabulary.requests import RequestState
from core.vocabulary.verdicts import Approved
from tests.conftest import wait_for
from tests.fakes.slack_api import BOT_ID, BOT_USER_ID, TEAM_ID
from tests.slack_harness import (
    ALICE,
    BOB,
    CHANNEL,
    WAIT,
    Workspace,
    event_body,
    slack_workspace,
)

OUTBOX_KEY = re.compile(r"tb-\d+")
FENCE = re.compile(r"^ {0,3}`{3,}[^`\n]*$", re.MULTILINE)
STATS = re.compile(r"— \d+ tool calls? · (?:\d+m )?\d+s · [\d.]+k? tokens · workflow [a-z0-9_-]+")


def plan(gate: asyncio.Event | None = None) -> ScriptedTurn:
    steps = {"steps": ["Reproduce the flaky login test", "Fix the fixture"]}
    return ScriptedTurn(calls=[ScriptedCall("propose_plan", steps)], gate=gate)


def question() -> ScriptedTurn:
    ask = {"question": "Staging or production database?", "options": ["staging", "prod"]}
    return ScriptedTurn(calls=[ScriptedCall("ask_user", ask)])


def finish(answer: str = "The login test is fixed.") -> ScriptedTurn:
    return ScriptedTurn(calls=[ScriptedCall("finish", {"answer": answer})])


def story() -> ScriptedModel:
    return ScriptedModel([plan(), question(), finish()])


def where(call) -> tuple[str, str, str | None]:
    """``(method, channel, thread_ts or the reacted or edited message ts)`` of a recorded call."""
    args = call.args
    return (
        call.method,
        args.get("channel"),
        args.get("thread_ts") or args.get("timestamp") or args.get("ts"),
    )


def card_statuses(message) -> list[str]:
    """The task cards' statuses of the plan block of ``message`` as Slack shows it now."""
    [card] = [b for b in message["blocks"] if b["type"] == "plan"]
    return [task["status"] for task in card["tasks"]]


def without_step_edits(calls, plan_ts: str) -> list:
    """``calls`` without the edits of the plan's card after its first edit (who approved
    it): the steps' edits, which go at most once a second whenever the run moves a step
    (tests/test_slack_plan_cards.py tells them)."""
    kept, edited = [], False
    for call in calls:
        if call.method == "chat.update" and call.args.get("ts") == plan_ts:
            if edited:
                continue
            edited = True
        kept.append(call)
    return kept


MENTIONED = re.compile(r"<@U[0-9A-Z]+>, here is the answer\.")
"""The last line of a final answer: the requester mentioned (``mention_requester``)."""


def answered(text: str) -> str:
    """The answer in the bot's final message, ``✅ {answer}``, a line of stats, then the
    line that mentions the requester."""
    body, _, mention = text.rpartition("\n")
    body, _, stats = body.rpartition("\n")
    assert body.startswith("✅ ") and STATS.fullmatch(stats) and MENTIONED.fullmatch(mention), text
    return body.removeprefix("✅ ")


def plan_buttons(message) -> dict[str, str]:
    """``{label: action}`` of the buttons under a posted message."""
    return {
        element["text"]["text"]: element["value"]
        for block in message["blocks"]
        if block["type"] == "actions"
        for element in block["elements"]
    }


async def assert_plan_posted(ws: Workspace, root: str) -> dict:
    """The plan is in the thread: one post with metadata, buttons, then two reactions."""
    plan_message = ws.post(root, "📋 Plan (v1)")
    post, *reactions = ws.calls()[:3]
    assert where(post) == ("chat.postMessage", CHANNEL, root)
    assert post.response["ts"] == plan_message["ts"]
    metadata = post.args["metadata"]
    assert metadata["event_type"] == "threadbot_outbox"
    assert OUTBOX_KEY.fullmatch(metadata["event_payload"]["key"])
    outbox = await ws.outbox()
    assert f"tb-{outbox[plan_message['ts']]}" == metadata["event_payload"]["key"]
    snap = await ws.snapshot(root)
    request = snap.requests[0]
    assert plan_buttons(plan_message) == {
        "Approve": f'tb1:{{"k":"approve","r":"{request.id}"}}',
        "Reject": f'tb1:{{"k":"reject","r":"{request.id}"}}',
    }
    assert [(*where(r), r.args["name"]) for r in reactions] == [
        ("reactions.add", CHANNEL, plan_message["ts"], "white_check_mark"),
        ("reactions.add", CHANNEL, plan_message["ts"], "x"),
    ]
    assert str(snap.status) == "waiting(plan_approval)"
    return plan_message


# --- 1 and 2: the story ---------------------------------------------------------------


async def test_the_story_over_http(settings) -> None:
    model = story()
    async with slack_workspace(settings, model, transport="http") as ws:
        said = f"<@{BOT_USER_ID}> please fix the flaky login test"
        forged = ws.mention_body(str(ws.api.add_message(CHANNEL, said)["ts"]), said)
        refused = await ws.deliver("events_api", forged, secret="not-the-signing-secret")
        assert refused.status == 401  # bolt checks the signature
        await ws.settle()
        assert await ws.conversation_ids() == []

        root = await ws.mention("please fix the flaky login test")
        assert len(await ws.conversation_ids()) == 1  # app_mention + message: one conversation
        plan_message = await assert_plan_posted(ws, root)

        await ws.react(plan_message["ts"], "white_check_mark", by=ALICE)
        ask = ws.post(root, "❓ Staging or production database?")
        assert str((await ws.snapshot(root)).status) == "waiting(question)"

        await ws.reply(root, "staging, please")
        answer = ws.post(root, "✅ The login test is fixed.")
        footer, mention = answer["text"].split("\n")[-2:]
        assert footer.endswith(" · workflow default")  # the footer names the workflow
        assert mention == f"<@{ALICE}>, here is the answer."  # she asked

        assert [where(c) for c in without_step_edits(ws.calls(), plan_message["ts"])] == [
            ("chat.postMessage", CHANNEL, root),  # the plan
            ("reactions.add", CHANNEL, plan_message["ts"]),
            ("reactions.add", CHANNEL, plan_message["ts"]),
            ("chat.update", CHANNEL, plan_message["ts"]),  # the plan shows who approved it
            ("chat.postMessage", CHANNEL, root),  # the question
            ("chat.update", CHANNEL, ask["ts"]),  # the question shows the answer, no buttons
            ("chat.postMessage", CHANNEL, root),  # the answer
        ]
        asked = ws.api.message(CHANNEL, ask["ts"])
        assert asked is not None
        assert asked["text"].startswith(f"💬 <@{ALICE}> answered: staging, please\n❓ Staging")
        assert plan_buttons(asked) == {}
        decided = ws.api.message(CHANNEL, plan_message["ts"])
        assert decided is not None
        assert decided["text"].startswith(f"✅ Approved by <@{ALICE}> (plan v1)\n📋 Plan (v1)\n")
        assert plan_buttons(decided) == {}
        assert card_statuses(decided) == ["complete", "complete"]  # the answer completed them
        assert [c.response["ts"] for c in ws.calls("chat.postMessage")] == [
            plan_message["ts"],
            ask["ts"],
            answer["ts"],
        ]
        assert all(c.token == "xoxb-test" for c in ws.calls())
        snap = await ws.snapshot(root)
        assert snap.status.lifecycle is Lifecycle.DONE
        assert snap.requests[0].verdict == Approved()
        assert snap.requests[0].decided_by is not None
        assert snap.requests[0].decided_by.id == ALICE
        answers = [
            (r.entry.author.id, r.entry.text)
            for r in snap.journal
            if r.entry.kind == "user_text" and r.entry.role == "answer"
        ]
        assert answers == [(ALICE, "staging, please")]  # the thread reply answered the question
        assert len(model.requests) == 3


async def test_the_story_over_socket_mode_approved_by_the_button(settings) -> None:
    model = story()
    async with slack_workspace(settings, model, transport="socket") as ws:
        root = await ws.mention("please fix the flaky login test")
        assert len(await ws.conversation_ids()) == 1
        plan_message = await assert_plan_posted(ws, root)

        pressed = await ws.press(plan_message, plan_buttons(plan_message)["Approve"], by=ALICE)
        assert pressed.ack is not None
        ask = ws.post(root, "❓ Staging or production database?")
        await ws.reply(root, "staging, please")
        ws.post(root, "✅ The login test is fixed.")

        assert [where(c) for c in without_step_edits(ws.calls(), plan_message["ts"])] == [
            ("chat.postMessage", CHANNEL, root),
            ("reactions.add", CHANNEL, plan_message["ts"]),
            ("reactions.add", CHANNEL, plan_message["ts"]),
            ("chat.update", CHANNEL, plan_message["ts"]),  # Approved by Alice, no buttons
            ("chat.postMessage", CHANNEL, root),
            ("chat.update", CHANNEL, ask["ts"]),  # answered, no buttons
            ("chat.postMessage", CHANNEL, root),
        ]
        opened = ws.api.calls_of("apps.connections.open")
        assert [c.token for c in opened] == ["xapp-test"]
        assert ws.socket is not None
        kinds = [(e.kind, (e.data or {}).get("type")) for e in ws.socket.log if e.kind != "ack"]
        assert kinds == [
            ("connect", None),
            ("hello", "hello"),
            ("send", "events_api"),  # app_mention
            ("send", "events_api"),  # message
            ("send", "interactive"),  # the Approve button
            ("send", "events_api"),  # the reply
        ]
        sent = [e.envelope_id for e in ws.socket.log if e.kind == "send"]
        assert sorted(ws.socket.acks) == sorted(sent)  # every envelope acked
        snap = await ws.snapshot(root)
        assert snap.status.lifecycle is Lifecycle.DONE
        assert snap.requests[0].verdict == Approved()


# --- 3: the ack first -----------------------------------------------------------------


@pytest.mark.parametrize("transport", ["http", "socket"])
async def test_the_ack_arrives_while_the_model_is_still_blocked(settings, transport) -> None:
    gate = asyncio.Event()
    first = plan(gate)
    async with slack_workspace(settings, ScriptedModel([first]), transport=transport) as ws:
        said = f"<@{BOT_USER_ID}> please fix the flaky login test"
        root = str(ws.api.add_message(CHANNEL, said, user=ALICE)["ts"])

        delivery = await ws.deliver("events_api", ws.mention_body(root, said))

        assert delivery.status == 200  # the HTTP response, or the envelope's ack, is in
        if ws.socket is not None:
            assert delivery.ack == {"envelope_id": ws.socket.entry("send").envelope_id}
        await asyncio.wait_for(first.started.wait(), WAIT)  # the model was asked...
        assert not gate.is_set()  # ...and is still blocked: the ack did not wait for it
        assert ws.calls() == []

        gate.set()
        await ws.settle()
        post = ws.calls("chat.postMessage")[0]
        assert where(post) == ("chat.postMessage", CHANNEL, root)
        assert delivery.seq < post.seq


# --- 4: duplicates, retries, echoes, and who may approve ------------------------------


@pytest.mark.parametrize("transport", ["http", "socket"])
async def test_duplicates_retries_echoes_and_outsiders_change_nothing(settings, transport) -> None:
    model = ScriptedModel([plan(), finish("Done once.")])
    async with slack_workspace(settings, model, transport=transport) as ws:
        said = f"<@{BOT_USER_ID}> please fix the flaky login test"
        root = str(ws.api.add_message(CHANNEL, said, user=ALICE)["ts"])
        mention = ws.mention_body(root, said)
        for retry in (0, 0, 1):  # first delivery, the same again, Slack's retry of it
            assert (await ws.deliver("events_api", mention, retry=retry)).status == 200
        message = ws.message_body(root, said)
        await ws.deliver("events_api", message)
        await ws.deliver("events_api", message, retry=1)
        await ws.settle()

        assert len(await ws.conversation_ids()) == 1
        plan_message = await assert_plan_posted(ws, root)
        assert len(ws.calls("chat.postMessage")) == 1
        assert len(model.requests) == 1
        before = (len(ws.calls()), await ws.snapshot(root))

        # The bot's own plan echoed back as a message event (fixture: bot_id + user, no
        # subtype), and its own seeded reactions echoed back as reaction_added.
        echo = event_body("message_from_self")
        echo["event"].update(
            ts=plan_message["ts"],
            event_ts=plan_message["ts"],
            thread_ts=root,
            text=plan_message["text"],
            user=BOT_USER_ID,
            bot_id=BOT_ID,
        )
        await ws.deliver("events_api", echo)
        for emoji in ("white_check_mark", "x"):
            await ws.deliver(
                "events_api", ws.reaction_body(plan_message["ts"], emoji, by=BOT_USER_ID)
            )
        await ws.settle()

        assert len(ws.calls()) == before[0]
        assert await ws.snapshot(root) == before[1]
        assert len(model.requests) == 1

        # Bob may not approve Alice's plan: told so in the thread, nothing decided.
        await ws.react(plan_message["ts"], "white_check_mark", by=BOB)
        notice = ws.post(root, "Only the requester or an approver can decide this")
        assert f"<@{BOB}>" in notice["text"]
        assert where(ws.calls()[-1]) == ("chat.postMessage", CHANNEL, root)
        snap = await ws.snapshot(root)
        assert snap.requests[0].state is RequestState.OPEN
        assert str(snap.status) == "waiting(plan_approval)"
        assert len(model.requests) == 1

        # Alice's approval, delivered twice, counts once.
        approval = ws.reaction_body(plan_message["ts"], "white_check_mark", by=ALICE)
        await ws.deliver("events_api", approval)
        await ws.deliver("events_api", approval, retry=1)
        await ws.settle()
        assert len(model.requests) == 2
        finals = [
            m["text"]
            for m in ws.posts(root)
            if m["ts"] != plan_message["ts"] and m["text"].startswith("✅")
        ]
        assert [answered(t) for t in finals] == ["Done once."]
        [edit] = without_step_edits(ws.calls("chat.update"), plan_message["ts"])  # one decision
        assert edit.args["text"].startswith(f"✅ Approved by <@{ALICE}> (plan v1)\n")
        assert (await ws.snapshot(root)).status.lifecycle is Lifecycle.DONE
        assert "already decided" not in " ".join(ws.api.posted_texts(CHANNEL))


# --- 5: /stop, the Stop button and the stop word --------------------------------------


async def test_stop_with_one_active_conversation_stops_it(settings) -> None:
    gate = asyncio.Event()
    first = plan(gate)
    async with slack_workspace(settings, ScriptedModel([first])) as ws:
        root = await ws.mention("please fix the flaky login test", settle=False)
        await asyncio.wait_for(first.started.wait(), WAIT)  # the run is in the model

        delivery = await ws.slash("/stop")
        gate.set()
        await ws.settle()

        assert delivery.status == 200
        assert ws.api.posted_texts(CHANNEL, root) == [f"⏹ Stopped by <@{ALICE}>."]
        assert ws.api.ephemerals == []
        assert (await ws.snapshot(root)).status.lifecycle is Lifecycle.CANCELLED


async def test_stop_with_two_active_conversations_lists_them_with_stop_buttons(
    settings,
) -> None:
    async with slack_workspace(settings, ScriptedModel([plan(), plan()])) as ws:
        first = await ws.mention("fix the login test")
        second = await ws.mention("fix the logout test")
        ids = {thread: (await ws.snapshot(thread)).id for thread in (first, second)}

        await ws.slash("/stop")

        [listing] = ws.calls("chat.postEphemeral")
        assert listing.args["channel"] == CHANNEL
        assert listing.args["user"] == ALICE
        [shown] = ws.api.ephemerals
        assert "2 active conversations" in shown["text"]
        stop = 'tb1:{{"k":"stop","c":"{}"}}'.format  # a Stop button's value, by conversation
        stop_buttons = [a for a in plan_buttons(shown).values() if a.startswith('tb1:{"k":"stop"')]
        assert stop_buttons == [stop(ids[first]), stop(ids[second])]
        assert ws.api.posted_texts(CHANNEL, first)[-1].startswith("📋")  # nothing stopped yet

        await ws.press(shown, stop(ids[second]), ephemeral=True)

        assert ws.api.posted_texts(CHANNEL, second)[-1] == f"⏹ Stopped by <@{ALICE}>."
        assert (await ws.snapshot(second)).status.lifecycle is Lifecycle.CANCELLED
        assert str((await ws.snapshot(first)).status) == "waiting(plan_approval)"
        assert not any("Stopped" in t for t in ws.api.posted_texts(CHANNEL, first))


async def test_stop_naming_a_thread_with_no_conversation_answers_in_the_channel(
    settings,
) -> None:
    """``/stop TS`` stops the conversation of thread ``TS``; words that name no thread were
    taken for a ``thread_ts`` of the answer, which Slack would not show anywhere."""
    async with slack_workspace(settings, ScriptedModel([])) as ws:
        delivery = await ws.slash("/stop", "banana")

        assert delivery.status == 200
        assert [where(c) for c in ws.calls()] == [("chat.postEphemeral", CHANNEL, None)]
        assert [e["text"] for e in ws.api.ephemerals] == [
            "There is no conversation in the thread banana."
        ]
        assert await ws.conversation_ids() == []


async def test_stop_with_nothing_active_says_so_to_the_person_only(settings) -> None:
    async with slack_workspace(settings, ScriptedModel([])) as ws:
        delivery = await ws.slash("/stop")

        assert delivery.status == 200
        assert [where(c) for c in ws.calls()] == [("chat.postEphemeral", CHANNEL, None)]
        assert ws.calls()[0].args["user"] == ALICE
        assert [e["text"] for e in ws.api.ephemerals] == ["Nothing you may stop is running here."]
        assert ws.api.posted_texts(CHANNEL) == []
        assert await ws.conversation_ids() == []


async def test_the_word_stop_in_the_thread_stops_the_run(settings) -> None:
    gate = asyncio.Event()
    running = ScriptedTurn(text="never shown", gate=gate)
    model = ScriptedModel([plan(), running])
    async with slack_workspace(settings, model) as ws:
        root = await ws.mention("please fix the flaky login test")
        await ws.deliver("events_api", ws.reaction_body(ws.post(root, "📋")["ts"]))
        await asyncio.wait_for(running.started.wait(), WAIT)  # approved; the model works

        await ws.reply(root, "stop")
        gate.set()
        await ws.settle()

        texts = ws.api.posted_texts(CHANNEL, root)
        assert texts[-1] == f"⏹ Stopped by <@{ALICE}>."
        assert not any("never shown" in t for t in texts)
        assert (await ws.snapshot(root)).status.lifecycle is Lifecycle.CANCELLED


# --- 7: a long answer -----------------------------------------------------------------


def long_answer(size: int = 20_000) -> str:
    """Paragraphs and ```python blocks (one of them long), at least ``size`` characters."""
    parts: list[str] = []
    n = 0
    while len("\n\n".join(parts)) < size:
        n += 1
        if n % 3 == 0:
            lines = 150 if n == 6 else 12
            code = "\n".join(f"    result_{i} = run(step={i})  # part {n}" for i in range(lines))
            parts.append(f"```python\n{code}\n```")
        else:
            parts.append(
                " ".join(f"Sentence {n}.{i} about the flaky login test." for i in range(9))
            )
    return "\n\n".join(parts)


def code_stays_in_blocks(chunk: str) -> bool:
    """Whether every code line of ``chunk`` is inside a fenced block, and no prose is."""
    inside = False
    for line in chunk.split("\n"):
        if FENCE.fullmatch(line):
            inside = not inside
        elif line.strip() and line.startswith("    result_") != inside:
            return False
    return not inside


def without_fences(text: str) -> str:
    """``text`` without its fence lines: what splitting must keep, with the fences it adds."""
    return FENCE.sub("", text)


def words(text: str) -> str:
    """``text`` with every run of whitespace as one space (splits drop whitespace)."""
    return " ".join(text.split())


async def approved_answer(ws: Workspace) -> str:
    root = await ws.mention("please fix the flaky login test")
    await ws.react(ws.post(root, "📋")["ts"])
    return root


async def test_a_long_answer_arrives_whole_split_with_code_fences_intact(settings) -> None:
    settings.file_threshold = 25_000
    answer = long_answer()
    assert len(answer) >= 20_000 and answer.count("```python") >= 5
    assert escape(answer) == answer  # nothing for Slack's escaping to change
    async with slack_workspace(settings, ScriptedModel([plan(), finish(answer)])) as ws:
        root = await approved_answer(ws)

        posts = ws.calls("chat.postMessage")[1:]  # after the plan
        chunks = [p.args["text"] for p in posts]
        assert len(chunks) >= 6
        assert all(where(p) == ("chat.postMessage", CHANNEL, root) for p in posts)
        assert all(len(c) <= 3_900 for c in chunks)
        assert all(code_stays_in_blocks(c) for c in chunks)  # each renders alone, fences balanced
        key = posts[0].args["metadata"]["event_payload"]["key"]
        assert [p.args["metadata"]["event_payload"] for p in posts] == [
            {"key": key, "part": n} for n in range(len(posts))
        ]
        assert any(c.startswith("```python\n") for c in chunks[1:])  # a block was reopened
        stats, mention = chunks[-1].split("\n")[-2:]
        assert STATS.fullmatch(stats) and MENTIONED.fullmatch(mention)
        whole = f"✅ {answer}\n{stats}\n{mention}"
        joined = "\n".join(without_fences(c) for c in chunks)
        assert words(joined) == words(without_fences(whole))
        added = len(FENCE.findall("\n".join(chunks))) - len(FENCE.findall(whole))
        reopened = sum(1 for c in chunks[1:] if re.match(r"```python\n    result_[1-9]", c))
        assert added == 2 * reopened > 0  # only a close and a reopen per block cut in two
        assert ws.api.posted_texts(CHANNEL, root)[1:] == chunks
        assert ws.calls("files.completeUploadExternal") == []
        assert (await ws.snapshot(root)).status.lifecycle is Lifecycle.DONE


async def test_a_long_answer_past_the_file_threshold_goes_up_as_a_file(settings) -> None:
    assert settings.file_threshold == 12_000
    answer = long_answer()
    async with slack_workspace(settings, ScriptedModel([plan(), finish(answer)])) as ws:
        root = await approved_answer(ws)

        plan_ts = ws.calls("chat.postMessage")[0].response["ts"]
        assert [c.method for c in without_step_edits(ws.calls(), plan_ts)][3:] == [
            "chat.update",  # the plan shows who approved it
            "files.getUploadURLExternal",
            "files.completeUploadExternal",
        ]
        [complete] = ws.calls("files.completeUploadExternal")
        assert (complete.args["channel_id"], complete.args["thread_ts"]) == (CHANNEL, root)
        [uploaded] = ws.api.files.values()
        assert uploaded.content is not None
        text = uploaded.content.decode()
        assert answered(text) == answer
        assert (uploaded.channel, uploaded.thread_ts) == (CHANNEL, root)
        shown = ws.api.thread(CHANNEL, root)[-1]
        assert shown["files"][0]["id"] == uploaded.id
        assert len(ws.calls("chat.postMessage")) == 1  # the plan only
        assert (await ws.snapshot(root)).status.lifecycle is Lifecycle.DONE


async def test_a_long_plan_is_posted_as_messages_that_keep_its_buttons(settings) -> None:
    steps = [
        f"Step {n}: check the login fixture and how it shares sessions. " * 4 for n in range(60)
    ]
    model = ScriptedModel([ScriptedTurn(calls=[ScriptedCall("propose_plan", {"steps": steps})])])
    model.add(finish("Done."))
    assert len("\n".join(steps)) > settings.file_threshold
    async with slack_workspace(settings, model) as ws:
        root = await ws.mention("please fix the flaky login test")

        parts = ws.posts(root)
        assert len(parts) >= 4 and ws.calls("files.completeUploadExternal") == []
        assert [bool(plan_buttons(p)) for p in parts] == [False] * (len(parts) - 1) + [True]
        last = parts[-1]["ts"]
        assert ws.api.reactions == [(CHANNEL, last, "white_check_mark"), (CHANNEL, last, "x")]
        await ws.react(last, "white_check_mark")
        assert ws.api.posted_texts(CHANNEL, root)[-1].startswith("✅ Done.")


# --- when Slack fails part-way: no message twice, none lost --------------------------


async def test_a_plan_whose_reaction_could_not_be_seeded_is_posted_once(settings) -> None:
    async with slack_workspace(settings, story()) as ws:
        ws.api.fail("reactions.add", "too_many_reactions", times=1)
        root = await ws.mention("please fix the flaky login test")

        [plan_post] = ws.calls("chat.postMessage")
        plan_ts = plan_post.response["ts"]
        assert ws.api.reactions == [(CHANNEL, plan_ts, "x")]  # the other seed still went on
        assert plan_ts in await ws.outbox()  # so a reaction on it finds the conversation
        await ws.react(plan_ts, "white_check_mark")
        assert ws.api.posted_texts(CHANNEL, root)[-1].startswith("❓ Staging")


async def test_a_post_whose_answer_was_lost_is_found_not_posted_again(
    settings, monkeypatch
) -> None:
    async with slack_workspace(settings, story()) as ws:
        real = ws.adapter.post_client.api_call
        lost: list[str] = []

        async def answer_lost(method, **kwargs):
            response = await real(method, **kwargs)
            if method == "chat.postMessage" and not lost:
                lost.append(response["ts"])  # Slack posted it; the connection dropped
                raise aiohttp.ClientConnectionError("connection reset by peer")
            return response

        monkeypatch.setattr(ws.adapter.post_client, "api_call", answer_lost)
        root = await ws.mention("please fix the flaky login test")
        await wait_for(lambda: len(ws.api.reactions) == 2)
        await ws.settle()

        assert [c.method for c in ws.calls()] == [
            "chat.postMessage",
            "conversations.replies",  # the retry looks for it by its outbox key first
            "reactions.add",
            "reactions.add",
        ]
        assert ws.api.posted_texts(CHANNEL, root) == [ws.post(root, "📋")["text"]]
        assert lost[0] in await ws.outbox()
        await ws.react(lost[0], "white_check_mark")  # a reaction on it finds the plan...
        assert ws.api.posted_texts(CHANNEL, root)[-1].startswith("❓ Staging")  # ...delivered


async def test_a_long_reply_sent_again_after_a_crash_posts_only_its_missing_parts(
    settings,
) -> None:
    settings.file_threshold = 25_000
    async with slack_workspace(settings, ScriptedModel([])) as ws:
        root = str(ws.api.add_message(CHANNEL, "<@U0AGTBOT01> hi", user=ALICE)["ts"])
        thread = PlatformRef(platform="slack", workspace=TEAM_ID, channel=CHANNEL, thread=root)
        reply = PostReply(ref=thread, text=long_answer(), reactions=("white_check_mark",))
        parts = render(reply, idempotency_key="tb-7")
        assert len(parts) >= 4
        for call in parts[:2]:  # the process died after two parts were posted
            await ws.adapter.client.api_call(call.method, json=call.args)

        ts = await ws.adapter.send(reply, idempotency_key="tb-7", maybe_sent=True)

        posted = ws.calls("chat.postMessage")
        assert [p.args["metadata"]["event_payload"]["part"] for p in posted] == list(
            range(len(parts))
        )
        assert [p.args["text"] for p in posted] == [c.args["text"] for c in parts]
        assert ts == posted[-1].response["ts"]
        assert ws.api.reactions == [(CHANNEL, ts, "white_check_mark")]

        again = await ws.adapter.send(reply, idempotency_key="tb-7", maybe_sent=True)
        assert again == ts
        assert len(ws.calls("chat.postMessage")) == len(parts)  # nothing posted twice


async def test_a_long_answer_uploaded_before_a_crash_is_not_uploaded_again(settings) -> None:
    async with slack_workspace(settings, ScriptedModel([])) as ws:
        root = str(ws.api.add_message(CHANNEL, "<@U0AGTBOT01> hi", user=ALICE)["ts"])
        thread = PlatformRef(platform="slack", workspace=TEAM_ID, channel=CHANNEL, thread=root)
        answer = PostReply(ref=thread, text="✅ a < b & c\n" + long_answer())

        await ws.adapter.send(answer, idempotency_key="tb-9")
        await ws.adapter.send(answer, idempotency_key="tb-9", maybe_sent=True)

        assert len(ws.calls("files.completeUploadExternal")) == 1
        [uploaded] = ws.api.files.values()
        assert uploaded.content == answer.text.encode()
        assert uploaded.initial_comment is not None
        assert uploaded.initial_comment.startswith("✅ a &lt; b &amp; c\n")  # escaped as text


# --- other bots, and the stop-sign reaction ----------------------------------------

OTHER_BOT_USER = "U0OTHBOT01"


def from_other_bot(body: dict) -> dict:
    body["event"]["bot_id"] = "B0OTHBOT01"
    body["event"]["bot_profile"] = {"app_id": "A0OTHAPP01"}
    return body


async def test_another_bots_mention_is_ignored_by_default(settings) -> None:
    model = ScriptedModel([plan()])
    async with slack_workspace(settings, model) as ws:
        said = f"<@{BOT_USER_ID}> deploy everything"
        ts = str(ws.api.add_message(CHANNEL, said, user=OTHER_BOT_USER)["ts"])
        await ws.deliver("events_api", from_other_bot(ws.mention_body(ts, said, by=OTHER_BOT_USER)))
        await ws.settle()

        assert await ws.conversation_ids() == []
        assert model.requests == []


async def test_allowed_bots_are_capped_per_thread(settings) -> None:
    settings.allow_bots = True
    settings.bot_thread_cap = 2
    model = ScriptedModel([plan(), plan(), plan()])
    async with slack_workspace(settings, model) as ws:
        said = f"<@{BOT_USER_ID}> check the build"
        root = str(ws.api.add_message(CHANNEL, said, user=OTHER_BOT_USER)["ts"])
        await ws.deliver(
            "events_api", from_other_bot(ws.mention_body(root, said, by=OTHER_BOT_USER))
        )
        await ws.settle()
        for n in range(3):  # the other bot keeps answering the plan: a loop in the making
            text = f"revise it, round {n}"
            ts = str(ws.api.add_message(CHANNEL, text, user=OTHER_BOT_USER, thread_ts=root)["ts"])
            body = ws.message_body(ts, text, by=OTHER_BOT_USER, thread=root)
            await ws.deliver("events_api", from_other_bot(body))
            await ws.settle()

        assert len(await ws.conversation_ids()) == 1
        assert len(model.requests) == 2  # the mention and one reply: the cap is two per thread


async def test_a_stop_sign_on_a_bot_message_stops_the_run(settings) -> None:
    gate = asyncio.Event()
    first = plan()
    blocked = ScriptedTurn(gate=gate, calls=[ScriptedCall("list_files", {})])
    async with slack_workspace(settings, ScriptedModel([first, blocked])) as ws:
        root = await ws.mention("tidy up")
        plan_message = ws.post(root, "Plan (v1)")
        await ws.deliver("events_api", ws.reaction_body(plan_message["ts"]))
        await asyncio.wait_for(blocked.started.wait(), WAIT)

        await ws.deliver("events_api", ws.reaction_body(plan_message["ts"], "octagonal_sign"))
        gate.set()
        await ws.settle()

        snap = await ws.snapshot(root)
        assert snap.status.lifecycle is Lifecycle.CANCELLED
        assert any("⏹ Stopped by" in text for text in ws.api.posted_texts(CHANNEL, root))
