"""Streamed answers on Slack: the answer shows while the model writes it, and arrives whole,
once (docs/architecture.md "Streamed answers").

The real bolt app and slack-sdk against the fakes (:mod:`tests.slack_harness`); the
scripted model writes ``finish``'s input in pieces and waits after the first
(``ScriptedTurn.between``) until the test saw the stream start, so what the fake
recorded (each start, append and stop, the message as it is now) says what a person
saw.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic import SecretStr

from conversations.events import TOO_LONG
from conversations.outbox._previews import OPENING, WRITING
from core.models.scripted import ScriptedCall, ScriptedModel, ScriptedTurn
from core.vocabulary.errors import ModelError
from tests.conftest import wait_for
from tests.fakes.anthropic_server import FakeAnthropicServer, Reply, text, tool_use
from tests.fakes.slack_api import TEAM_ID, FakeSlackApi
from tests.slack_harness import ALICE, BOB, CHANNEL, WAIT, Workspace, slack_workspace

ANSWER = (
    "The session fixture was shared across tests, so a logout in one test ended "
    "another test's session. Each test now gets its own session; ten runs pass."
)
SECRET = "sk-ant-secret-0123456789"
STREAM_METHODS = ("chat.startStream", "chat.appendStream", "chat.stopStream")


def writing(answer: str, *, chunk: int) -> tuple[ScriptedTurn, asyncio.Event]:
    """A turn that writes ``finish``'s input ``chunk`` characters at a time, waiting after
    the first piece until the event is set."""
    between = asyncio.Event()
    call = ScriptedCall("finish", {"answer": answer})
    return ScriptedTurn(calls=[call], chunk=chunk, between=between), between


async def settled(ws: Workspace, root: str) -> None:
    """Wait until nothing is pending and the thread's session says it has answered."""

    async def done() -> bool:
        pending = [r for r in await ws.app.store.outbox.rows() if r.state == "pending"]
        return not pending and ws.api.session_statuses(CHANNEL, root)[-1:] == ["active"]

    await wait_for(done, seconds=WAIT * 6)


def answers(ws: Workspace, root: str) -> list[dict[str, Any]]:
    """The bot's messages in the thread that hold an answer."""
    return [m for m in ws.posts(root) if m.get("text", "").startswith(OPENING)]


async def started(ws: Workspace) -> str:
    """Wait for the stream's start; its message's ts."""
    await wait_for(lambda: [c for c in ws.calls("chat.startStream") if c.ok], seconds=WAIT * 6)
    [start] = ws.calls("chat.startStream")
    return str(start.response["ts"])


async def test_a_streamed_answer_arrives_whole_once(settings) -> None:
    turn, between = writing(ANSWER, chunk=24)
    async with slack_workspace(settings, ScriptedModel([turn])) as ws:
        root = await ws.mention("why do the login tests fail?", settle=False)
        ts = await started(ws)
        shown = ws.api.message(CHANNEL, ts)
        assert shown is not None and shown["text"] == OPENING + "The session "  # as it is written
        between.set()
        await settled(ws, root)

        [answer] = answers(ws, root)  # one message holds the answer
        assert answer["ts"] == ts
        stream = ws.api.streams[ts]
        assert stream["state"] == "stopped"
        assert "".join(stream["chunks"]) == answer["text"]  # the chunks join to the answer
        assert answer["text"].split("\n")[0] == OPENING + ANSWER
        assert answer["text"].endswith(f"<@{ALICE}>, here is the answer.")
        [start] = ws.calls("chat.startStream")
        assert start.args["thread_ts"] == root
        assert (start.args["recipient_user_id"], start.args["recipient_team_id"]) == (
            ALICE,
            TEAM_ID,
        )
        assert not [c for c in ws.calls("chat.postMessage") if OPENING in c.args["text"]]
        # The answer's row is sent: its key in the message's metadata, its ts stored.
        [stop] = ws.calls("chat.stopStream")
        rows = await ws.outbox()
        assert stop.args["metadata"]["event_payload"]["key"] == f"tb-{rows[ts]}"
        # the feedback buttons at the bottom of the finished stream, as Slack shows them
        [feedback] = stop.args["blocks"]
        assert feedback["type"] == "context_actions"
        assert [e["type"] for e in feedback["elements"]] == ["feedback_buttons"]
        assert answer["blocks"] == stop.args["blocks"]
        # the session is active after the answer, processing before the stream
        assert ws.api.session_statuses(CHANNEL, root) == ["processing", "active"]


