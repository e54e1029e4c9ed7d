"""Story threads on Slack, Discord and the console, spoken to the same way.

:func:`on` starts the bot on a platform against its local fake (Slack: the real
bolt app and slack-sdk against FakeSlackApi; Discord: the real discord.py against
FakeDiscord; the console: the hub, printed by the console adapter) and yields a
:class:`Thread`: people mention, react, press buttons, decide a call, reply and
stop, and a test reads a bot message as the platform holds it now
(:class:`Shown`: Slack after ``chat.update``, Discord after the message edit, the
console's last print of the message, ``(edited)`` or not). Alice asks; Bob is an
approver.
"""

from __future__ import annotations

import contextlib
import copy
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Protocol

from bot.app import App, build
from bot.settings import Settings
from core.models.scripted import ScriptedModel
from core.vocabulary.snapshot import ConversationSnapshot
from tests.fakes.discord_api import shown_text
from tests.harness import Chat
from tests.slack_harness import ALICE, BOB, CHANNEL, Workspace, slack_workspace
from tests.test_discord_story import ALICE as D_ALICE
from tests.test_discord_story import BOB as D_BOB
from tests.test_discord_story import Guild, buttons, discord_guild, fixture
from tests.test_slack_story import plan_buttons

PEOPLE = {"slack": {"alice": ALICE, "bob": BOB}, "discord": {"alice": D_ALICE, "bob": D_BOB}}
DISCORD_USERS = {D_ALICE: ("alice_fake", "Alice"), D_BOB: ("bob_fake", "Bob")}


@dataclass(frozen=True)
class Shown:
    """A bot message as the platform shows it now: its text and its buttons' labels."""

    text: str
    buttons: list[str]


class Thread(Protocol):
    """One conversation's thread on a platform, spoken to as people do."""

    app: App

    def name(self, who: str) -> str: ...
    async def mention(self, text: str) -> None: ...
    def message(self, marker: str) -> str: ...
    def shown(self, message: str) -> Shown: ...
    def posts(self) -> list[str]: ...
    async def react(self, message: str, approve: bool, by: str) -> None: ...
    async def approve_button(self, message: str, by: str) -> None: ...
    async def decide_call(self, message: str, call: int, allow: bool, by: str) -> None: ...
    async def reply(self, text: str, by: str) -> None: ...
    async def stop(self, by: str) -> None: ...
    async def settle(self) -> None: ...
    async def snapshot(self) -> ConversationSnapshot: ...


class SlackThread:
    def __init__(self, ws: Workspace) -> None:
        self.ws, self.app, self.root = ws, ws.app, ""

    def name(self, who: str) -> str:
        return f"<@{PEOPLE['slack'][who]}>"  # Slack shows a mention as the person's name

    async def mention(self, text: str) -> None:
        self.root = await self.ws.mention(text)

    def message(self, marker: str) -> str:
        return str(self.ws.post(self.root, marker)["ts"])

    def shown(self, message: str) -> Shown:
        held = self.ws.api.message(CHANNEL, message)
        assert held is not None
        return Shown(str(held["text"]), list(plan_buttons(held)))

    def posts(self) -> list[str]:
        return [str(m["text"]) for m in self.ws.posts(self.root)]

    async def react(self, message: str, approve: bool, by: str) -> None:
        emoji = "white_check_mark" if approve else "x"
        await self.ws.react(message, emoji, by=PEOPLE["slack"][by])

    async def approve_button(self, message: str, by: str) -> None:
        await self.press(message, "Approve", by)

    async def decide_call(self, message: str, call: int, allow: bool, by: str) -> None:
        await self.press(message, f"{'Allow' if allow else 'Deny'} {call}", by)

    async def press(self, message: str, label: str, by: str) -> None:
        """``by`` presses the button labelled ``label`` under the bot message ``message``."""
        held = self.ws.api.message(CHANNEL, message)
        assert held is not None
        await self.ws.press(held, plan_buttons(held)[label], by=PEOPLE["slack"][by])

    async def reply(self, text: str, by: str) -> None:
        await self.ws.reply(self.root, text, by=PEOPLE["slack"][by])

    async def stop(self, by: str) -> None:
        await self.ws.slash("/stop", by=PEOPLE["slack"][by])

    async def settle(self) -> None:
        await self.ws.settle()

    async def snapshot(self) -> ConversationSnapshot:
        return await self.ws.snapshot(self.root)


