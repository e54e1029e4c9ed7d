"""Slack's refusals in words: a refused or unanswered Web API call becomes the
:class:`conversations.errors.DeliveryError` the deliverer acts on (docs/architecture.md
"Durability and exactly-once").

Every failure is said in words (it may be shown in the thread: "Slack refused it
(channel_not_found)", "Slack answered with a server error (HTTP 502)"), whatever body came
with it: Slack's JSON error, or a proxy's HTML or plain-text page, which slack-sdk hands
over as an empty or a text body, or as aiohttp's own response when the body claimed to be
JSON and was not (:func:`answer_of`). A 429 becomes :class:`conversations.errors.RateLimited`
with its ``Retry-After`` seconds (https://docs.slack.dev/apis/web-api/rate-limits).
"""

from __future__ import annotations

from slack_sdk.errors import SlackApiError

from conversations.errors import DeliveryError, RateLimited
from conversations.events import AddReaction, OutboundAction

PERMANENT_ERRORS = frozenset(
    {
        "channel_not_found",
        "not_in_channel",
        "is_archived",
        "invalid_auth",
        "account_inactive",
        "msg_too_long",
        "no_text",
        "message_not_found",
        "cant_update_message",
        "missing_scope",
        "invalid_blocks",
    }
)
"""Slack error codes a retry cannot fix: the delivery fails for good (the codes of
https://docs.slack.dev/reference/methods/chat.postMessage#errors and its siblings)."""


def _retry_after(exc: SlackApiError) -> float:
    """Seconds from the ``Retry-After`` header (whole seconds at Slack), 1 if unreadable."""
    try:
        return max(float(exc.response.headers.get("Retry-After") or 1), 0.0)
    except (TypeError, ValueError):
        return 1.0


def answer_of(exc: SlackApiError) -> tuple[int, str | None]:
    """``(HTTP status, Slack's error code)`` of a refused call; the code is None when the
    body held none (it was not Slack's JSON: a proxy's error page, say).

    slack-sdk's ``exc.response`` is an ``AsyncSlackResponse`` whose ``data`` is a dict
    (JSON), a str (a ``text/plain`` body) or empty (a body of another type, such as
    ``text/html``); for a body sent as JSON that does not parse, it is aiohttp's
    ``ClientResponse``, with ``status`` instead of ``status_code`` and no ``data``.
    """
    response = exc.response
    status = getattr(response, "status_code", None) or getattr(response, "status", None)
    data = getattr(response, "data", None)
    code = data.get("error") if isinstance(data, dict) else None
    return (status if isinstance(status, int) else 0), (str(code) if code else None)


def delivery_error(exc: SlackApiError, action: OutboundAction) -> DeliveryError:
    """The failure in words: a 429 to wait out, Slack's refusal, or an HTTP error.

    A refusal is permanent when its code is one a retry cannot fix; a server error
    (5xx) or another answer without Slack's JSON is transient (the deliverer tries
    again, looking first for a post that may have gone through); a reaction is
    never tried again.
    """
    status, code = answer_of(exc)
    if status == 429:
        return RateLimited("Slack asked to slow down (HTTP 429)", retry_after=_retry_after(exc))
    reaction = isinstance(action, AddReaction)
    if code is not None:
        return DeliveryError(
            f"Slack refused it ({code})", permanent=code in PERMANENT_ERRORS or reaction
        )
    if status >= 500:
        return DeliveryError(
            f"Slack answered with a server error (HTTP {status})", permanent=reaction
        )
    return DeliveryError(f"Slack answered HTTP {status} without saying why", permanent=reaction)


def unreachable(exc: BaseException) -> str:
    """A call that got no answer, in words (the exception itself goes to the log)."""
    if isinstance(exc, TimeoutError):
        return "Slack did not answer in time"
    return "Slack could not be reached (the connection failed)"
