"""What the hub says in the console (:class:`conversations.texts.PlatformTexts`)."""

from __future__ import annotations

from conversations.texts import PlatformTexts

TEXTS = PlatformTexts(platform="console", decide_usage="Say which call to decide, e.g. +✅ 3.2")
"""The console decides one call with ``+EMOJI N.K`` (:mod:`adapters.console.translate`)."""
