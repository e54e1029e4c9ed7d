"""Bolt's app as threadbot runs it: one bot token's, or the OAuth flow's with installs.

:func:`bolt_app` builds slack-bolt's ``AsyncApp``: with one bot token, bolt authorizes
every request with that token (its ``auth.test`` once); with installs
(:mod:`adapters.slack.oauth`), with each request's workspace's bot from the installation
store, and bolt's own listeners remove an install on ``app_uninstalled`` and
``tokens_revoked`` (``enable_token_revocation_listeners``:
https://docs.slack.dev/tools/bolt-python/concepts/authenticating-oauth). :func:`me_in`
says who the bot is in the workspace of a request (bolt's context: each workspace has its
own bot user). :func:`dispatch_http` hands one HTTP request to bolt, a malformed body
refused with 400 first (:mod:`adapters.slack.envelopes`), and signature headers that
slack-sdk's check cannot read with 401 (:func:`unreadable_signature`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any

from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response
from slack_bolt.app.async_app import AsyncApp
from slack_bolt.context.async_context import AsyncBoltContext
from slack_bolt.logger.messages import (
    warning_client_prioritized_and_token_skipped,
    warning_token_skipped,
)
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_sdk.web.async_client import AsyncWebClient

from adapters.fields import mapping, text
from adapters.slack.envelopes import Malformed, read_http_body
from adapters.slack.installations import SlackInstallationStore, SlackStateStore
from adapters.slack.oauth import OAuthConfig, oauth_settings
from adapters.slack.translate import BotIdentity

log = logging.getLogger("adapters.slack.runner")

_TIMESTAMP = re.compile(r"[0-9]{1,15}")
"""A request timestamp slack-sdk can check: Unix seconds, ASCII digits (15 of them
reach past the year 30,000,000)."""

_TOKEN_NOTICES = frozenset(
    {warning_client_prioritized_and_token_skipped(), warning_token_skipped()}
)


def bolt_app(
    signing_secret: str | None,
    *,
    client: AsyncWebClient,
    socket_mode: bool,
    oauth: OAuthConfig | None = None,
    installations: SlackInstallationStore | None = None,
    api_url: str | None = None,
) -> AsyncApp:
    """Bolt's app over ``client`` (see the module docstring); signatures are checked with
    ``signing_secret`` in HTTP mode (Socket Mode needs none)."""
    extra: dict[str, Any] = {}
    if oauth is not None and installations is not None:
        extra["oauth_settings"], extra["authorize"] = oauth_settings(
            oauth,
            installations,
            SlackStateStore(installations),
            api_url=api_url,
            logger=bolt_logger(),
        )
        extra["installation_store_bot_only"] = True
    app = AsyncApp(
        client=client,
        signing_secret=signing_secret or "socket-mode-needs-no-secret",
        request_verification_enabled=not socket_mode,
        logger=bolt_logger(),
        raise_error_for_unhandled_request=True,
        **extra,
    )
    if oauth is not None:
        app.enable_token_revocation_listeners()
    return app


def me_in(
    me: BotIdentity | None, context: AsyncBoltContext | None, body: Any
) -> BotIdentity | None:
    """Who the bot is in the workspace of a request: bolt's authorized bot there (each
    workspace's own with installs), else ``me``, the identity learned at start (None
    before it: the request is dropped)."""
    if me is None or context is None or not context.bot_user_id:
        return me
    return BotIdentity(
        user_id=context.bot_user_id,
        bot_id=context.bot_id or "",
        app_id=me.app_id or text(mapping(body).get("api_app_id")) or "",
        team_id=context.team_id or me.team_id,
    )


async def dispatch_http(app: AsyncApp, request: web.Request) -> web.Response:
    """One HTTP request from Slack, through bolt; a malformed body gets 400, not 500.

    The body is checked before bolt sees it (:func:`read_http_body`: bolt raises or
    answers 500 on bodies of the wrong shape), so the check comes before bolt's signature
    check too: malformed bodies, signed or not, get 400 and a log line; a well-formed one
    with a bad signature gets bolt's 401, and so does one whose signature headers
    :func:`unreadable_signature` refuses, with a log line at ``INFO`` as bolt's.
    """
    raw = await request.read()
    body = read_http_body(raw, request.content_type)
    if isinstance(body, Malformed):
        return _refused(body, request, len(raw))
    unreadable = unreadable_signature(request.headers)
    if unreadable:
        log.info("Slack HTTP: refused a request with 401: %s", unreadable)
        return web.json_response({"error": "invalid request"}, status=401)
    try:
        bolt_request = AsyncBoltRequest(
            body=body,
            query=request.query_string,
            headers=request.headers,  # type: ignore[arg-type]  # a mapping bolt copies
        )
    except (ValueError, TypeError, AttributeError, KeyError, IndexError) as exc:
        return _refused(Malformed(f"bolt could not read it: {exc!r}"), request, len(raw))
    return await to_aiohttp_response(await app.async_dispatch(bolt_request))


def unreadable_signature(headers: Mapping[str, str]) -> str:
    """Why slack-sdk's signature check would raise on ``headers`` rather than answer, or "".

    ``SignatureVerifier.is_valid`` (slack-sdk 3) runs ``int()`` on
    ``X-Slack-Request-Timestamp`` (``ValueError`` for ``abc``; ``OverflowError`` once
    400 digits meet the clock's float) and ``hmac.compare_digest`` on ``X-Slack-Signature``
    (``TypeError`` for a non-ASCII string), and bolt turns what it raises into a 500 and
    a traceback. Slack sends Unix seconds and ``v0=`` with a hex digest
    (https://docs.slack.dev/authentication/verifying-requests-from-slack/). A missing
    header is left to bolt, which refuses the request with 401 itself.
    """
    for name, value in headers.items():  # every value: bolt keeps a repeated header's last
        match name.lower():
            case "x-slack-request-timestamp" if not _TIMESTAMP.fullmatch(value):
                return f"X-Slack-Request-Timestamp is not Unix seconds ({len(value)} characters)"
            case "x-slack-signature" if not value.isascii():
                return "X-Slack-Signature is not ASCII"
    return ""


class _WithoutTokenNotice(logging.Filter):
    """Drops bolt's "As you gave `client` as well, `token` will be unused." and, with
    installs, "As `installation_store` or `authorize` has been used, `token` ... will be
    ignored.": bolt reads ``SLACK_BOT_TOKEN`` from the environment by itself, and the
    adapter hands it the client built from that very token (which serves its own
    workspace through the installation store), so each notice is true of every start and
    says nothing to an operator."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() not in _TOKEN_NOTICES


def bolt_logger() -> logging.Logger:
    """bolt's own logger (``slack_bolt.AsyncApp``) without its token notice."""
    logger = logging.getLogger("slack_bolt.AsyncApp")
    if not any(isinstance(f, _WithoutTokenNotice) for f in logger.filters):
        logger.addFilter(_WithoutTokenNotice())
    return logger


def _refused(malformed: Malformed, request: web.Request, size: int) -> web.Response:
    """Answer 400 to a malformed request body, with one log line (no traceback)."""
    log.warning(
        "Slack HTTP: refused a malformed %s body of %d bytes with 400: %s",
        request.content_type,
        size,
        malformed.reason,
    )
    return web.Response(status=400, text=f"malformed request: {malformed.reason}\n")
