"""Requests no listener takes: answered 200 at once, never bolt's 404.

threadbot listens to events, slash commands and button clicks. Slack also sends a
workspace's app other well-formed bodies: ``app_rate_limited`` (a top-level type,
no inner event), a modal's ``view_submission`` and ``view_closed``, the option
requests ``block_suggestion`` and ``dialog_suggestion``, the ``shortcut`` and
``message_action`` shortcuts, and whatever a later manifest adds. bolt answers
404 to a request no listener matches, and over Socket Mode it acks only a 200
(``slack_bolt/adapter/socket_mode/async_internals.py``), so such an envelope is
never acknowledged. Either way Slack takes it as a failed delivery: it retries
(https://docs.slack.dev/apis/events-api/#retries), and past 5% failures in an hour
it disables the app's event subscriptions
(https://docs.slack.dev/reference/events/app_rate_limited/). Every request must be
answered within 3 s
(https://docs.slack.dev/interactivity/handling-user-interaction#acknowledgment_response).

So the app is built with bolt's ``raise_error_for_unhandled_request``, and
:class:`UnhandledRequests` is its error handler: bolt hands it a request that
passed every middleware (the signature check included: a forged body is refused
with 401 before it gets here) and no listener took, and it answers 200 with an
empty body before anything else; the request is dropped, and ``app_rate_limited``
is logged once per team and minute (:class:`RateLimitNotices`). Any other error
is logged as bolt's own handlers do, and bolt's answer (500) stands.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from slack_bolt.error import BoltUnhandledRequestError
from slack_bolt.response import BoltResponse

from adapters.drops import label
from adapters.fields import integer, text

log = logging.getLogger(__name__)

RATE_LIMITED = "app_rate_limited"
"""The body Slack posts when the app passes its Events API limit for a workspace
(https://api.slack.com/apis/connections/events-api#rate-limiting)."""


class RateLimitNotices:
    """Says once per team and minute that Slack rate limits the app's events.

    Slack posts ``app_rate_limited`` (``{"type", "team_id", "minute_rate_limited",
    "api_app_id", "token"}``; ``minute_rate_limited`` is the epoch second, rounded
    to the minute, at which limiting began:
    https://docs.slack.dev/reference/events/app_rate_limited/) again while the
    limit lasts, and retries it like any delivery. The first notice of a team for
    a minute is logged at WARNING with the team id, the minute and its UTC time;
    the same minute again, or an earlier one, is logged at DEBUG. Memory: one
    minute per team.
    """

    def __init__(self) -> None:
        self._latest: dict[str, int] = {}

    def notice(self, body: Mapping[str, Any]) -> None:
        """Log the ``app_rate_limited`` ``body`` unless its team's minute was logged."""
        team = text(body.get("team_id")) or "?"
        minute = integer(body.get("minute_rate_limited"))
        if minute is None:
            log.warning(
                "Slack is rate limiting this app's events from team %s (minute_rate_limited %s)",
                label(team),
                label(body.get("minute_rate_limited")),
            )
            return
        latest = self._latest.get(team)
        if latest is not None and minute <= latest:
            log.debug("app_rate_limited again for team %s, minute %d", label(team), minute)
            return
        self._latest[team] = minute
        log.warning(
            "Slack is rate limiting this app's events from team %s since %s "
            "(minute_rate_limited %d): events past 30,000 an hour from one workspace are "
            "not delivered (https://docs.slack.dev/reference/events/app_rate_limited/)",
            label(team),
            _utc_minute(minute),
            minute,
        )


class UnhandledRequests:
    """bolt's error handler: a request no listener took gets 200 (module docstring).

    Register it with ``app.error(UnhandledRequests().handle)`` on an ``AsyncApp``
    built with ``raise_error_for_unhandled_request=True``.
    """

    def __init__(self) -> None:
        self.rate_limits = RateLimitNotices()

    async def handle(self, error: Exception, body: Any) -> BoltResponse | None:
        """Answer an unhandled request 200 (bolt sends that); log any other ``error``.

        ``body`` is the parsed request body bolt passes. Returns the response bolt
        copies onto its own for an unhandled request, else None (bolt's answer
        stands: 500 for a failed middleware; a failed listener has been acked).
        """
        if not isinstance(error, BoltUnhandledRequestError):
            log.error("a Slack request failed in bolt: %r", error, exc_info=error)
            return None
        kind = body.get("type") if isinstance(body, Mapping) else None
        if kind == RATE_LIMITED:
            self.rate_limits.notice(body)
        else:
            log.debug("slack: %s requests are not used; answered 200 and dropped", label(kind))
        return BoltResponse(status=200, body="")


def _utc_minute(epoch: int) -> str:
    """``2024-05-31 16:09 UTC`` for an epoch second; ``?`` when out of range."""
    try:
        return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M UTC")
    except (OverflowError, OSError, ValueError):
        return "?"
