"""The Slack adapter's Web API clients: three, each with the retries its calls can bear.

slack-sdk's ``AsyncWebClient`` retries what its retry handlers say. The calls the
adapter makes differ in what a retry costs:

- :attr:`WebClients.client` (bolt's, and the look-ups: ``auth.test``,
  ``bots.info``, ``conversations.replies``, ``usergroups.users.list``) waits out a
  429 itself, up to three times (``AsyncRateLimitErrorRetryHandler``), and asks
  once more after a 500 or 503 (``AsyncServerErrorRetryHandler``): nothing changes
  by asking again. It posts nothing.
- :attr:`WebClients.edit_client` (edits and reactions) keeps slack-sdk's default
  retry of a dropped connection and asks once more after a 500 or 503, since doing
  them twice changes nothing, and raises a 429 at once: the deliverer owns
  rate-limit waits, per conversation
  (https://docs.slack.dev/apis/web-api/rate-limits).
- :attr:`WebClients.post_client` (posts and file uploads) retries nothing: a
  connection reset, or a 5xx from Slack or a proxy in front of it, may come after
  Slack took the post, and asking again would post it twice. Such a post is left
  to the deliverer's next attempt, which first looks for it by its outbox key in
  the thread (:mod:`adapters.slack.sending`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

import aiohttp
from slack_sdk.errors import SlackClientError
from slack_sdk.http_retry.async_handler import AsyncRetryHandler
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncRateLimitErrorRetryHandler,
    AsyncServerErrorRetryHandler,
    async_default_handlers,
)
from slack_sdk.http_retry.request import HttpRequest
from slack_sdk.http_retry.response import HttpResponse
from slack_sdk.http_retry.state import RetryState
from slack_sdk.web.async_client import AsyncWebClient

UNREACHABLE: tuple[type[Exception], ...] = (aiohttp.ClientError, TimeoutError, SlackClientError)
"""What slack-sdk raises when Slack did not answer (catch ``SlackApiError``, a refusal,
before it: it is a ``SlackClientError`` too)."""

_RATE_LIMIT_RETRIES = 3
_SERVER_ERROR_RETRIES = 1

RateLimitSeen = Callable[[str], None]
"""Called with the Web API method (``chat.postMessage``) of each HTTP 429 Slack answered."""


class RateLimitCounter(AsyncRetryHandler):
    """A retry handler that retries nothing and tells ``seen`` of every 429, by method.

    slack-sdk asks each of a client's retry handlers in turn after every response
    until one retries; placed first, this one sees every response, including the
    429s that the handlers after it wait out
    (https://docs.slack.dev/tools/python-slack-sdk/reference/http_retry/handler.html).
    """

    def __init__(self, seen: RateLimitSeen) -> None:
        super().__init__(max_retry_count=sys.maxsize)
        self._seen = seen

    async def _can_retry_async(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> bool:
        if response is not None and response.status_code == 429:
            self._seen(urlsplit(request.url).path.rsplit("/", 1)[-1])
        return False


@dataclass(frozen=True)
class WebClients:
    """The three clients of one bot token (see the module docstring for which does what);
    each workspace's are :mod:`adapters.slack.teams`'."""

    client: AsyncWebClient
    edit_client: AsyncWebClient
    post_client: AsyncWebClient

    @classmethod
    def for_token(
        cls,
        token: str | None,
        *,
        base_url: str | None = None,
        rate_limited: RateLimitSeen | None = None,
    ) -> WebClients:
        """Clients for the bot ``token`` (None: calls carry no token unless given one, as
        bolt's calls for an installed workspace are); ``base_url`` replaces the Web API
        base (ends in ``/``); ``rate_limited`` is told of every 429 any of them gets
        (:class:`RateLimitCounter`)."""
        base = base_url or AsyncWebClient.BASE_URL
        counted = [] if rate_limited is None else [RateLimitCounter(rate_limited)]
        return cls(
            client=AsyncWebClient(
                token=token,
                base_url=base,
                retry_handlers=[
                    *counted,
                    AsyncRateLimitErrorRetryHandler(max_retry_count=_RATE_LIMIT_RETRIES),
                    AsyncServerErrorRetryHandler(max_retry_count=_SERVER_ERROR_RETRIES),
                ],
            ),
            edit_client=AsyncWebClient(
                token=token,
                base_url=base,
                retry_handlers=[
                    *counted,
                    *async_default_handlers(),
                    AsyncServerErrorRetryHandler(max_retry_count=_SERVER_ERROR_RETRIES),
                ],
            ),
            post_client=AsyncWebClient(token=token, base_url=base, retry_handlers=[*counted]),
        )
