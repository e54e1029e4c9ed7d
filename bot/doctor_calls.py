"""The checks of ``threadbot doctor`` that call out, and the :class:`Check` every check makes.

Each configured platform's credentials, and the model API key, are tried with the
cheapest authenticated call there is, through the client the bot uses:

- Slack: ``auth.test`` with the bot token, through slack-sdk's ``AsyncWebClient``
  on ``SLACK_API_URL`` when set ("Checks authentication & identity":
  https://docs.slack.dev/reference/methods/auth.test); an app token must be an
  app-level one (``xapp-``: https://docs.slack.dev/authentication/tokens); without
  one, HTTP mode needs ``SLACK_SIGNING_SECRET``.
- Discord: ``GET /users/@me`` with ``Authorization: Bot <token>`` on
  ``DISCORD_API_URL`` (default: discord.py's base), the bot's own user
  (https://discord.com/developers/docs/resources/user#get-current-user; the
  ``User-Agent`` Discord asks for: https://discord.com/developers/docs/reference#user-agent).
- The model: ``GET /v1/models?limit=1`` with the ``anthropic`` client on
  ``ANTHROPIC_BASE_URL`` when set (https://docs.anthropic.com/en/api/models-list).

A platform without a token is skipped. A refusal shows the platform's error code
(``invalid_auth``, ``401 Unauthorized``, ``authentication_error``), never the
request or the token; :func:`bot.doctor.doctor` redacts every line besides.
Each SDK is imported only when its platform is configured.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from bot.settings import Settings

Mark = Literal["ok", "failed", "skipped"]
MARKS: dict[Mark, str] = {"ok": "✓", "failed": "✗", "skipped": "–"}
TIMEOUT = 15.0
"""Seconds each call may take."""


@dataclass(frozen=True)
class Check:
    """One check's outcome: ``name`` (``"slack"``), ``mark``, and ``said``: what works,
    or what does not and what to do, or why it was skipped."""

    name: str
    mark: Mark
    said: str

    def line(self) -> str:
        """``✓ slack: the bot token works ...``"""
        return f"{MARKS[self.mark]} {self.name}: {self.said}"


def ok(name: str, said: str) -> Check:
    return Check(name, "ok", said)


def failed(name: str, said: str) -> Check:
    return Check(name, "failed", said)


def skipped(name: str, said: str) -> Check:
    return Check(name, "skipped", said)


async def slack_checks(settings: Settings) -> list[Check]:
    """The bot token (``auth.test``) and how events arrive; skipped without a bot token."""
    if settings.slack_bot_token is None:
        return [skipped("slack", "not configured (no SLACK_BOT_TOKEN)")]
    from slack_sdk.errors import SlackApiError
    from slack_sdk.web.async_client import AsyncWebClient

    from adapters.slack.web import UNREACHABLE

    base = settings.slack_api_url or AsyncWebClient.BASE_URL
    client = AsyncWebClient(
        token=settings.slack_bot_token.get_secret_value(), base_url=base, timeout=int(TIMEOUT)
    )
    try:
        answer = await client.auth_test()
    except SlackApiError as exc:
        data = exc.response.data
        error = data.get("error") if isinstance(data, dict) else None
        code = error or f"HTTP {exc.response.status_code}"
        token = failed(
            "slack",
            f"auth.test at {base} refused the bot token ({code}): copy the Bot User OAuth "
            "Token (xoxb-) from OAuth & Permissions into SLACK_BOT_TOKEN",
        )
    except UNREACHABLE as exc:
        token = failed("slack", f"could not reach {base}: {type(exc).__name__}: {exc}")
    else:
        token = ok(
            "slack",
            f"the bot token works (auth.test): workspace {answer.get('team')} "
            f"({answer.get('team_id')}), bot user {answer.get('user')} ({answer.get('user_id')})",
        )
    return [token, _slack_events(settings)]


def _slack_events(settings: Settings) -> Check:
    name = "slack events"
    if settings.slack_app_token is not None:
        if settings.slack_app_token.get_secret_value().startswith("xapp-"):
            return ok(name, "Socket Mode: SLACK_APP_TOKEN is an app-level token (xapp-)")
        return failed(
            name,
            "SLACK_APP_TOKEN does not start with xapp-: create an app-level token with the "
            "connections:write scope (Basic Information -> App-Level Tokens)",
        )
    if settings.slack_signing_secret is not None:
        return ok(
            name,
            "HTTP mode: SLACK_SIGNING_SECRET is set; Slack must reach "
            f"{settings.slack_host}:{settings.slack_port}/slack/events",
        )
    return failed(
        name,
        "neither SLACK_APP_TOKEN (Socket Mode) nor SLACK_SIGNING_SECRET (HTTP mode) is set: "
        "the bot cannot receive events",
    )


async def discord_check(settings: Settings) -> list[Check]:
    """The bot token (``GET /users/@me``); skipped without ``DISCORD_TOKEN``."""
    if settings.discord_token is None:
        return [skipped("discord", "not configured (no DISCORD_TOKEN)")]
    import aiohttp
    import discord
    import discord.http

    base = (settings.discord_api_url or discord.http.Route.BASE).rstrip("/")
    headers = {
        "Authorization": f"Bot {settings.discord_token.get_secret_value()}",
        "User-Agent": f"DiscordBot (https://github.com/Rapptz/discord.py, {discord.__version__})",
    }
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=TIMEOUT)) as session,
            session.get(f"{base}/users/@me", headers=headers) as response,
        ):
            status, reason = response.status, response.reason or "HTTP error"
            body: Any = await response.json(content_type=None) if response.status != 204 else {}
    except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
        return [failed("discord", f"could not reach {base}: {type(exc).__name__}: {exc}")]
    if status == 401:
        return [
            failed(
                "discord",
                f"GET /users/@me at {base} refused the bot token (401 {reason}): copy it from "
                "the developer portal (Bot -> Reset Token) into DISCORD_TOKEN",
            )
        ]
    if status != 200 or not isinstance(body, dict):
        message = body.get("message") if isinstance(body, dict) else None
        return [
            failed("discord", f"GET /users/@me at {base} answered {status} {message or reason}")
        ]
    return [
        ok(
            "discord",
            f"the bot token works (GET /users/@me): bot user {body.get('username')} "
            f"({body.get('id')})",
        )
    ]


async def model_check(settings: Settings) -> list[Check]:
    """The model API key (``GET /v1/models``); skipped for the demo or a scripted model."""
    name = "model API"
    if settings.model_script is not None:
        return [skipped(name, f"a scripted model ({settings.model_script}), no model API")]
    if settings.anthropic_api_key is None:
        return [skipped(name, "demo model (no ANTHROPIC_API_KEY set)")]
    import anthropic

    client = anthropic.AsyncAnthropic(
        api_key=settings.anthropic_api_key.get_secret_value(),
        base_url=settings.anthropic_base_url,
        max_retries=1,
        timeout=TIMEOUT,
    )
    base = str(client.base_url).rstrip("/")
    try:
        async with client:
            await client.models.list(limit=1)
    except anthropic.APIStatusError as exc:
        error = exc.body.get("error") if isinstance(exc.body, dict) else None
        kind = error.get("type") if isinstance(error, dict) else None
        said = error.get("message") if isinstance(error, dict) else None
        code = " ".join(str(part) for part in (exc.status_code, kind, said) if part)
        hint = ": check ANTHROPIC_API_KEY" if exc.status_code in (401, 403) else ""
        return [failed(name, f"GET /v1/models at {base} refused the key ({code}){hint}")]
    except anthropic.APIConnectionError as exc:
        return [failed(name, f"could not reach {base}: {exc}")]
    return [ok(name, f"the key works (GET /v1/models at {base}); model {settings.model}")]
