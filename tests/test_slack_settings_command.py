"""``/threadbot settings`` on Slack: declared in the manifest, handed to the hub as a command.

The hub answers ``CommandInvoked(name="threadbot", args="settings")`` with the
channel's effective settings, only to the person who asked; here only the Slack
side is checked: the manifest declares the command beside ``/stop``, the
translator gives that event, and bolt's listener (over HTTP and Socket Mode,
against the fakes of ``tests/slack_harness.py``) hands it to the hub.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from adapters.slack.translate import BotIdentity, command_event
from conversations.events import Author, CommandInvoked, InboundEvent, PlatformRef
from core.models.scripted import ScriptedModel
from tests.fakes.slack_api import TEAM_ID
from tests.slack_harness import ALICE, CHANNEL, fixture, slack_workspace

MANIFEST = Path(__file__).parent.parent / "adapters" / "slack" / "manifest.yaml"
ME = BotIdentity(user_id="U0AGTBOT01", bot_id="B0AGTBOT01", app_id="A0AGT00001", team_id=TEAM_ID)


def slash_commands() -> dict[str, dict[str, str]]:
    """``{command: {field: value}}`` of the manifest's ``features.slash_commands`` list."""
    lines = MANIFEST.read_text(encoding="utf-8").splitlines()
    start = lines.index("  slash_commands:") + 1
    declared: dict[str, dict[str, str]] = {}
    current: dict[str, str] = {}
    for line in lines[start:]:
        if line.strip().startswith("#"):
            continue
        if not line.startswith("    "):  # the next key of ``features``, or of the top level
            break
        field = re.fullmatch(r"    (?:- |  )(\w+): (.*)", line)
        assert field is not None, f"unexpected manifest line {line!r}"
        key, value = field[1], field[2].strip().strip('"')
        if line.startswith("    - "):
            current = declared.setdefault(value, {})
        current[key] = value
    return declared


def test_the_manifest_declares_threadbot_beside_stop() -> None:
    declared = slash_commands()

    assert list(declared) == ["/stop", "/threadbot"]
    threadbot = declared["/threadbot"]
    assert threadbot["usage_hint"] == "settings"
    assert "settings" in threadbot["description"]
    assert threadbot["should_escape"] == "false"
    assert "Reinstall to Workspace" in MANIFEST.read_text(encoding="utf-8")


def test_threadbot_settings_is_a_command_like_stop() -> None:
    form = dict(fixture("slash_command_stop")["payload_parsed"], command="/threadbot")
    form["text"] = " settings "

    event = command_event(form, ME)

    assert event == CommandInvoked(
        delivery_key="slack:command:7200000000002.7200000000003.fakefakefakefakefakefakefakefake",
        ref=PlatformRef(platform="slack", workspace=TEAM_ID, channel=CHANNEL, user=ALICE),
        author=Author(id=ALICE, name=f"<@{ALICE}>"),
        name="threadbot",
        args="settings",
    )


def test_threadbot_over_socket_mode_is_the_same_command() -> None:
    payload = dict(fixture("socket_mode_slash_command")["payload"]["payload"])
    payload.update(command="/threadbot", text="settings")

    event = command_event(payload, ME)

    assert isinstance(event, CommandInvoked)
    assert (event.name, event.args, event.ref.thread) == ("threadbot", "settings", None)


@pytest.mark.parametrize("transport", ["http", "socket"])
async def test_threadbot_settings_reaches_the_hub(
    settings, transport, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with slack_workspace(settings, ScriptedModel([]), transport=transport) as ws:
        handed: list[InboundEvent] = []
        take = ws.app.hub.handle

        async def spy(event: InboundEvent) -> None:
            handed.append(event)
            await take(event)

        monkeypatch.setattr(ws.app.hub, "handle", spy)

        delivery = await ws.slash("/threadbot", "settings")

        assert delivery.status == 200
        [event] = handed
        assert isinstance(event, CommandInvoked)
        assert (event.name, event.args) == ("threadbot", "settings")
        assert event.ref == PlatformRef(
            platform="slack", workspace=TEAM_ID, channel=CHANNEL, user=ALICE
        )
        assert event.author.id == ALICE
