"""Fetching the files people attach on Discord: from Discord's CDN only, with no token.

An attachment's ``url`` (https://discord.com/developers/docs/resources/message#attachment-object)
is a signed link on ``cdn.discordapp.com`` (``proxy_url``: on ``media.discordapp.net``)
that needs no authorization. :class:`DiscordFiles` fetches from those two hosts and
from the origin of the configured REST URL (``DISCORD_API_URL``: a proxy, or a local
fake in tests), never sending the bot token (discord.py's ``Authorization: Bot ...``
is not used for downloads at all): a URL on another host, or a redirect to one, is
refused (:mod:`adapters.downloads`).
"""

from __future__ import annotations

from adapters.downloads import Downloader, Origin
from conversations.events import Attachment

CDN_HOSTS = (
    Origin("https", "cdn.discordapp.com", 443),
    Origin("https", "media.discordapp.net", 443),
)
"""Where Discord serves attachments."""


class DiscordFiles:
    """Fetches Discord attachments, without a token; a :class:`conversations.files.FileFetcher`.

    ``api_url``: the REST base the adapter uses, when it is not Discord's own; its origin
    is allowed too.
    """

    platform = "discord"

    def __init__(self, *, api_url: str | None = None) -> None:
        origins = set(CDN_HOSTS)
        configured = Origin.of(api_url) if api_url else None
        if configured is not None:
            origins.add(configured)
        self._downloader = Downloader(platform="Discord", origins=origins)

    def allows(self, url: str) -> bool:
        """Whether ``url`` is on a host attachments are fetched from."""
        return self._downloader.allows(url)

    async def fetch(self, attachment: Attachment, *, max_bytes: int) -> bytes:
        """The bytes of ``attachment`` (see :meth:`conversations.files.FileFetcher.fetch`)."""
        download = await self._downloader.get(attachment.url, max_bytes=max_bytes)
        return download.data
