"""The run inspector served in-process on the operations address, and a browser-like
client signed in as an operator (docs/architecture.md, "The run inspector").

``async with inspector_served(store, settings) as served`` starts
:class:`bot.ops.Operations` with the inspector mounted on 127.0.0.1 at a free port;
``await served.client()`` signs in as the operator :data:`OPERATOR` (token
:data:`TOKEN`, named in :func:`with_operator`'s settings) and returns a
:class:`Client` whose ``get`` and ``post`` keep the session cookie (``post`` sends the
session's CSRF token as the form field ``csrf``, as the pages' forms do).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import aiohttp

from bot.inspector.guard import COOKIE, csrf_token
from bot.inspector.routes import install
from bot.inspector.web import Inspector
from bot.metrics import Metrics
from bot.operators import Operator, token_sha256
from bot.ops import Operations
from bot.settings import Settings
from conversations.inspect.commits import Commits
from conversations.stopping import Stopper
from conversations.store.interfaces import Store
from core.secrets import Redactor

OPERATOR = "dana"
"""The operator the harness signs in as."""
TOKEN = "dana-operator-token-0123456789"
"""Their token (test data, not a secret)."""


def with_operator(settings: Settings, **more: Any) -> Settings:
    """``settings`` with the inspector on and :data:`OPERATOR` named (and ``more``)."""
    operators = {**settings.operators, OPERATOR: Operator(token_sha256=token_sha256(TOKEN))}
    return settings.model_copy(update={"inspector": True, "operators": operators, **more})


@dataclass
class Page:
    """A response as the client read it: ``status``, ``text``, ``headers``, final ``url``."""

    status: int
    text: str
    headers: Mapping[str, str]
    url: str


@dataclass
class Client:
    """A browser-like client of the inspector at ``address`` (cookies kept)."""

    address: str
    session: aiohttp.ClientSession
    host: str | None = None
    """A ``Host`` header to send instead of the address's (the 421 tests)."""

    @property
    def session_id(self) -> str:
        """The session id this client's cookie holds ('' before a sign-in)."""
        for cookie in self.session.cookie_jar:
            if cookie.key == COOKIE:
                return cookie.value
        return ""

    @property
    def csrf(self) -> str:
        """The CSRF token of this client's session ('' before a sign-in)."""
        return csrf_token(self.session_id) if self.session_id else ""

    def _headers(self, extra: Mapping[str, str] | None) -> dict[str, str]:
        headers = dict(extra or {})
        if self.host is not None:
            headers["Host"] = self.host
        return headers

    async def get(
        self, path: str, *, headers: Mapping[str, str] | None = None, redirects: bool = True
    ) -> Page:
        """``GET path`` (following redirects unless ``redirects`` is False)."""
        async with self.session.get(
            self.address + path, headers=self._headers(headers), allow_redirects=redirects
        ) as response:
            return Page(response.status, await response.text(), response.headers, str(response.url))

    async def post(
        self,
        path: str,
        data: Mapping[str, str] | None = None,
        *,
        csrf: bool = True,
        headers: Mapping[str, str] | None = None,
        redirects: bool = False,
    ) -> Page:
        """``POST path`` with the form ``data`` (and the session's ``csrf`` unless False);
        redirects are not followed unless asked (a 303 is what a form's POST answers)."""
        form = dict(data or {})
        if csrf:
            form.setdefault("csrf", self.csrf)
        async with self.session.post(
            self.address + path,
            data=form,
            headers=self._headers(headers),
            allow_redirects=redirects,
        ) as response:
            return Page(response.status, await response.text(), response.headers, str(response.url))

    async def sign_in(self, operator: str = OPERATOR, token: str = TOKEN) -> Page:
        """Sign in through the form, as a person would."""
        return await self.post(
            "/inspector/sign-in", {"operator": operator, "token": token}, csrf=False
        )


@dataclass
class Served:
    """The inspector listening at ``address`` (``http://127.0.0.1:PORT``)."""

    address: str
    inspector: Inspector
    _sessions: list[aiohttp.ClientSession] = field(default_factory=list)

    async def client(self, *, signed_in: bool = True, host: str | None = None) -> Client:
        """A new client (cookies of its own), signed in as :data:`OPERATOR` unless not."""
        # unsafe: the jar keeps cookies of an IP address's host (127.0.0.1)
        session = aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True))
        self._sessions.append(session)
        client = Client(self.address, session, host=host)
        if signed_in:
            page = await client.sign_in()
            assert page.status == 303, (page.status, page.text)
        return client


@contextlib.asynccontextmanager
async def inspector_served(
    store: Store,
    settings: Settings,
    *,
    redactor: Redactor | None = None,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    commits: Commits | None = None,
    stopper: Stopper | None = None,
) -> AsyncIterator[Served]:
    """Serve the inspector over ``store`` with ``settings`` (see :func:`with_operator`);
    ``commits``: the engine's (``App.commits``) when the app runs in this process, so the
    live pages hear its commits at once (else they poll); ``stopper``: the hub's
    (``App.hub.stopper``), for the page's Stop."""
    inspector = Inspector(
        store=store,
        settings=settings,
        redactor=redactor or Redactor(),
        clock=clock,
        commits=commits or Commits(),
    )
    ops = Operations(
        host="127.0.0.1",
        port=0,
        health=store.health,
        metrics=Metrics(version="0", instance="test", working=lambda: 0, takeovers=lambda: 0),
        platforms={},
        clock=clock,
    )
    ops.mount(lambda app: install(app, inspector, stopper=stopper))
    address = await ops.start()
    served = Served(address, inspector)
    try:
        yield served
    finally:
        for session in served._sessions:
            await session.close()
        await ops.close()