async def test_a_stream_that_slack_ends_midway_still_arrives_whole_once(settings) -> None:
    turn, between = writing(ANSWER, chunk=24)
    async with slack_workspace(settings, ScriptedModel([turn])) as ws:
        root = await ws.mention("why do the login tests fail?", settle=False)
        ts = await started(ws)
        ws.api.expire_streams()  # a long run: Slack ends the stream
        between.set()
        await settled(ws, root)

        refused = [c for c in ws.calls("chat.appendStream", "chat.stopStream") if not c.ok]
        assert refused and {c.response["error"] for c in refused} == {
            "message_not_in_streaming_state"
        }
        [answer] = answers(ws, root)  # edited into the streamed message, not posted again
        assert answer["ts"] == ts and ws.api.streams[ts]["state"] == "expired"
        assert answer["text"].split("\n")[0] == OPENING + ANSWER
        assert answer["text"].endswith(f"<@{ALICE}>, here is the answer.")
        [update] = [c for c in ws.calls("chat.update") if c.args["ts"] == ts]
        assert update.args["metadata"]["event_payload"]["key"] == f"tb-{(await ws.outbox())[ts]}"
        assert update.args["blocks"][-1]["type"] == "context_actions"  # feedback kept


async def test_a_secret_split_across_two_pieces_is_never_shown(settings) -> None:
    settings.anthropic_api_key = SecretStr(SECRET)  # one of the bot's secrets (unused here)
    answer = f"The key {SECRET} leaked in the log."
    first = '{"answer": "The key sk-ant-sec'  # the first piece ends inside the secret
    turn, between = writing(answer, chunk=len(first))
    async with slack_workspace(settings, ScriptedModel([turn])) as ws:
        root = await ws.mention("what leaked?", settle=False)
        ts = await started(ws)
        between.set()
        await settled(ws, root)

        stream = ws.api.streams[ts]
        assert stream["chunks"][0] == OPENING + "The key "  # the secret's start held back
        [shown] = answers(ws, root)
        assert "".join(stream["chunks"]) == shown["text"]
        assert shown["text"].split("\n")[0] == (
            f"{OPENING}The key [redacted ANTHROPIC_API_KEY] leaked in the log."
        )
        sent = [str(c.args) for c in ws.api.calls]
        assert not any("sk-ant" in args for args in sent)  # not even its start


async def test_an_answer_past_the_limit_is_closed_with_a_note_and_posted_as_a_file(
    settings,
) -> None:
    settings.file_threshold = 300
    long_answer = " ".join(f"Line {n} of the findings." for n in range(40))
    turn, between = writing(long_answer, chunk=40)
    async with slack_workspace(settings, ScriptedModel([turn])) as ws:
        root = await ws.mention("tell me everything", settle=False)
        ts = await started(ws)
        between.set()
        await settled(ws, root)

        stream = ws.api.streams[ts]
        assert stream["state"] == "stopped" and stream["chunks"][-1] == TOO_LONG
        assert len("".join(stream["chunks"])) <= 300
        [uploaded] = ws.api.files.values()  # the whole answer, as a file, as before
        assert uploaded.content is not None and long_answer in uploaded.content.decode()


