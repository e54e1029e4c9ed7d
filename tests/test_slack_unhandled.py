"""Bodies Slack sends that threadbot has no use for: each is answered 2xx, none retried.

The real bolt app and slack-sdk run against the fakes (``tests/slack_harness.py``).
bolt answers 404 to a request no listener takes, and Slack retries a delivery
whose answer is not 2xx; over Socket Mode bolt acks only a 200, so such an
envelope was never acknowledged. Each body here comes from a fixture taken from
Slack's documentation or bolt-python's own tests (``tests/fixtures/slack``): a
modal's submit and close, option requests of a select and a dialog, a global and
a message shortcut, and ``app_rate_limited``, which Slack posts when the app passes
its event limit for a workspace and which is logged once per team and minute.
Each gets 2xx over signed HTTP (a bad signature still gets 401) and an ack over
Socket Mode, changes nothing, and a mention afterwards is taken as ever.
"""

from __future__ import annotations

import copy
import logging
from typing import Any

import pytest

from tests.slack_harness import EnvelopeKind, Transport, fixture, slack_workspace
from tests.test_slack_story import assert_plan_posted, story

INTERACTIVE = (
    "view_submission",
    "view_closed",
    "block_suggestion",
    "dialog_suggestion",
    "shortcut",
    "message_action",
)
UNUSED: tuple[tuple[EnvelopeKind, str], ...] = (
    ("events_api", "app_rate_limited"),
    *(("interactive", name) for name in INTERACTIVE),
)


def body_of(name: str) -> dict[str, Any]:
    """The fixture's body as Slack sends it inside the request (a fresh copy)."""
    data = fixture(name)
    body: dict[str, Any] = copy.deepcopy(data.get("payload_parsed", data["payload"]))
    return body


def _failures(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]


def _rate_limit_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "adapters.slack.unhandled" and r.levelno == logging.WARNING
    ]


@pytest.mark.parametrize("transport", ["http", "socket"])
async def test_every_body_without_a_listener_is_answered_and_changes_nothing(
    settings, caplog: pytest.LogCaptureFixture, transport: Transport
) -> None:
    caplog.set_level(logging.INFO)
    async with slack_workspace(settings, story(), transport=transport) as ws:
        for kind, name in UNUSED:
            delivery = await ws.deliver(kind, body_of(name))
            assert delivery.status == 200, name
            if transport == "socket":  # the envelope was acked, so Slack sends it no more
                assert delivery.ack is not None and set(delivery.ack) == {"envelope_id"}
        await ws.settle()
        assert ws.calls() == [], "a body nobody uses made the bot call Slack"
        assert await ws.conversation_ids() == []
        assert _failures(caplog) == []
        assert not [r for r in caplog.records if "nhandled request" in r.getMessage()]

        root = await ws.mention("please fix the flaky login test")
        await assert_plan_posted(ws, root)


@pytest.mark.parametrize("name", ["shortcut", "app_rate_limited"])
async def test_a_body_with_a_bad_signature_is_still_refused(
    settings, caplog: pytest.LogCaptureFixture, name: str
) -> None:
    kind: EnvelopeKind = "events_api" if name == "app_rate_limited" else "interactive"
    async with slack_workspace(settings, story(), transport="http") as ws:
        forged = await ws.deliver(kind, body_of(name), secret="not-the-signing-secret")
        assert forged.status == 401
        assert _rate_limit_lines(caplog) == []
        assert (await ws.deliver(kind, body_of(name))).status == 200


@pytest.mark.parametrize("transport", ["http", "socket"])
async def test_app_rate_limited_is_logged_once_per_team_and_minute(
    settings, caplog: pytest.LogCaptureFixture, transport: Transport
) -> None:
    caplog.set_level(logging.INFO)
    first = body_of("app_rate_limited")
    minute = first["minute_rate_limited"]
    next_minute = {**first, "minute_rate_limited": minute + 60}
    other_team = {**first, "team_id": "T0OTHER001"}
    async with slack_workspace(settings, story(), transport=transport) as ws:
        for body, retry in (
            (first, 0),
            (first, 1),  # Slack's retry of the same notice
            (first, 0),
            (next_minute, 0),
            (next_minute, 0),
            (other_team, 0),
            (first, 0),  # an older minute, late
        ):
            assert (await ws.deliver("events_api", body, retry=retry)).status == 200

        lines = _rate_limit_lines(caplog)
        assert len(lines) == 3, lines
        for line, (team, at) in zip(
            lines,
            [("T0AGT00001", minute), ("T0AGT00001", minute + 60), ("T0OTHER001", minute)],
            strict=True,
        ):
            assert f"team {team}" in line and f"minute_rate_limited {at}" in line, line
        assert "2024-05-31 16:09 UTC" in lines[0]
        assert ws.calls() == [] and await ws.conversation_ids() == []
        assert _failures(caplog) == []
