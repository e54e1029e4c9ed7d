"""A chat thread driven through the hub, shown by the console adapter.

Tests speak as people do (mention, react, reply, stop) and read what the bot
posted, with the message ids the console gave it.
"""

from __future__ import annotations

import io
import itertools
import re

from adapters.console import ConsoleAdapter
from bot.app import App
from conversations.events import (
    Author,
    CommandInvoked,
    MessagePosted,
    PlatformRef,
    ReactionChanged,
)
from core.vocabulary.snapshot import ConversationSnapshot

_keys = itertools.count(1)


class Chat:
    """One console channel; ``thread`` is the root id of the conversation under test."""

    def __init__(self, app: App) -> None:
        self.app = app
        self.out = io.StringIO()
        self.console = ConsoleAdapter(input=io.StringIO(""), output=self.out)
        app.add_sender(self.console)
        app.add_texts(self.console.texts)
        self.thread = ""
        self._root = PlatformRef(platform="console", channel="console")

    @staticmethod
    def person(name: str) -> Author:
        return Author(id=f"console:{name}", name=name)

    def _ref(self, message: str | None = None, name: str = "alice") -> PlatformRef:
        return self._root.model_copy(
            update={"thread": self.thread or None, "message": message, "user": f"console:{name}"}
        )

    async def mention(self, text: str, *, by: str = "alice", settle: bool = True) -> None:
        self.thread = f"m{next(_keys)}"
        ref = self._root.model_copy(update={"message": self.thread, "user": f"console:{by}"})
        await self.app.hub.handle(
            MessagePosted(
                delivery_key=self.thread,
                ref=ref,
                author=self.person(by),
                text=text,
                mentions_bot=True,
            )
        )
        if settle:
            await self.app.hub.settled()

    async def reply(self, text: str, *, by: str = "alice", settle: bool = True) -> None:
        key = f"m{next(_keys)}"
        await self.app.hub.handle(
            MessagePosted(
                delivery_key=key, ref=self._ref(key, by), author=self.person(by), text=text
            )
        )
        if settle:
            await self.app.hub.settled()

    async def react(
        self, message: str, emoji: str = "white_check_mark", *, by: str = "alice"
    ) -> None:
        await self.app.hub.handle(
            ReactionChanged(
                delivery_key=f"r{next(_keys)}",
                ref=self._ref(message, by),
                author=self.person(by),
                emoji=emoji,
            )
        )

    async def decide(self, message: str, call: int, emoji: str, *, by: str = "alice") -> None:
        await self.app.hub.handle(
            CommandInvoked(
                delivery_key=f"c{next(_keys)}",
                ref=self._ref(message, by),
                author=self.person(by),
                name="decide",
                args=f"{message}.{call} {emoji}",
                means="reaction",
            )
        )

    async def stop(self, *, by: str = "alice") -> None:
        await self.app.hub.handle(
            CommandInvoked(
                delivery_key=f"c{next(_keys)}",
                ref=self._ref(None, by),
                author=self.person(by),
                name="stop",
            )
        )

    def bot_message(self, marker: str, nth: int = -1) -> str:
        """The console id of the bot's ``nth`` message containing ``marker``."""
        ids = re.findall(
            rf"\[(\d+)\] ↳\S+ threadbot: [^\n]*{re.escape(marker)}", self.out.getvalue()
        )
        assert ids, f"no bot message with {marker!r} in:\n{self.out.getvalue()}"
        return ids[nth]

    def said(self) -> list[str]:
        """Texts of the bot's messages (first lines), in order."""
        return re.findall(r"threadbot(?: \(edited\))?: ([^\n]*)", self.out.getvalue())

    async def snapshot(self) -> ConversationSnapshot:
        conversation = await self.app.store.threads.find_by_thread(self._ref())
        assert conversation is not None
        return await self.app.store.journal.load(conversation.id)