async def test_a_restart_in_the_middle_of_a_stream_leaves_one_whole_answer(
    sqlite_settings,
) -> None:
    settings = sqlite_settings
    settings.shutdown_grace = 0.1  # the first bot does not wait for its model
    turn, _never = writing(ANSWER, chunk=24)  # the first bot stops half way through
    async with FakeSlackApi() as api:
        async with slack_workspace(settings, ScriptedModel([turn]), api=api) as ws:
            root = await ws.mention("why do the login tests fail?", settle=False)
            ts = await started(ws)
        assert api.streams[ts]["state"] == "streaming"  # left open, half an answer in it

        again = ScriptedModel([ScriptedTurn(calls=[ScriptedCall("finish", {"answer": ANSWER})])])
        async with slack_workspace(settings, again, api=api) as ws:
            await settled(ws, root)

            [answer] = answers(ws, root)  # the stream left open holds the answer, whole
            assert answer["ts"] == ts
            assert answer["text"].split("\n")[0] == OPENING + ANSWER
            assert answer["text"].endswith(f"<@{ALICE}>, here is the answer.")
            assert api.streams[ts]["state"] == "stopped"  # the restart closed it
            assert len(api.calls_of("chat.startStream")) == 1
            [update] = [c for c in api.calls_of("chat.update") if c.args["ts"] == ts]
            assert (
                update.args["metadata"]["event_payload"]["key"] == f"tb-{(await ws.outbox())[ts]}"
            )


async def test_the_real_clients_deltas_stream_the_answer_into_the_thread(settings) -> None:
    gate = asyncio.Event()
    reply = Reply(
        content=[tool_use("toolu_01", "finish", {"answer": ANSWER})], gate_after=4, gate=gate
    )  # message_start, the block's start, a ping, the first third of its input: then wait
    async with FakeAnthropicServer([reply]) as model_api:
        settings.anthropic_api_key = SecretStr("sk-ant-stream-test")
        settings.anthropic_base_url = model_api.base_url
        async with slack_workspace(settings, None) as ws:
            root = await ws.mention("why do the login tests fail?", settle=False)
            ts = await started(ws)
            first = ws.api.message(CHANNEL, ts)
            assert first is not None and OPENING + ANSWER != first["text"]
            assert (OPENING + ANSWER).startswith(first["text"])  # half written, shown
            gate.set()
            await settled(ws, root)

            [answer] = answers(ws, root)
            assert answer["ts"] == ts
            assert "".join(ws.api.streams[ts]["chunks"]) == answer["text"]
            assert answer["text"].split("\n")[0] == OPENING + ANSWER


async def test_a_stop_while_the_answer_is_written_closes_its_stream_as_it_is(settings) -> None:
    turn, between = writing(ANSWER, chunk=24)
    async with slack_workspace(settings, ScriptedModel([turn])) as ws:
        root = await ws.mention("why do the login tests fail?", settle=False)
        ts = await started(ws)
        await ws.slash("/stop")
        between.set()
        await ws.settle()
        await wait_for(lambda: ws.api.session_statuses(CHANNEL, root)[-1:] == ["closed"])

        stream = ws.api.streams[ts]
        assert stream["state"] == "stopped"  # closed as it was, before the stop's message
        assert "".join(stream["chunks"]) == OPENING + "The session "
        texts = ws.api.posted_texts(CHANNEL, root)
        assert texts == [OPENING + "The session ", f"⏹ Stopped by <@{ALICE}>."]
        [stop] = ws.calls("chat.stopStream")
        assert stop.seq < ws.calls("chat.postMessage")[-1].seq
        assert stop.args["metadata"]["event_type"] == "threadbot_stream"  # never taken over


async def test_feedback_on_a_streamed_answer_is_stored_with_its_conversation(settings) -> None:
    turn, between = writing(ANSWER, chunk=24)
    async with slack_workspace(settings, ScriptedModel([turn])) as ws:
        root = await ws.mention("why do the login tests fail?", settle=False)
        ts = await started(ws)
        between.set()
        await settled(ws, root)

        held = ws.api.message(CHANNEL, ts)  # the finished stream, its buttons at the bottom
        assert held is not None
        [element] = held["blocks"][-1]["elements"]
        await ws.press(held, element["negative_button"]["value"], by=BOB)

        snap = await ws.snapshot(root)
        [given] = await ws.app.store.feedback.of(snap.id)
        assert (given.user_id, given.positive) == (BOB, False)