class DiscordThread:
    def __init__(self, g: Guild) -> None:
        self.g, self.app, self.thread = g, g.hub_app, ""

    def name(self, who: str) -> str:
        return f"<@{PEOPLE['discord'][who]}>"  # Discord shows a mention as the person's name

    async def mention(self, text: str) -> None:
        self.thread = await self.g.mention(text)

    def message(self, marker: str) -> str:
        return str(self.g.post(self.thread, marker)["id"])

    def shown(self, message: str) -> Shown:
        held = self.g.fake.messages[message]
        return Shown(shown_text(held), list(buttons(held)))

    def posts(self) -> list[str]:
        return self.g.posts(self.thread)

    async def react(self, message: str, approve: bool, by: str) -> None:
        await self.g.react(
            self.thread, message, "✅" if approve else "❌", by=PEOPLE["discord"][by]
        )

    async def approve_button(self, message: str, by: str) -> None:
        await self.press(message, "Approve", by)

    async def decide_call(self, message: str, call: int, allow: bool, by: str) -> None:
        await self.press(message, f"{'Allow' if allow else 'Deny'} {call}", by)

    async def press(self, message: str, label: str, by: str) -> None:
        """``by`` presses the button labelled ``label`` under the bot message ``message``."""
        held = self.g.fake.messages[message]
        press = self._as(self.g.interaction_d("interaction_create_button", self.thread), by)
        press["message"] = copy.deepcopy(held)
        press["data"] = {"custom_id": buttons(held)[label], "component_type": 2}
        await self.g.dispatch("INTERACTION_CREATE", press)

    async def reply(self, text: str, by: str) -> None:
        user = PEOPLE["discord"][by]
        d = fixture("message_create_in_thread")
        d.update(id=self.g.fake.snowflake(), channel_id=self.thread, content=text)
        username, global_name = DISCORD_USERS[user]
        d["author"].update(id=user, username=username, global_name=global_name)
        await self.g.dispatch("MESSAGE_CREATE", d)

    async def stop(self, by: str) -> None:
        stop = self._as(self.g.interaction_d("interaction_create_slash_in_thread", self.thread), by)
        await self.g.dispatch("INTERACTION_CREATE", stop)

    def _as(self, d: dict[str, Any], by: str) -> dict[str, Any]:
        user = PEOPLE["discord"][by]
        username, global_name = DISCORD_USERS[user]
        d["member"]["user"].update(id=user, username=username, global_name=global_name)
        return d

    async def settle(self) -> None:
        await self.g.settle()

    async def snapshot(self) -> ConversationSnapshot:
        return await self.g.snapshot(self.thread)


_PRINTED = re.compile(r"^( *)\[(\d+)\] (?:↳\S+ )?threadbot(?: \(edited\))?: ")
_CONTROLS = re.compile(r"^(?:\[[^\]]+\] ?)*(?:\(reactions: [^)]*\))?$")


class ConsoleThread:
    def __init__(self, app: App) -> None:
        self.app, self.chat = app, Chat(app)

    def name(self, who: str) -> str:
        return who  # console people are known by name

    async def mention(self, text: str) -> None:
        await self.chat.mention(text)

    def message(self, marker: str) -> str:
        return self.chat.bot_message(marker)

    def shown(self, message: str) -> Shown:
        """The last print of ``message``: its text lines, then its buttons line."""
        lines = self.chat.out.getvalue().splitlines()
        start = max(i for i, line in enumerate(lines) if _message_id(line) == message)
        header = _PRINTED.match(lines[start])
        assert header is not None
        more = header.group(1) + "    "  # further lines are indented past the first
        text = [lines[start][header.end() :]]
        labels: list[str] = []
        for line in lines[start + 1 :]:
            if not line.startswith(more) or line[len(more)] == " ":
                break
            if _CONTROLS.fullmatch(line.strip()):
                labels = re.findall(r"\[([^\]]+)\]", line)
                break
            text.append(line[len(more) :])
        return Shown("\n".join(text), labels)

    def posts(self) -> list[str]:
        """First lines of the bot's messages as posted (edits not counted)."""
        return re.findall(r"threadbot: ([^\n]*)", self.chat.out.getvalue())

    async def react(self, message: str, approve: bool, by: str) -> None:
        await self.chat.react(message, "white_check_mark" if approve else "x", by=by)
        await self.settle()

    async def approve_button(self, message: str, by: str) -> None:
        await self.react(message, True, by)  # the console has no buttons: its ✅ decides

    async def decide_call(self, message: str, call: int, allow: bool, by: str) -> None:
        await self.chat.decide(message, call, "white_check_mark" if allow else "x", by=by)
        await self.settle()

    async def reply(self, text: str, by: str) -> None:
        await self.chat.reply(text, by=by)

    async def stop(self, by: str) -> None:
        await self.chat.stop(by=by)
        await self.settle()

    async def settle(self) -> None:
        await self.app.hub.settled()

    async def snapshot(self) -> ConversationSnapshot:
        return await self.chat.snapshot()


def _message_id(line: str) -> str | None:
    match = _PRINTED.match(line)
    return match.group(2) if match else None


@contextlib.asynccontextmanager
async def on(platform: str, settings: Settings, model: ScriptedModel) -> AsyncIterator[Thread]:
    """A thread on ``platform`` with the bot running ``model``; Bob is an approver."""
    if platform == "slack":
        settings.approvers = [f"user:{BOB}"]
        async with slack_workspace(settings, model) as ws:
            yield SlackThread(ws)
    elif platform == "discord":
        settings.approvers = [f"user:{D_BOB}"]
        async with discord_guild(settings, model) as g:
            yield DiscordThread(g)
    else:
        settings.approvers = ["bob"]
        app = await build(settings, model=model)
        try:
            await app.start()
            yield ConsoleThread(app)
        finally:
            await app.close()
