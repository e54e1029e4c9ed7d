"""What the hub says on Discord (:class:`conversations.texts.PlatformTexts`)."""

from __future__ import annotations

from conversations.texts import PlatformTexts

UNREADABLE = (
    "I can't read messages here: the bot's Message Content intent is off. An admin "
    "can turn it on (Discord Developer Portal -> Bot -> Privileged Gateway Intents); "
    "until then, mention me or use the buttons."
)
"""Posted for a message in a conversation's thread whose content Discord withheld
(https://discord.com/developers/docs/events/gateway#message-content-intent)."""

TEXTS = PlatformTexts(platform="discord", unreadable=UNREADABLE)