async def test_a_restart_whose_run_then_fails_closes_the_stream_left_open(
    sqlite_settings,
) -> None:
    settings = sqlite_settings
    settings.shutdown_grace = 0.1
    turn, _never = writing(ANSWER, chunk=24)
    async with FakeSlackApi() as api:
        async with slack_workspace(settings, ScriptedModel([turn]), api=api) as ws:
            root = await ws.mention("why do the login tests fail?", settle=False)
            ts = await started(ws)

        broken = ScriptedTurn(error=ModelError("The model API rejected it", retryable=False))
        async with slack_workspace(settings, ScriptedModel([broken]), api=api) as ws:
            await wait_for(
                lambda: any(t.startswith("⚠️") for t in api.posted_texts(CHANNEL, root)),
                seconds=WAIT * 6,
            )
            await wait_for(lambda: api.streams[ts]["state"] == "stopped", seconds=WAIT * 6)

            [stop] = api.calls_of("chat.stopStream")  # closed as it was, before the failure
            failure = [c for c in api.calls_of("chat.postMessage") if "⚠️" in c.args["text"]]
            assert stop.seq < failure[0].seq
            assert api.posted_texts(CHANNEL, root)[0] == OPENING + "The session "


# --- a turn's text: its progress note, or the answer ----------------------------------

PROSE = "I will list the workspace's files first, then read the fixture of the failing test."


def prose(text: str, *calls: ScriptedCall) -> tuple[ScriptedTurn, asyncio.Event]:
    """A turn that writes ``text`` 20 characters at a time, then ``calls``, waiting after
    the first piece until the event is set."""
    between = asyncio.Event()
    return ScriptedTurn(text=text, calls=calls, chunk=20, between=between), between


def said(ws: Workspace, root: str, text: str) -> list[dict[str, Any]]:
    """The bot's messages in the thread that hold ``text``."""
    return [m for m in ws.posts(root) if text in m.get("text", "")]


def finishing(answer: str) -> ScriptedTurn:
    return ScriptedTurn(calls=[ScriptedCall("finish", {"answer": answer})])


async def test_a_turns_text_streams_and_becomes_its_progress_note(settings) -> None:
    turn, between = prose(PROSE, ScriptedCall("list_files", {}))
    async with slack_workspace(settings, ScriptedModel([turn, finishing(ANSWER)])) as ws:
        root = await ws.mention("what is in the workspace? workflow=chat", settle=False)
        ts = await started(ws)
        shown = ws.api.message(CHANNEL, ts)
        assert shown is not None and shown["text"] == WRITING + PROSE[:20]  # as it is written
        between.set()
        await settled(ws, root)

        [note] = said(ws, root, PROSE)  # the streamed message is the note, whole, once
        assert note["ts"] == ts and note["text"] == WRITING + PROSE
        stream = ws.api.streams[ts]
        assert stream["state"] == "stopped"
        assert "".join(stream["chunks"]) == note["text"]
        assert not [c for c in ws.calls("chat.postMessage") if PROSE in c.args["text"]]
        [stop] = [c for c in ws.calls("chat.stopStream") if c.args["ts"] == ts]
        assert stop.args["metadata"]["event_payload"]["key"] == f"tb-{(await ws.outbox())[ts]}"
        [answer] = answers(ws, root)  # the answer after it, in a message of its own
        assert answer["ts"] != ts and answer["text"].split("\n")[0] == OPENING + ANSWER
        order = [m["ts"] for m in ws.posts(root)]
        assert order.index(ts) < order.index(answer["ts"])


