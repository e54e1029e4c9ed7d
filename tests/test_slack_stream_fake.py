"""The Slack fake's streaming methods, driven by the real slack-sdk: what the fixtures
(``tests/fixtures/slack/agent/``, Slack's documented shapes) send is taken and answered
as Slack does, a stream Slack ended answers ``message_not_in_streaming_state``."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.streams import SlackStreams
from adapters.slack.teams import TeamClients
from adapters.slack.web import WebClients
from conversations.events import Button, PlatformRef, PostReply, StreamedPreview
from tests.fakes.slack_api import FakeSlackApi

AGENT = Path(__file__).parent / "fixtures" / "slack" / "agent"
CHANNEL = "C0PROJ0001"
ROOT = "1717171717.000100"


def payload(name: str) -> dict[str, Any]:
    return dict(json.loads((AGENT / f"{name}.json").read_text())["payload"])


@pytest.fixture
async def api() -> AsyncIterator[FakeSlackApi]:
    async with FakeSlackApi() as fake:
        fake.add_message(CHANNEL, text="<@U0AGTBOT01> why do the tests fail?", ts=ROOT)
        yield fake


def client(api: FakeSlackApi) -> AsyncWebClient:
    return AsyncWebClient(base_url=api.base_url, token="xoxb-test")


async def test_the_fixtures_stream_one_message_into_the_thread(api: FakeSlackApi) -> None:
    web = client(api)
    start = payload("chat_startStream_request")
    started = await web.chat_startStream(**start)
    expected = payload("chat_startStream_response")
    assert started["ok"] and set(started.data) == set(expected)  # type: ignore[arg-type]
    ts = started["ts"]
    append = {**payload("chat_appendStream_request"), "ts": ts}
    await web.chat_appendStream(**append)
    stop = {**payload("chat_stopStream_request"), "ts": ts}
    await web.chat_stopStream(**stop)

    text = start["markdown_text"] + append["markdown_text"] + stop["markdown_text"]
    message = api.message(CHANNEL, ts)
    assert message is not None and message["text"] == text
    assert message["thread_ts"] == ROOT and message["metadata"] == stop["metadata"]
    assert message["blocks"] == stop["blocks"]
    assert api.streams[ts]["chunks"] == [
        start["markdown_text"],
        append["markdown_text"],
        stop["markdown_text"],
    ]
    assert api.streams[ts]["state"] == "stopped"
    assert api.posted_texts(CHANNEL, ROOT)[-1] == text
    assert [c.method for c in api.calls[-3:]] == [
        "chat.startStream",
        "chat.appendStream",
        "chat.stopStream",
    ]
    with pytest.raises(SlackApiError) as stopped:  # a stopped stream takes nothing more
        await web.chat_appendStream(channel=CHANNEL, ts=ts, markdown_text="more")
    assert stopped.value.response["error"] == "message_not_in_streaming_state"


async def test_a_stream_the_fake_ends_midway_answers_as_slack_does(api: FakeSlackApi) -> None:
    web = client(api)
    api.stream_expiry = 1
    started = await web.chat_startStream(
        channel=CHANNEL,
        thread_ts=ROOT,
        recipient_user_id="U0ALICE001",
        recipient_team_id="T0AGT00001",
        markdown_text="One, ",
    )
    ts = started["ts"]
    await web.chat_appendStream(channel=CHANNEL, ts=ts, markdown_text="two, ")
    with pytest.raises(SlackApiError) as ended:
        await web.chat_appendStream(channel=CHANNEL, ts=ts, markdown_text="three.")
    assert ended.value.response.data == payload("chat_appendStream_expired_response")
    with pytest.raises(SlackApiError):
        await web.chat_stopStream(channel=CHANNEL, ts=ts, markdown_text="three.")
    assert api.streams[ts]["state"] == "expired"
    # What was streamed stays, and the bot may edit its message as any other.
    await web.chat_update(channel=CHANNEL, ts=ts, text="One, two, three.")
    assert api.posted_texts(CHANNEL, ROOT)[-1] == "One, two, three."


async def test_expire_streams_ends_the_open_ones_and_a_channel_needs_a_recipient(
    api: FakeSlackApi,
) -> None:
    web = client(api)
    with pytest.raises(SlackApiError) as refused:
        await web.chat_startStream(channel=CHANNEL, thread_ts=ROOT, markdown_text="Hi")
    assert refused.value.response["error"] == "invalid_arguments"
    started = await web.chat_startStream(
        channel=CHANNEL,
        thread_ts=ROOT,
        recipient_user_id="U0ALICE001",
        recipient_team_id="T0AGT00001",
    )
    api.expire_streams()
    with pytest.raises(SlackApiError) as ended:
        await web.chat_stopStream(channel=CHANNEL, ts=started["ts"])
    assert ended.value.response["error"] == "message_not_in_streaming_state"


async def test_the_answer_finalises_its_stream_with_its_buttons_at_the_bottom(
    api: FakeSlackApi,
) -> None:
    streams = SlackStreams(
        clients=TeamClients(WebClients.for_token("xoxb-test", base_url=api.base_url)), limit=3000
    )
    thread = PlatformRef(platform="slack", workspace="T0AGT00001", channel=CHANNEL, thread=ROOT)
    ts = await streams.start(thread, "U0ALICE001", "✅ One & ")
    await streams.append(thread, ts, "two")
    button = Button(label="Stop", action="stop:c42")
    answer = PostReply(
        ref=thread,
        text="✅ One & two.\n— 1 tool call",
        buttons=(button,),
        streamed=StreamedPreview(message=ts, open=True),
    )

    assert await streams.finalise(answer, "tb-7") == ts

    message = api.message(CHANNEL, ts)
    assert message is not None and message["text"] == "✅ One &amp; two.\n— 1 tool call"
    [stop] = api.calls_of("chat.stopStream")
    assert stop.args["markdown_text"] == ".\n— 1 tool call"  # only the rest
    assert stop.args["blocks"] == [
        {
            "type": "actions",
            "elements": [
                {
                    "type": "button",
                    "action_id": button.value,
                    "value": button.value,
                    "text": {"type": "plain_text", "text": "Stop", "emoji": True},
                }
            ],
        }
    ]
    assert stop.args["metadata"]["event_payload"] == {"key": "tb-7", "part": 0}
    assert "streamed" not in answer.model_dump()  # never stored with the row
