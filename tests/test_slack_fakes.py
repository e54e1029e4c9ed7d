"""The Slack fakes work with the real slack-sdk and slack-bolt clients."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.app.async_app import AsyncApp
from slack_bolt.async_app import AsyncSay
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.signature import SignatureVerifier
from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.socket_mode.async_client import AsyncBaseSocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse
from slack_sdk.web.async_client import AsyncWebClient

from tests.conftest import wait_for
from tests.fakes.slack_api import FakeSlackApi, sign
from tests.fakes.slack_socket import FakeSocketModeServer

pytestmark = pytest.mark.timeout(300)

CHANNEL = "C0PROJ0001"
ROOT_TS = "1717171717.000100"
SECRET = "fake-signing-secret-for-tests"

Listener = Callable[[AsyncBaseSocketModeClient, SocketModeRequest], Awaitable[None]]


@pytest.fixture
async def api() -> AsyncIterator[FakeSlackApi]:
    async with FakeSlackApi() as fake:
        yield fake


@pytest.fixture
async def socket_server(api: FakeSlackApi) -> AsyncIterator[FakeSocketModeServer]:
    async with FakeSocketModeServer() as server:
        api.socket_url = server.url
        yield server


def web_client(api: FakeSlackApi, **kwargs: object) -> AsyncWebClient:
    return AsyncWebClient(base_url=api.base_url, token="xoxb-test", timeout=5, **kwargs)  # type: ignore[arg-type]


async def test_base_url_ends_with_api_slash(api: FakeSlackApi) -> None:
    assert api.base_url.startswith("http://127.0.0.1:")
    assert api.base_url.endswith("/api/")


async def test_web_client_against_the_fake(api: FakeSlackApi) -> None:
    client = web_client(api)
    api.add_message(CHANNEL, "<@U0AGTBOT01> tidy the repo", user="U0ALICE001", ts=ROOT_TS)

    auth = await client.auth_test()
    assert auth.data == {
        "ok": True,
        "url": "https://fakeworkspace.slack.com/",
        "team": "Fake Workspace",
        "user": "threadbot",
        "team_id": "T0AGT00001",
        "user_id": "U0AGTBOT01",
        "bot_id": "B0AGTBOT01",
        "is_enterprise_install": False,
    }

    metadata = {"event_type": "threadbot_plan", "event_payload": {"run": "r1"}}
    posted = await client.chat_postMessage(
        channel=CHANNEL, thread_ts=ROOT_TS, text="Here is the plan", metadata=metadata
    )
    assert posted["ok"] is True
    assert posted["channel"] == CHANNEL
    assert posted["ts"] == "1717171800.000100"
    message = posted["message"]
    assert message["type"] == "message"
    assert message["text"] == "Here is the plan"
    assert message["user"] == "U0AGTBOT01"
    assert message["bot_id"] == "B0AGTBOT01"
    assert message["ts"] == posted["ts"]
    assert message["thread_ts"] == ROOT_TS
    assert message["metadata"] == metadata

    second = await client.chat_postMessage(channel=CHANNEL, thread_ts=ROOT_TS, text="Working")
    assert second["ts"] > posted["ts"]

    updated = await client.chat_update(channel=CHANNEL, ts=second["ts"], text="Done")
    assert (updated["ok"], updated["channel"], updated["ts"], updated["text"]) == (
        True,
        CHANNEL,
        second["ts"],
        "Done",
    )

    reacted = await client.reactions_add(channel=CHANNEL, timestamp=ROOT_TS, name="eyes")
    assert reacted.data == {"ok": True}
    with pytest.raises(SlackApiError) as again:
        await client.reactions_add(channel=CHANNEL, timestamp=ROOT_TS, name="eyes")
    assert again.value.response["error"] == "already_reacted"

    replies = await client.conversations_replies(
        channel=CHANNEL, ts=ROOT_TS, include_all_metadata=True
    )
    assert replies["ok"] is True
    texts = [m["text"] for m in replies["messages"]]
    assert texts == ["<@U0AGTBOT01> tidy the repo", "Here is the plan", "Done"]
    parent, plan = replies["messages"][0], replies["messages"][1]
    assert parent["reply_count"] == 2
    assert parent["reactions"] == [{"name": "eyes", "users": ["U0AGTBOT01"], "count": 1}]
    assert plan["metadata"] == metadata
    assert plan["parent_user_id"] == "U0ALICE001"

    # What a person would see.
    assert [m["text"] for m in api.thread(CHANNEL, ROOT_TS)] == texts
    assert api.posted_texts(CHANNEL) == ["Here is the plan", "Done"]
    assert api.posted_texts(CHANNEL, ROOT_TS) == ["Here is the plan", "Done"]
    assert api.posted_texts("C0OTHER001") == []

    # Every call is recorded, whichever way slack-sdk encoded it.
    assert [c.method for c in api.calls] == [
        "auth.test",
        "chat.postMessage",
        "chat.postMessage",
        "chat.update",
        "reactions.add",
        "reactions.add",
        "conversations.replies",
    ]
    first_post = api.calls[1]
    assert first_post.args["thread_ts"] == ROOT_TS
    assert first_post.args["metadata"] == metadata
    assert first_post.token == "xoxb-test"
    assert first_post.headers["authorization"] == "Bearer xoxb-test"
    assert api.calls_of("reactions.add")[0].args["name"] == "eyes"  # query string on POST
    assert api.calls_of("conversations.replies")[0].http_method == "GET"
    assert [c.ok for c in api.calls_of("reactions.add")] == [True, False]
    assert all(a.seq < b.seq for a, b in zip(api.calls, api.calls[1:], strict=False))


async def test_other_methods(api: FakeSlackApi) -> None:
    client = web_client(api)

    user = await client.users_info(user="U0ALICE001")
    assert user["user"]["id"] == "U0ALICE001"
    assert user["user"]["name"] == "alice"
    assert user["user"]["real_name"] == "Alice"
    assert user["user"]["profile"]["display_name"] == "alice"

    bot = await client.bots_info(bot="B0AGTBOT01")
    assert bot["bot"]["app_id"] == "A0AGT00001"
    assert bot["bot"]["user_id"] == "U0AGTBOT01"

    ephemeral = await client.chat_postEphemeral(channel=CHANNEL, user="U0ALICE001", text="psst")
    assert ephemeral["ok"] is True
    assert ephemeral["message_ts"]
    assert api.ephemerals[0]["text"] == "psst"
    assert api.posted_texts(CHANNEL) == []  # nobody else sees it

    with pytest.raises(SlackApiError) as unknown:
        await client.api_call("chat.teleport", json={"channel": CHANNEL})
    assert unknown.value.response.data == {"ok": False, "error": "unknown_method"}

    with pytest.raises(SlackApiError) as missing:
        await client.users_info(user="U0NOBODY01")
    assert missing.value.response["error"] == "user_not_found"

    with pytest.raises(SlackApiError) as no_token:
        await AsyncWebClient(base_url=api.base_url).auth_test()
    assert no_token.value.response["error"] == "not_authed"


async def test_files_upload_v2(api: FakeSlackApi) -> None:
    client = web_client(api)
    api.add_message(CHANNEL, "start", ts=ROOT_TS)

    result = await client.files_upload_v2(
        channel=CHANNEL,
        thread_ts=ROOT_TS,
        content="line 1\nline 2\n",
        filename="report.txt",
        title="Report",
        initial_comment="Here is the report",
    )

    assert result["ok"] is True
    assert result["files"] == [{"id": result["file"]["id"], "title": "Report"}]
    uploaded = api.files[result["file"]["id"]]
    assert uploaded.content == b"line 1\nline 2\n"
    assert (uploaded.filename, uploaded.channel, uploaded.thread_ts) == (
        "report.txt",
        CHANNEL,
        ROOT_TS,
    )
    shared = api.thread(CHANNEL, ROOT_TS)[-1]
    assert shared["text"] == "Here is the report"
    assert shared["files"][0]["name"] == "report.txt"
    assert [c.method for c in api.calls] == [
        "files.getUploadURLExternal",
        "files.completeUploadExternal",
    ]


async def test_rate_limit_is_retried_by_the_sdk_handler(api: FakeSlackApi) -> None:
    client = web_client(api, retry_handlers=[AsyncRateLimitErrorRetryHandler(max_retry_count=1)])
    api.rate_limit("chat.postMessage", times=1, retry_after=0)

    posted = await client.chat_postMessage(channel=CHANNEL, text="after a wait")

    assert posted["ok"] is True
    calls = api.calls_of("chat.postMessage")
    assert [c.status for c in calls] == [429, 200]
    assert calls[0].response == {"ok": False, "error": "ratelimited"}
    assert api.posted_texts(CHANNEL) == ["after a wait"]


async def test_rate_limit_raises_without_a_handler(api: FakeSlackApi) -> None:
    client = web_client(api, retry_handlers=[])
    api.rate_limit("chat.update", times=1, retry_after=30)

    with pytest.raises(SlackApiError) as raised:
        await client.chat_update(channel=CHANNEL, ts="1717171800.000100", text="x")

    response = raised.value.response
    assert response.status_code == 429
    assert response.headers["Retry-After"] == "30"
    assert response["error"] == "ratelimited"
    # The rule is used up: the next call is answered normally (here: no such message).
    with pytest.raises(SlackApiError) as next_call:
        await client.chat_update(channel=CHANNEL, ts="1717171800.000100", text="x")
    assert next_call.value.response.status_code == 200
    assert next_call.value.response["error"] == "message_not_found"


async def test_errors_on_demand(api: FakeSlackApi) -> None:
    client = web_client(api)
    api.fail("chat.postMessage", "channel_not_found", times=2)

    for _ in range(2):
        with pytest.raises(SlackApiError) as raised:
            await client.chat_postMessage(channel=CHANNEL, text="hi")
        assert raised.value.response["error"] == "channel_not_found"
    assert (await client.chat_postMessage(channel=CHANNEL, text="hi"))["ok"] is True
    assert api.posted_texts(CHANNEL) == ["hi"]


def test_sign_matches_the_sdk_verifier() -> None:
    body = '{"type":"url_verification","challenge":"abc"}'
    headers = sign(body, SECRET)
    verifier = SignatureVerifier(SECRET)
    assert verifier.is_valid_request(body, headers)
    assert not SignatureVerifier("another-secret").is_valid_request(body, headers)
    old = sign(body, SECRET, timestamp=1717171717)
    assert old["X-Slack-Request-Timestamp"] == "1717171717"
    assert not verifier.is_valid_request(body, old)  # too old for the verifier


async def test_bolt_http_request_signed_with_sign(api: FakeSlackApi) -> None:
    app = AsyncApp(signing_secret=SECRET, client=web_client(api))
    body = json.dumps({"token": "x", "type": "url_verification", "challenge": "ch4llenge"})

    response = await app.async_dispatch(AsyncBoltRequest(body=body, headers=sign(body, SECRET)))
    assert (response.status, json.loads(response.body)) == (200, {"challenge": "ch4llenge"})

    bad = await app.async_dispatch(
        AsyncBoltRequest(body=body, headers=sign(body, SECRET, timestamp=1717171717))
    )
    assert bad.status == 401


async def test_socket_mode_client_receives_and_acks(
    api: FakeSlackApi, socket_server: FakeSocketModeServer
) -> None:
    received: list[SocketModeRequest] = []

    async def listener(client: AsyncBaseSocketModeClient, request: SocketModeRequest) -> None:
        received.append(request)
        payload = {"text": "ok"} if request.accepts_response_payload else None
        await client.send_socket_mode_response(SocketModeResponse(request.envelope_id, payload))

    client = SocketModeClient(
        app_token="xapp-test", web_client=AsyncWebClient(base_url=api.base_url, timeout=5)
    )
    client.socket_mode_request_listeners.append(listener)
    try:
        await client.connect()
        await socket_server.wait_connected()
        event = {"type": "event_callback", "event": {"type": "app_mention", "text": "hi"}}
        envelope_id = await socket_server.send_envelope("events_api", event)
        ack = await socket_server.ack(envelope_id)
        assert ack == {"envelope_id": envelope_id}
        assert received[0].type == "events_api"
        assert received[0].payload == event
        assert received[0].retry_attempt == 0

        slash = await socket_server.send_envelope(
            "slash_commands", {"command": "/stop"}, accepts_response_payload=True
        )
        assert await socket_server.ack(slash) == {"envelope_id": slash, "payload": {"text": "ok"}}
    finally:
        await client.close()

    opened = api.calls_of("apps.connections.open")
    assert len(opened) == 1
    assert opened[0].token == "xapp-test"
    assert opened[0].response["url"] == socket_server.url
    kinds = [(e.kind, e.envelope_id) for e in socket_server.log if e.kind != "closed"]
    assert kinds == [
        ("connect", None),
        ("hello", None),
        ("send", envelope_id),
        ("ack", envelope_id),
        ("send", slash),
        ("ack", slash),
    ]
    hello = socket_server.entry("hello").data
    assert hello is not None and hello["connection_info"] == {"app_id": "A0AGT00001"}
    assert opened[0].seq < socket_server.entry("connect").seq
    await wait_for(lambda: socket_server.open_connections == 0)


async def test_socket_mode_disconnect_makes_the_client_reconnect(
    api: FakeSlackApi, socket_server: FakeSocketModeServer
) -> None:
    async def listener(client: AsyncBaseSocketModeClient, request: SocketModeRequest) -> None:
        await client.send_socket_mode_response(SocketModeResponse(request.envelope_id))

    client = SocketModeClient(
        app_token="xapp-test", web_client=AsyncWebClient(base_url=api.base_url, timeout=5)
    )
    client.socket_mode_request_listeners.append(listener)
    try:
        await client.connect()
        await socket_server.wait_connected()
        await socket_server.send_disconnect("refresh_requested")
        await wait_for(lambda: socket_server.connections_made == 2)
        envelope_id = await socket_server.send_envelope("interactive", {"type": "block_actions"})
        await socket_server.ack(envelope_id)
        assert socket_server.entry("ack", envelope_id).connection == 2
    finally:
        await client.close()
    assert len(api.calls_of("apps.connections.open")) == 2


async def test_socket_mode_spreads_envelopes_over_the_open_connections(
    api: FakeSlackApi, socket_server: FakeSocketModeServer
) -> None:
    """Two clients with one app token: each envelope goes to one of them, in turn, or to
    the one named; the log says which got it and which acked."""
    received: dict[int, list[str]] = {0: [], 1: []}

    def listening(n: int) -> Listener:
        async def listener(client: AsyncBaseSocketModeClient, request: SocketModeRequest) -> None:
            received[n].append(request.envelope_id)
            await client.send_socket_mode_response(SocketModeResponse(request.envelope_id))

        return listener

    clients = [
        SocketModeClient(
            app_token="xapp-test", web_client=AsyncWebClient(base_url=api.base_url, timeout=5)
        )
        for _ in range(2)
    ]
    socket_server.spread = "round_robin"
    try:
        for n, client in enumerate(clients):
            client.socket_mode_request_listeners.append(listening(n))
            await client.connect()
        assert await socket_server.wait_connections(2) == [1, 2]
        spread = [await socket_server.send_envelope("events_api", {"n": k}) for k in range(4)]
        chosen = await socket_server.send_envelope("events_api", {"n": 4}, connection=2)
        for envelope_id in [*spread, chosen]:
            await socket_server.ack(envelope_id)
        with pytest.raises(LookupError):
            await socket_server.send_envelope("events_api", {"n": 5}, connection=3)
    finally:
        for client in clients:
            await client.close()

    sent = {e: socket_server.sent_on(e) for e in [*spread, chosen]}
    assert [sent[e] for e in spread] == [[1], [2], [1], [2]]
    assert sent[chosen] == [2]
    assert all(socket_server.acked_on(e) == sent[e] for e in sent)  # once, where it went
    assert received == {0: spread[0::2], 1: [*spread[1::2], chosen]}
    assert socket_server.envelopes() == [*spread, chosen]


async def test_bolt_app_over_socket_mode_acks_before_it_answers(
    api: FakeSlackApi, socket_server: FakeSocketModeServer
) -> None:
    release = asyncio.Event()
    app = AsyncApp(client=web_client(api))

    @app.event("app_mention")
    async def on_mention(event: dict[str, str], say: AsyncSay) -> None:
        await release.wait()
        await say(text="On it", thread_ts=event["ts"])

    handler = AsyncSocketModeHandler(app, app_token="xapp-test")
    try:
        await handler.connect_async()
        await socket_server.wait_connected()
        body = {
            "type": "event_callback",
            "team_id": "T0AGT00001",
            "api_app_id": "A0AGT00001",
            "event_id": "Ev0AGT0001",
            "event_time": 1717171717,
            "event": {
                "type": "app_mention",
                "user": "U0ALICE001",
                "text": "<@U0AGTBOT01> tidy the repo",
                "ts": ROOT_TS,
                "channel": CHANNEL,
                "event_ts": ROOT_TS,
            },
            "authorizations": [
                {
                    "team_id": "T0AGT00001",
                    "user_id": "U0AGTBOT01",
                    "is_bot": True,
                    "is_enterprise_install": False,
                }
            ],
        }
        envelope_id = await socket_server.send_envelope("events_api", body)
        await socket_server.ack(envelope_id)  # while the listener is still blocked
        release.set()
        await wait_for(lambda: api.posted_texts(CHANNEL, ROOT_TS) == ["On it"])
    finally:
        await handler.close_async()

    post = api.calls_of("chat.postMessage")[0]
    assert socket_server.entry("ack", envelope_id).seq < post.seq
    assert post.args["thread_ts"] == ROOT_TS
    assert api.calls_of("auth.test"), "bolt asks auth.test who it is"


async def test_socket_mode_pings_and_server_side_close(
    api: FakeSlackApi, socket_server: FakeSocketModeServer
) -> None:
    client = SocketModeClient(
        app_token="xapp-test",
        web_client=AsyncWebClient(base_url=api.base_url, timeout=5),
        ping_interval=0.05,
    )
    try:
        await client.connect()
        await socket_server.wait_connected()
        first_pong = client.last_ping_pong_time
        await wait_for(lambda: client.last_ping_pong_time != first_pong)  # pongs come back
        assert socket_server.connections_made == 1  # and the session is not seen as stale
        await socket_server.close_connections()
        await wait_for(lambda: socket_server.connections_made == 2)
        await wait_for(lambda: socket_server.open_connections == 1)
        assert await client.is_connected()
    finally:
        await client.close()
    assert len(api.calls_of("apps.connections.open")) == 2


async def test_base_url_forms(api: FakeSlackApi) -> None:
    # slack-sdk 3.48 appends the missing trailing slash itself...
    no_slash = AsyncWebClient(base_url=api.base_url.rstrip("/"), token="xoxb-test", timeout=5)
    assert (await no_slash.auth_test())["ok"] is True
    # ...but a base_url without /api/ misses the fake, which says so.
    root = AsyncWebClient(base_url=api.root_url, token="xoxb-test", timeout=5)
    with pytest.raises(SlackApiError) as raised:
        await root.auth_test()
    assert raised.value.response.status_code == 404
    assert "base_url" in raised.value.response["hint"]
    assert [c.method for c in api.calls] == ["auth.test"]