async def test_a_reply_in_prose_where_a_call_is_due_streams_and_becomes_its_note(
    settings,
) -> None:
    turn, between = prose(PROSE)  # the chat workflow's answer is finish's: a nudge follows
    async with slack_workspace(settings, ScriptedModel([turn, finishing(ANSWER)])) as ws:
        root = await ws.mention("why do the login tests fail? workflow=chat", settle=False)
        ts = await started(ws)
        between.set()
        await settled(ws, root)

        [note] = said(ws, root, PROSE)
        assert note["ts"] == ts and note["text"] == WRITING + PROSE
        texts = [m["text"] for m in ws.posts(root)]
        reminded = next(i for i, t in enumerate(texts) if t.startswith("↩️"))
        assert texts.index(note["text"]) < reminded
        [answer] = answers(ws, root)
        assert answer["text"].split("\n")[0] == OPENING + ANSWER


async def test_a_turn_with_text_and_finish_streams_the_note_then_the_answer(settings) -> None:
    turn, between = prose(PROSE, ScriptedCall("finish", {"answer": ANSWER}))
    async with slack_workspace(settings, ScriptedModel([turn])) as ws:
        root = await ws.mention("why do the login tests fail? workflow=chat", settle=False)
        ts = await started(ws)
        between.set()
        await settled(ws, root)

        [note] = said(ws, root, PROSE)
        [answer] = answers(ws, root)
        assert note["ts"] == ts and note["text"] == WRITING + PROSE
        assert answer["text"].split("\n")[0] == OPENING + ANSWER
        order = [m["ts"] for m in ws.posts(root)]
        assert order.index(note["ts"]) < order.index(answer["ts"])
        assert not [c for c in ws.calls("chat.postMessage") if PROSE in c.args["text"]]
        assert all(state["state"] == "stopped" for state in ws.api.streams.values())


async def test_in_the_status_mode_the_streamed_note_stands_alone(settings) -> None:
    settings.progress_mode = "status"
    turn, between = prose(PROSE, ScriptedCall("list_files", {}))
    async with slack_workspace(settings, ScriptedModel([turn, finishing(ANSWER)])) as ws:
        root = await ws.mention("what is in the workspace? workflow=chat", settle=False)
        ts = await started(ws)
        between.set()
        await settled(ws, root)

        [note] = said(ws, root, PROSE)
        assert note["ts"] == ts and note["text"] == WRITING + PROSE
        assert ws.api.streams[ts]["state"] == "stopped"
        [answer] = answers(ws, root)
        assert answer["text"].split("\n")[0] == OPENING + ANSWER


async def test_the_real_clients_text_deltas_stream_the_turns_text(settings) -> None:
    gate = asyncio.Event()
    first = Reply(
        content=[text(PROSE), tool_use("toolu_01", "list_files", {})], gate_after=5, gate=gate
    )  # message_start, the text block's start, a ping, two words: then wait
    then = Reply(content=[tool_use("toolu_02", "finish", {"answer": ANSWER})])
    async with FakeAnthropicServer([first, then]) as model_api:
        settings.anthropic_api_key = SecretStr("sk-ant-stream-test")
        settings.anthropic_base_url = model_api.base_url
        async with slack_workspace(settings, None) as ws:
            root = await ws.mention("what is in the workspace? workflow=chat", settle=False)
            ts = await started(ws)
            shown = ws.api.message(CHANNEL, ts)
            assert shown is not None and WRITING + PROSE != shown["text"]
            assert (WRITING + PROSE).startswith(shown["text"])  # half written, shown
            gate.set()
            await settled(ws, root)

            [note] = said(ws, root, PROSE)
            assert note["ts"] == ts and note["text"] == WRITING + PROSE
            assert "".join(ws.api.streams[ts]["chunks"]) == note["text"]
            [answer] = answers(ws, root)
            assert answer["text"].split("\n")[0] == OPENING + ANSWER
