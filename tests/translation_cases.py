"""Every fixture through every inbound translator, and the snapshots of what that gives.

Each fixture in ``tests/fixtures/slack`` and ``tests/fixtures/discord`` is reduced to
the mapping its translators take (:func:`slack_bodies`, :func:`discord_bodies`) and
fed to every translator of its adapter, in a few configurations
(:func:`slack_translations`, :func:`discord_translations`): a JSON-able mapping from
the translator's name to the event it returned (``model_dump(mode="json")``) or None.

The snapshots in ``tests/fixtures/snapshots/{slack,discord}/{fixture}.json`` record
that mapping as the translators gave it when the issue on malformed input began; the
tests compare against them, and a fixture without a snapshot fails. A test run never
writes one: after a deliberate change of what a fixture gives, or for a new fixture,
write them on purpose with ``python -m tests.translation_cases --write`` and review
the diff.
"""

from __future__ import annotations

import argparse
import copy
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

from pydantic import BaseModel

from adapters.discord import translate as discord
from adapters.slack import translate as slack

FIXTURES = Path(__file__).parent / "fixtures"
SNAPSHOTS = FIXTURES / "snapshots"

SLACK_ME = slack.BotIdentity(
    user_id="U0AGTBOT01", bot_id="B0AGTBOT01", app_id="A0AGT00001", team_id="T0AGT00001"
)
DISCORD_ME = discord.BotIdentity(
    user_id="1198930054348931074", application_id="1198930054348931074"
)
DISCORD_BOT_ROLE = "1198930054348931090"

Translations = dict[str, Any]


def _load(platform: str, name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(
        (FIXTURES / platform / f"{name}.json").read_text(encoding="utf-8")
    )
    return data


def fixture_names(platform: str) -> list[str]:
    """The fixtures of ``platform`` (``slack`` or ``discord``), by file name, sorted."""
    return sorted(path.stem for path in (FIXTURES / platform).glob("*.json"))


def slack_body(name: str) -> dict[str, Any]:
    """The mapping a Slack translator takes for fixture ``name`` (a fresh copy).

    An Events API body as is; a Socket Mode envelope's ``payload``; a form body
    (slash command) parsed into single values; an interactivity form's ``payload``.
    """
    data = _load("slack", name)
    payload = data["payload"]
    if data["transport"] == "slack_socket_mode":
        payload = payload["payload"]
    elif isinstance(payload, str):
        form = dict(parse_qsl(payload, keep_blank_values=True))
        payload = json.loads(form["payload"]) if "payload" in form else form
    body: dict[str, Any] = copy.deepcopy(payload)
    return body


def slack_kind(name: str) -> str:
    """How Slack delivers fixture ``name``: ``events_api``, ``slash_commands`` or ``interactive``.

    The Socket Mode envelope type, which also tells the HTTP encoding (JSON, a
    form, a form with a ``payload`` field).
    """
    data = _load("slack", name)
    transport = data["transport"]
    if transport == "slack_socket_mode":
        return str(data["payload"]["type"])
    return {
        "slack_events_api_http": "events_api",
        "slack_slash_command_http": "slash_commands",
        "slack_interactivity_http": "interactive",
    }[transport]


def discord_name(name: str) -> str:
    """The dispatch name (``t``) of Discord fixture ``name``."""
    return str(_load("discord", name)["payload"]["t"])


def discord_body(name: str) -> dict[str, Any]:
    """The ``d`` of the gateway dispatch in Discord fixture ``name`` (a fresh copy)."""
    d: dict[str, Any] = copy.deepcopy(_load("discord", name)["payload"]["d"])
    return d


def _dump(result: object) -> Any:
    if isinstance(result, BaseModel):
        return result.model_dump(mode="json")
    if isinstance(result, frozenset):
        return sorted(result)
    return result


def _each(calls: Mapping[str, Callable[[], object]]) -> Translations:
    return {name: _dump(call()) for name, call in calls.items()}


def slack_translations(body: Mapping[str, Any]) -> Translations:
    """``body`` through every Slack translator; never raises unless one does."""
    me = SLACK_ME
    return _each(
        {
            "inbound_event": lambda: slack.inbound_event(body, me),
            "inbound_event(allow_bots)": lambda: slack.inbound_event(body, me, allow_bots=True),
            "command_event": lambda: slack.command_event(body, me),
            "action_event": lambda: slack.action_event(body, me),
        }
    )


def discord_translations(d: Mapping[str, Any]) -> Translations:
    """``d`` through every Discord translator; never raises unless one does."""
    me = DISCORD_ME
    channel = d.get("channel_id") if isinstance(d, Mapping) else None
    threads = frozenset({channel}) if isinstance(channel, str) else frozenset()
    roles = frozenset({DISCORD_BOT_ROLE})
    return _each(
        {
            "message_event": lambda: discord.message_event(d, me, thread_ids=frozenset()),
            "message_event(in thread, bots, roles)": lambda: discord.message_event(
                d, me, thread_ids=threads, allow_bots=True, bot_roles=roles
            ),
            "content_missing": lambda: discord.content_missing(d, me),
            "reaction_event(added)": lambda: discord.reaction_event(d, me, added=True),
            "reaction_event(removed, in thread)": lambda: discord.reaction_event(
                d, me, added=False, thread_ids=threads
            ),
            "interaction_event": lambda: discord.interaction_event(d, me),
            "thread_id_of": lambda: discord.thread_id_of(d),
            "bot_role_ids": lambda: discord.bot_role_ids(d, me),
        }
    )


PLATFORMS: dict[str, tuple[Callable[[str], dict[str, Any]], Callable[..., Translations]]] = {
    "slack": (slack_body, slack_translations),
    "discord": (discord_body, discord_translations),
}


def snapshot_path(platform: str, name: str) -> Path:
    """Where the snapshot of fixture ``name`` of ``platform`` is kept."""
    return SNAPSHOTS / platform / f"{name}.json"


def current(platform: str, name: str) -> Translations:
    """What fixture ``name`` translates to with the code as it is now."""
    body, translations = PLATFORMS[platform]
    return translations(body(name))


def write_snapshots() -> list[Path]:
    """Write the snapshot of every fixture; returns the files written."""
    written = []
    for platform in PLATFORMS:
        for name in fixture_names(platform):
            path = snapshot_path(platform, name)
            path.parent.mkdir(parents=True, exist_ok=True)
            text = json.dumps(current(platform, name), indent=2, sort_keys=True)
            path.write_text(text + "\n", encoding="utf-8")
            written.append(path)
    return written


def main() -> None:
    """``python -m tests.translation_cases --write``: (re)write every snapshot."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="write the snapshots")
    if not parser.parse_args().write:
        parser.error("pass --write to (re)write the snapshots on purpose")
    for path in write_snapshots():
        print(path.relative_to(FIXTURES.parent.parent))


if __name__ == "__main__":
    main()
