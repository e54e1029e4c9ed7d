"""Slack's OAuth v2 install flow (slack-bolt): ``/slack/install`` and ``/slack/oauth_redirect``.

A person installs the app in their workspace by opening the install path: bolt keeps a
new ``state`` (:class:`adapters.slack.installations.SlackStateStore`), sets it in a
cookie and sends the browser to Slack's consent page; Slack sends it back to the
redirect path with a ``code``, bolt checks the state against the cookie and the store
(once, before it expires), trades the code for the workspace's bot token with
``oauth.v2.access`` (https://docs.slack.dev/reference/methods/oauth.v2.access) and
stores the install (:class:`adapters.slack.installations.SlackInstallationStore`), and
the browser gets bolt's success page
(https://docs.slack.dev/tools/bolt-python/concepts/authenticating-oauth;
``AsyncOAuthFlow``, ``AsyncOAuthSettings``:
https://docs.slack.dev/tools/bolt-python/reference/oauth/async_oauth_settings.html).

The two paths are served beside ``/slack/events`` in HTTP mode, and on the operations
address in Socket Mode (:mod:`bot.ops`), where no other public port is open; put either
behind the HTTPS address registered as the app's redirect URL. The consent page is
Slack's own, at the Web API's host (``SLACK_API_URL`` without ``/api/``, so GovSlack's
when the API is GovSlack's).

Each event is then authorized by bolt with the workspace's bot from the installation
store (``AsyncInstallationStoreAuthorize``, bot only; its ``auth.test`` answer kept per
token), so its listeners know which bot they are in that workspace, and a workspace
with no install gets no listener at all.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response
from slack_bolt.authorization.async_authorize import AsyncInstallationStoreAuthorize
from slack_bolt.oauth.async_oauth_flow import AsyncOAuthFlow
from slack_bolt.oauth.async_oauth_settings import AsyncOAuthSettings
from slack_bolt.request.async_request import AsyncBoltRequest

from adapters.slack.installations import SlackInstallationStore, SlackStateStore

log = logging.getLogger(__name__)

INSTALL_PATH = "/slack/install"
REDIRECT_PATH = "/slack/oauth_redirect"

BOT_SCOPES = (
    "app_mentions:read",
    "channels:history",
    "groups:history",
    "im:history",
    "mpim:history",
    "chat:write",
    "reactions:read",
    "reactions:write",
    "commands",
    "files:write",
    "files:read",
    "users:read",
    "usergroups:read",
    "assistant:write",
)
"""The bot scopes an install asks for: the manifest's (``adapters/slack/manifest.yaml``,
``oauth_config.scopes.bot``; a test keeps them equal)."""


@dataclass(frozen=True, kw_only=True)
class OAuthConfig:
    """The app's OAuth credentials (Basic Information -> App Credentials) and the redirect
    URL registered in the app (OAuth & Permissions -> Redirect URLs; None: the app has one,
    and Slack uses it)."""

    client_id: str
    client_secret: str
    redirect_uri: str | None = None


def authorization_url(api_url: str | None) -> str:
    """Slack's consent page at the Web API's host: ``https://slack.com/api/`` gives
    ``https://slack.com/oauth/v2/authorize``."""
    base = urlsplit(api_url or "https://slack.com/api/")
    path = base.path.rstrip("/").removesuffix("/api") + "/oauth/v2/authorize"
    return urlunsplit((base.scheme, base.netloc, path, "", ""))


def oauth_settings(
    config: OAuthConfig,
    store: SlackInstallationStore,
    states: SlackStateStore,
    *,
    api_url: str | None,
    logger: logging.Logger,
) -> tuple[AsyncOAuthSettings, AsyncInstallationStoreAuthorize]:
    """Bolt's OAuth settings for the app, and the ``authorize`` its events go through."""
    settings = AsyncOAuthSettings(
        client_id=config.client_id,
        client_secret=config.client_secret,
        scopes=list(BOT_SCOPES),
        user_scopes=[],
        redirect_uri=config.redirect_uri,
        install_path=INSTALL_PATH,
        redirect_uri_path=REDIRECT_PATH,
        install_page_rendering_enabled=False,  # the install path sends the browser to Slack
        authorization_url=authorization_url(api_url),
        installation_store=store,
        installation_store_bot_only=True,
        state_store=states,
        state_expiration_seconds=states.expiration_seconds,
        logger=logger,
    )
    authorize = AsyncInstallationStoreAuthorize(
        logger=logger,
        installation_store=store,
        client_id=config.client_id,
        client_secret=config.client_secret,
        bot_only=True,
        cache_enabled=True,  # auth.test once per token, not per event
    )
    return settings, authorize


async def serve_oauth(flow: AsyncOAuthFlow, request: web.Request) -> web.Response:
    """One browser request on the install path or the redirect path, through bolt's flow:
    the install path answers 302 to Slack's consent page (the state in a cookie); the
    redirect path stores the install and answers bolt's page (200 when it worked, 4xx
    for a state or code that does not hold, 500 when the store failed)."""
    bolt_request = AsyncBoltRequest(
        body="",
        query=request.query_string,
        headers=request.headers,  # type: ignore[arg-type]  # a mapping bolt copies
    )
    if request.path == flow.install_path:
        response = await flow.handle_installation(bolt_request)
    else:
        response = await flow.handle_callback(bolt_request)
        if response.status != 200:
            log.warning("Slack install refused (HTTP %s): %s", response.status, request.path)
    return await to_aiohttp_response(response)
