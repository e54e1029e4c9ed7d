"""The limits and the system prompt a run works with."""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_SYSTEM_PROMPT = """\
You are threadbot, an agent that works for a team from a chat thread. People talk
to you in the thread; their messages start with their name. Keep messages short
and concrete. Work only inside the conversation's workspace with your tools.
"""


@dataclass(frozen=True, kw_only=True)
class EngineSettings:
    """Limits of a run: model calls per run, tokens per response, tool limits (seconds, chars)."""

    max_turns: int = 30
    max_tokens: int = 4096
    command_timeout: float = 120.0
    output_limit: int = 16_000
    request_ttl: float = 24 * 3600.0
    """Seconds a pending request waits before it expires (a reminder at half)."""
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
