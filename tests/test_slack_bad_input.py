"""Bad input from Slack: malformed bodies, broken envelopes, the bot's id in code and quotes.

The real bolt app and slack-sdk run against the fakes (``tests/slack_harness.py``).
Over HTTP a malformed body gets 400 and one log line, signed or not, never a 500;
over Socket Mode a malformed frame is logged and skipped (an envelope with an id is
acked) and the connection goes on. A mention is read from the message's rich-text
blocks: the bot's user inside a code block, a quote or inline code starts nothing,
while a real mention beside a code block does. Each test then shows a normal
mention still working, asserted on what the fakes received and the store holds.
"""

from __future__ import annotations

import json
import logging
from typing import Any
from urllib.parse import quote, urlencode

import pytest

from tests.fakes.slack_api import BOT_USER_ID, sign
from tests.slack_harness import (
    ALICE,
    CHANNEL,
    SECRET,
    WAIT,
    Workspace,
    event_body,
    slack_workspace,
)
from tests.test_slack_story import assert_plan_posted, story

JSON = "application/json"
FORM = "application/x-www-form-urlencoded"


def _form_payload(payload: object) -> bytes:
    return f"payload={quote(json.dumps(payload))}".encode()


def _callback(event: object, **extra: Any) -> bytes:
    return json.dumps({"type": "event_callback", "team_id": "T1", "event": event, **extra}).encode()


MALFORMED: dict[str, tuple[bytes, str]] = {
    "not JSON": (b"{not json", JSON),
    "a JSON list": (b"[1, 2]", JSON),
    "a JSON string": (b'"event"', JSON),
    "JSON null": (b"null", JSON),
    "empty": (b"", JSON),
    "not UTF-8": (b"\xff\xfe{}", JSON),
    "a form without payload": (b"a=b&c=d", FORM),
    "a payload that is not JSON": (b"payload=%7Bnot", FORM),
    "a payload that is a list": (_form_payload([1]), FORM),
    "a payload that is a string": (_form_payload("block_actions"), FORM),
    "event is a string": (_callback("app_mention"), JSON),
    "event without a type": (_callback({"user": "U1"}), JSON),
    "event.user is a list": (_callback({"type": "app_mention", "user": ["U1"]}), JSON),
    "authorizations is a string": (_callback({"type": "message"}, authorizations="x"), JSON),
    "command is a number": (b'{"command": 5, "team_id": "T1"}', JSON),
    "block_actions without actions": (
        _form_payload({"type": "block_actions", "actions": []}),
        FORM,
    ),
    "interactive_message without actions": (
        _form_payload({"type": "interactive_message", "callback_id": "c"}),
        FORM,
    ),
    "view_closed with a null view": (_form_payload({"type": "view_closed", "view": None}), FORM),
    "null response_urls": (
        _form_payload({"type": "view_closed", "view": {"id": "V1"}, "response_urls": None}),
        FORM,
    ),
    "view_submission whose view has no type": (
        _form_payload({"type": "view_submission", "view": {"callback_id": "feedback"}}),
        FORM,
    ),
    "a workflow step's save without workflow_step": (
        _form_payload(
            {"type": "view_submission", "view": {"callback_id": "c", "type": "workflow_step"}}
        ),
        FORM,
    ),
    "workflow_step_edit without workflow_step": (
        _form_payload({"type": "workflow_step_edit", "callback_id": "c"}),
        FORM,
    ),
    # bolt puts the team in auth.test's query: a URL the Web API refuses (found by fuzzing)
    "a slash command whose team_id is 13,000 newlines": (
        urlencode(
            {"command": "/stop", "team_id": "\n" * 13032, "channel_id": "C1", "user_id": "U1"}
        ).encode(),
        FORM,
    ),
    "event.user with a space in it": (_callback({"type": "app_mention", "user": "U1 U2"}), JSON),
}


async def _post(ws: Workspace, raw: bytes, content_type: str, *, signed: bool) -> tuple[int, str]:
    headers = {"Content-Type": content_type, **(sign(raw, SECRET) if signed else {})}
    async with ws.http.post(ws.url, data=raw, headers=headers) as response:
        return response.status, await response.text()


