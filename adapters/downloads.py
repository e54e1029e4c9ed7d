"""Downloading a shared file from a platform's file host, its token going nowhere else.

Each platform's fetcher (:mod:`adapters.slack.files`, :mod:`adapters.discord.files`)
names the origins (scheme, host, port) its files come from and the headers those
hosts get (Slack's bot token; none on Discord). :class:`Downloader` contacts those
origins only:

- a URL on any other origin is refused before a connection is made, whoever gave it
  (an external file, a link a payload was crafted to carry);
- redirects are followed by hand (at most :data:`MAX_REDIRECTS`), each hop checked the
  same way: a redirect to another origin is refused, so the token never follows it
  (aiohttp would follow it and, depending on its version, keep the header), and a
  login page on another host is never taken for the file; ``https`` to ``http`` is
  another origin too;
- no cookies are kept (a ``DummyCookieJar``), no proxy is read from the environment;
- the body is read in chunks and dropped past ``max_bytes``
  (:class:`~conversations.errors.FileTooLarge`).

Failures are :class:`~conversations.errors.FetchFailed` with a short reason that names
the host but never a URL's path or query (Discord's are signed) or a header. The hub
bounds the whole download in time (:class:`conversations.files.FileLimits`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import aiohttp
import yarl

from conversations.errors import FetchFailed, FileTooLarge

MAX_REDIRECTS = 3
"""Redirects followed at most (each to an allowed origin)."""

_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_CHUNK = 64 * 1024


@dataclass(frozen=True)
class Origin:
    """Where a URL points: its scheme, host (lower case) and port (the scheme's default
    when the URL gives none)."""

    scheme: str
    host: str
    port: int

    @classmethod
    def of(cls, url: str | yarl.URL) -> Origin | None:
        """The origin of ``url``; None when it has no scheme, host or port (not absolute),
        or is no URL at all."""
        try:
            parsed = url if isinstance(url, yarl.URL) else yarl.URL(url, encoded=True)
            if not (parsed.scheme and parsed.host and parsed.port):
                return None
        except ValueError:
            return None
        return cls(parsed.scheme.lower(), parsed.host.lower(), parsed.port)


@dataclass(frozen=True)
class Download:
    """A downloaded file: its bytes and the ``content_type`` its host gave (lower case,
    no parameters; ``application/octet-stream`` when none)."""

    data: bytes
    content_type: str


class Downloader:
    """GETs files from ``origins`` only, sending ``headers`` (a token) to them.

    ``platform`` names the platform in the reasons of failures ("Slack").
    """

    def __init__(
        self,
        *,
        platform: str,
        origins: Iterable[Origin],
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self._platform = platform
        self._origins = frozenset(origins)
        self._headers = dict(headers or {})

    def allows(self, url: str | yarl.URL) -> bool:
        """Whether ``url`` is on one of the allowed origins."""
        return Origin.of(url) in self._origins

    async def get(
        self, url: str, *, max_bytes: int, headers: Mapping[str, str] | None = None
    ) -> Download:
        """The file at ``url``, at most ``max_bytes`` bytes; ``headers`` instead of the
        downloader's own (another workspace's token), sent to the same origins only.

        Raises :class:`~conversations.errors.FetchFailed` for a URL or redirect off the
        allowed origins, more than :data:`MAX_REDIRECTS` redirects, a status other than
        200 and a failed connection; :class:`~conversations.errors.FileTooLarge` past
        ``max_bytes``.
        """
        if Origin.of(url) is None:
            raise FetchFailed("its URL is not one the bot can fetch")
        current = yarl.URL(url, encoded=True)
        sent = dict(self._headers if headers is None else headers)
        jar = aiohttp.DummyCookieJar()
        try:
            async with aiohttp.ClientSession(cookie_jar=jar, trust_env=False) as session:
                for _hop in range(MAX_REDIRECTS + 1):
                    self._check(current)
                    async with session.get(
                        current, headers=sent, allow_redirects=False
                    ) as response:
                        if response.status in _REDIRECTS:
                            current = _next(current, response)
                            continue
                        return await _body(response, max_bytes)
        except aiohttp.ClientError as exc:
            reason = type(exc).__name__  # its text may hold the URL
            raise FetchFailed(f"the download from {current.host} failed: {reason}") from None
        raise FetchFailed(f"{current.host} redirected more than {MAX_REDIRECTS} times")

    def _check(self, url: yarl.URL) -> None:
        if not self.allows(url):
            port = f":{url.explicit_port}" if url.explicit_port else ""
            raise FetchFailed(
                f"it is on {url.scheme}://{url.host}{port}, not on a host threadbot takes "
                f"{self._platform} files from"
            )


def _next(current: yarl.URL, response: aiohttp.ClientResponse) -> yarl.URL:
    """Where a redirect points, resolved against ``current``."""
    location = response.headers.get("Location")
    if not location:
        raise FetchFailed(f"{current.host} answered HTTP {response.status} without a Location")
    try:
        return current.join(yarl.URL(location, encoded=True))
    except ValueError:
        raise FetchFailed(f"{current.host} redirected to an address that is no URL") from None


async def _body(response: aiohttp.ClientResponse, max_bytes: int) -> Download:
    """The body of a final answer, read in chunks up to ``max_bytes``."""
    if response.status != 200:
        raise FetchFailed(f"{response.url.host} answered HTTP {response.status}")
    declared = response.content_length
    if declared is not None and declared > max_bytes:
        raise FileTooLarge(f"{declared} bytes, over {max_bytes}", limit=max_bytes)
    chunks: list[bytes] = []
    read = 0
    async for chunk in response.content.iter_chunked(_CHUNK):
        read += len(chunk)
        if read > max_bytes:
            raise FileTooLarge(f"over {max_bytes} bytes", limit=max_bytes)
        chunks.append(chunk)
    content_type = (response.content_type or "application/octet-stream").lower()
    return Download(data=b"".join(chunks), content_type=content_type)
