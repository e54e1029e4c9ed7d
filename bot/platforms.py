"""The platform adapters that have credentials, built from the settings.

Each platform's SDK (slack-bolt and slack-sdk, discord.py) is imported only when
its token is set (for Slack, a bot token or the app's OAuth client id: installs), so the
console and ``threadbot --help`` never load them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import SecretStr

from bot.settings import Settings
from conversations.membership import Membership

if TYPE_CHECKING:
    from adapters.discord.runner import DiscordAdapter
    from adapters.slack.runner import SlackAdapter

    PlatformAdapter = SlackAdapter | DiscordAdapter


def platform_adapters(settings: Settings) -> list[PlatformAdapter]:
    """Every platform adapter that has credentials in ``settings``.

    Raises ``ValueError`` for a Slack token without a way to receive events.
    """
    adapters: list[PlatformAdapter] = []
    if settings.slack_bot_token is not None or settings.slack_installs:
        adapters.append(_slack(settings, settings.slack_bot_token))
    if settings.discord_token is not None:
        adapters.append(_discord(settings, settings.discord_token))
    return adapters


def _slack(settings: Settings, token: SecretStr | None) -> SlackAdapter:
    from adapters.slack.oauth import OAuthConfig
    from adapters.slack.runner import SlackAdapter, SlackConfig

    if settings.slack_app_token is None and settings.slack_signing_secret is None:
        what = "SLACK_BOT_TOKEN" if token is not None else "SLACK_CLIENT_ID"
        raise ValueError(
            f"{what} is set: also set SLACK_APP_TOKEN (Socket Mode) or "
            "SLACK_SIGNING_SECRET (HTTP mode)"
        )
    oauth = None
    if settings.slack_client_id is not None and settings.slack_client_secret is not None:
        oauth = OAuthConfig(
            client_id=settings.slack_client_id,
            client_secret=settings.slack_client_secret.get_secret_value(),
            redirect_uri=settings.slack_redirect_uri,
        )
    return SlackAdapter(
        SlackConfig(
            bot_token=_secret(token),
            oauth=oauth,
            app_token=_secret(settings.slack_app_token),
            signing_secret=_secret(settings.slack_signing_secret),
            api_url=settings.slack_api_url,
            host=settings.slack_host,
            port=settings.slack_port,
            stop_command=settings.stop_command,
            allow_bots=settings.allow_bots,
            bot_thread_cap=settings.bot_thread_cap,
            file_threshold=settings.file_threshold,
        )
    )


def _discord(settings: Settings, token: SecretStr) -> DiscordAdapter:
    from adapters.discord.runner import DiscordAdapter, DiscordConfig

    return DiscordAdapter(
        DiscordConfig(
            token=token.get_secret_value(),
            api_url=settings.discord_api_url,
            gateway_url=settings.discord_gateway_url,
            guilds=tuple(settings.discord_guilds),
            stop_command=settings.stop_command,
            allow_bots=settings.allow_bots,
            bot_thread_cap=settings.bot_thread_cap,
            file_threshold=settings.file_threshold,
            shard_count=settings.discord_shard_count,
            shard_ids=tuple(settings.discord_shard_ids),
        )
    )


def directory_for(adapter: PlatformAdapter) -> Membership:
    """The group lookup of ``adapter``'s platform: Slack user groups, Discord roles."""
    if adapter.platform == "slack":
        from adapters.slack.directory import SlackDirectory

        return SlackDirectory(client=adapter.client, teams=adapter.teams)  # type: ignore[arg-type,union-attr]
    from adapters.discord.directory import DiscordDirectory

    return DiscordDirectory(client=adapter.client)  # type: ignore[arg-type]


def _secret(value: SecretStr | None) -> str | None:
    return value.get_secret_value() if value is not None else None