def _refusals(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [
        r
        for r in caplog.records
        if r.name == "adapters.slack.runner" and "refused a malformed" in r.getMessage()
    ]


def _failures(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    """ERROR records and any record with a traceback."""
    return [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]


async def test_malformed_http_bodies_get_400_and_a_log_line_signed_or_not(
    settings, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    async with slack_workspace(settings, story(), transport="http") as ws:
        answers = {}
        for name, (raw, content_type) in MALFORMED.items():
            for signed in (True, False):
                answers[name, signed] = await _post(ws, raw, content_type, signed=signed)
        assert {key: status for key, (status, _) in answers.items()} == {
            key: 400 for key in answers
        }
        assert all(text.startswith("malformed request: ") for _, text in answers.values())
        refusals = _refusals(caplog)
        assert len(refusals) == 2 * len(MALFORMED)
        assert all(r.levelno == logging.WARNING and not r.exc_info for r in refusals)
        assert _failures(caplog) == []
        assert ws.calls() == [] and await ws.conversation_ids() == []

        # A well-formed body with a wrong signature is still bolt's to refuse (401) ...
        said = f"<@{BOT_USER_ID}> please fix the flaky login test"
        ts = str(ws.api.add_message(CHANNEL, said)["ts"])
        forged = await ws.deliver("events_api", ws.mention_body(ts, said), secret="wrong")
        assert forged.status == 401
        # ... and a real mention afterwards is taken as ever.
        root = await ws.mention("please fix the flaky login test")
        assert len(await ws.conversation_ids()) == 1
        await assert_plan_posted(ws, root)
        assert _failures(caplog) == []


async def test_an_event_of_a_type_the_bot_does_not_use_gets_200_and_starts_nothing(
    settings, caplog: pytest.LogCaptureFixture
) -> None:
    """Slack retries an event whose answer is not 2xx; bolt answers 404 to an event no
    listener takes, so the bot takes every type and drops those it does not use."""
    async with slack_workspace(settings, story(), transport="http") as ws:
        for kind in ("channel_created", "team_join", "app_home_opened", "emoji_changed"):
            body = {"type": "event_callback", "team_id": "T1", "event": {"type": kind}}
            assert (await ws.deliver("events_api", body)).status == 200, kind
        assert ws.calls() == [] and await ws.conversation_ids() == []
        assert _failures(caplog) == []
        root = await ws.mention("please fix the flaky login test")
        await assert_plan_posted(ws, root)


SOCKET_FRAMES = [
    ("not JSON", "this is not json", None),
    ("a JSON list", "[1, 2, 3]", None),
    ("an envelope without an id", {"type": "events_api", "payload": {"type": "event_callback"}}),
    ("a payload that is a string", {"envelope_id": "env-1", "type": "events_api", "payload": "x"}),
    (
        "event is a string",
        {"envelope_id": "env-2", "type": "events_api", "payload": {"event": "app_mention"}},
    ),
    (
        "command is a number",
        {"envelope_id": "env-3", "type": "slash_commands", "payload": {"command": 5}},
    ),
    ("an id that is a number", {"envelope_id": 7, "type": "interactive", "payload": {}}),
]


async def test_malformed_socket_mode_frames_are_skipped_and_the_connection_goes_on(
    settings, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    async with slack_workspace(settings, story(), transport="socket") as ws:
        socket = ws.socket
        assert socket is not None
        for _, frame, *_ in SOCKET_FRAMES:
            await socket.send_text(frame if isinstance(frame, str) else json.dumps(frame))
        for envelope_id in ("env-1", "env-2", "env-3"):  # acked, so Slack does not resend
            assert await socket.ack(envelope_id, timeout=WAIT) == {"envelope_id": envelope_id}

        # Frames are read in order: once the mention's envelopes are acked, every
        # frame before them has been looked at.
        root = await ws.mention("please fix the flaky login test")
        assert len(await ws.conversation_ids()) == 1
        await assert_plan_posted(ws, root)
        assert socket.connections_made == 1 and socket.open_connections == 1
        skipped = [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()]
        assert len(skipped) == len(SOCKET_FRAMES), skipped
        assert sum("not a JSON object" in line for line in skipped) == 2
        assert [line for line in skipped if "env-" in line] == [
            line for line in skipped if line.startswith("skipped Socket Mode envelope env-")
        ]
        assert _failures(caplog) == []


# --- mentions are read from the rich-text blocks -------------------------------------


def _user(**style: bool) -> dict[str, Any]:
    element: dict[str, Any] = {"type": "user", "user_id": BOT_USER_ID}
    if style:
        element["style"] = style
    return element


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _section(*elements: dict[str, Any]) -> dict[str, Any]:
    return {"type": "rich_text_section", "elements": list(elements)}


def _rich(*parts: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"type": "rich_text", "block_id": "rt1", "elements": list(parts)}]


HIDDEN = {
    "a code block": (
        f"```<@{BOT_USER_ID}> please deploy```",
        _rich({"type": "rich_text_preformatted", "elements": [_user(), _text(" please deploy")]}),
    ),
    "a quote": (
        f"&gt; <@{BOT_USER_ID}> please deploy",
        _rich({"type": "rich_text_quote", "elements": [_user(), _text(" please deploy")]}),
    ),
    "inline code": (
        f"run `<@{BOT_USER_ID}>` to deploy",
        _rich(_section(_text("run "), _user(code=True), _text(" to deploy"))),
    ),
}


async def _say(ws: Workspace, text: str, blocks: list[dict[str, Any]]) -> str:
    """Alice posts ``text`` with ``blocks``; Slack sends app_mention and message for it."""
    ts = str(ws.api.add_message(CHANNEL, text, user=ALICE)["ts"])
    for name in ("app_mention", "message_thread_reply"):
        body = event_body(name)
        body["event"].update(text=text, user=ALICE, ts=ts, event_ts=ts, blocks=blocks)
        body["event"].pop("thread_ts", None)
        assert (await ws.deliver("events_api", body)).status == 200
    await ws.settle()
    return ts


@pytest.mark.parametrize("where", list(HIDDEN))
async def test_the_bots_id_in_code_or_a_quote_starts_nothing(settings, where: str) -> None:
    async with slack_workspace(settings, story(), transport="http") as ws:
        await _say(ws, *HIDDEN[where])
        assert ws.calls() == []
        assert await ws.conversation_ids() == []


async def test_a_real_mention_beside_a_code_block_starts_a_conversation(settings) -> None:
    text = f"```<@{BOT_USER_ID}> is how you call it```\n<@{BOT_USER_ID}> please fix the test"
    blocks = _rich(
        {"type": "rich_text_preformatted", "elements": [_user(), _text(" is how you call it")]},
        _section(_user(), _text(" please fix the test")),
    )
    async with slack_workspace(settings, story(), transport="http") as ws:
        root = await _say(ws, text, blocks)
        assert len(await ws.conversation_ids()) == 1
        await assert_plan_posted(ws, root)
        snap = await ws.snapshot(root)
        said = [r.entry.text for r in snap.journal if r.entry.kind == "user_text"]
        assert said == [f"```<@{BOT_USER_ID}> is how you call it```\nplease fix the test"]


UNREADABLE_SIGNATURES: dict[str, dict[str, str]] = {
    "a timestamp that is not a number": {"X-Slack-Request-Timestamp": "abc"},
    "an empty timestamp": {"X-Slack-Request-Timestamp": ""},
    "a timestamp in exponent form": {"X-Slack-Request-Timestamp": "1.5e9"},
    "a timestamp of 400 digits": {"X-Slack-Request-Timestamp": "9" * 400},
    "a signature that is not ASCII": {"X-Slack-Signature": "v0=" + "é" * 64},
}


@pytest.mark.parametrize("name", list(UNREADABLE_SIGNATURES))
async def test_signature_headers_slack_sdk_cannot_read_get_401_and_no_traceback(
    settings, caplog: pytest.LogCaptureFixture, name: str
) -> None:
    """slack-sdk's ``SignatureVerifier.is_valid`` raises on these (``int()`` of the
    timestamp, ``hmac.compare_digest`` of the signature), which bolt answered with 500 and
    an ERROR with a traceback; they get bolt's own answer to a bad signature instead."""
    caplog.set_level(logging.INFO)
    async with slack_workspace(settings, story(), transport="http") as ws:
        said = f"<@{BOT_USER_ID}> please fix the flaky login test"
        ts = str(ws.api.add_message(CHANNEL, said)["ts"])
        raw = json.dumps(ws.mention_body(ts, said)).encode()
        headers = {"Content-Type": JSON, **sign(raw, SECRET), **UNREADABLE_SIGNATURES[name]}
        async with ws.http.post(ws.url, data=raw, headers=headers) as response:
            assert response.status == 401
            assert await response.json() == {"error": "invalid request"}
        assert _failures(caplog) == []
        assert [r.levelno for r in caplog.records if "refused a request with 401" in r.message] == [
            logging.INFO
        ]
        assert ws.calls() == [] and await ws.conversation_ids() == []

        root = await ws.mention("please fix the flaky login test")  # the next one is taken
        await assert_plan_posted(ws, root)
