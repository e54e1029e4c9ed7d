"""Fetching the files people share on Slack, with the bot token sent to Slack's file host only.

A shared file's ``url_private_download`` (https://api.slack.com/types/file) is on
``files.slack.com`` and answers only with ``Authorization: Bearer <bot token>`` from an
app with the ``files:read`` scope. :class:`SlackFiles` sends that header to
``https://files.slack.com`` and to the origin of the configured Web API URL
(``SLACK_API_URL``: a proxy, or a local fake in tests), and to nothing else: a URL on
another host (an external file's, say) is refused, and so is a redirect to another
host (:mod:`adapters.downloads`). Without ``files:read`` Slack answers with its login
page instead of the file, which is refused too with a hint.

With installs (:mod:`adapters.slack.teams`), a file goes with the token of the workspace
it was shared in, read from its URL (``/files-pri/T0123ABCD-F0456/...``, the team id
before the file id); a URL that names none goes with the default token.
"""

from __future__ import annotations

import re

from adapters.downloads import Downloader, Origin
from adapters.slack.teams import TokenOf
from conversations.errors import FetchFailed
from conversations.events import Attachment

FILES_HOST = Origin("https", "files.slack.com", 443)
"""Where Slack serves ``url_private`` and ``url_private_download``."""

_TEAM_IN_URL = re.compile(r"/files-pri/([TE][A-Z0-9]+)-F[A-Z0-9]+/")
"""The workspace a file's URL names (``/files-pri/T0123ABCD-F0456ABCD/name``)."""


class SlackFiles:
    """Fetches Slack files with ``token``; a :class:`conversations.files.FileFetcher`.

    ``api_url``: the Web API base the adapter uses, when it is not Slack's own; its
    origin is trusted with the token too. ``token_of``: each workspace's token (installs),
    used instead of ``token`` for a file whose URL names its workspace.
    """

    platform = "slack"

    def __init__(
        self, *, token: str | None, api_url: str | None = None, token_of: TokenOf | None = None
    ) -> None:
        self._token_of = token_of
        origins = {FILES_HOST}
        configured = Origin.of(api_url) if api_url else None
        if configured is not None:
            origins.add(configured)
        self._downloader = Downloader(
            platform="Slack",
            origins=origins,
            headers={"Authorization": f"Bearer {token}"} if token else {},
        )

    def allows(self, url: str) -> bool:
        """Whether the token would be sent to ``url`` (its origin is trusted)."""
        return self._downloader.allows(url)

    async def fetch(self, attachment: Attachment, *, max_bytes: int) -> bytes:
        """The bytes of ``attachment`` (see :meth:`conversations.files.FileFetcher.fetch`)."""
        headers = None
        named = _TEAM_IN_URL.search(attachment.url)
        if self._token_of is not None and named is not None:
            token = await self._token_of(named.group(1))
            if token is None:
                raise FetchFailed(f"the app is not installed in Slack workspace {named.group(1)}")
            headers = {"Authorization": f"Bearer {token}"}
        download = await self._downloader.get(attachment.url, max_bytes=max_bytes, headers=headers)
        shared_type = attachment.media_type.split(";", 1)[0].strip().lower()
        if download.content_type == "text/html" and shared_type != "text/html":
            raise FetchFailed(
                "Slack sent a web page instead of the file: does the app have the files:read scope?"
            )
        return download.data
