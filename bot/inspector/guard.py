"""Who may ask the run inspector: the ``Host`` header, the session, the CSRF token; and the
headers every answer carries (docs/architecture.md, "The run inspector").

Every request under ``/inspector`` passes :func:`guard`, in this order:

1. its ``Host`` header, without the port, must be one of ``inspector_hosts`` (or
   ``ops_host``), else **421 Misdirected Request**: a name an attacker's DNS points at
   this address (DNS rebinding, https://en.wikipedia.org/wiki/DNS_rebinding) reads
   nothing, even from a browser on the operator's machine;
2. apart from the sign-in page and the static files, it must carry a session cookie of
   a session that holds (:func:`session_of`), else **401** (a page that links to the
   sign-in, for a browser);
3. a ``POST`` (anything that changes state) must carry the session's CSRF token, as the
   form field ``csrf`` or the header ``X-CSRF-Token``, else **403**.

A session holds while it is kept in the store and not expired, and its operator is still
named in the settings with the token hash it signed in with (the session row keeps a
:func:`token_digest` of it): an operator removed from the settings, or given a new
token, is signed out of every browser at once. A live page's stream asks again before
each event it sends (:func:`still_signed_in`).

The browser holds a random session id in a cookie that is ``HttpOnly`` (no script reads
it) and ``SameSite=Strict`` (no other site's page sends it), because server-sent events
cannot carry an ``Authorization`` header
(https://html.spec.whatwg.org/multipage/server-sent-events.html). The store keeps only
the SHA-256 of the id. The CSRF token is an HMAC of the session id, so it needs no row
and no other site can make one. Signing in and out is :mod:`bot.inspector.sign_in`'s.

:func:`secure_headers` (the application's ``on_response_prepare``, so the event streams
get them too) adds to every answer under ``/inspector`` the headers of :data:`HEADERS`:
no other site may frame a page, nothing but the inspector's own files runs or styles it,
and, but for the static files, nothing is cached (Back after a sign-out shows nothing).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Awaitable, Callable
from urllib.parse import quote

from aiohttp import web

from bot.inspector.web import CSRF, INSPECTOR, OPERATOR, PREFIX, Inspector
from bot.operators import token_sha256
from conversations.store.operator_sessions import OperatorSession

COOKIE = "threadbot_inspector"
"""The session cookie's name."""
OPEN = frozenset({f"{PREFIX}/sign-in"})
"""Paths served without a session (besides the static files)."""
STATIC = f"{PREFIX}/static/"
"""Where the static files are served from (no session needed, cached)."""
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

HEADERS = {
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": (
        "frame-ancestors 'none'; default-src 'self'; img-src 'self' data:; "
        "style-src 'self'; script-src 'self'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}
"""The headers of every answer under ``/inspector``
(https://cheatsheetseries.owasp.org/cheatsheets/HTTP_Headers_Cheat_Sheet.html): no
framing (clickjacking), only the inspector's own scripts and styles (no inline ones), no
type sniffing, no address sent to another site. ``Cache-Control: no-store`` is added to
all but the static files."""


def csrf_token(session_id: str) -> str:
    """The CSRF token of the session ``session_id``: HMAC-SHA256 of a fixed label keyed by
    the id, hex (https://cheatsheetseries.owasp.org/cheatsheets/Cross-Site_Request_Forgery_Prevention_Cheat_Sheet.html,
    "Signed Double-Submit Cookie")."""
    return hmac.new(session_id.encode(), b"threadbot inspector csrf", hashlib.sha256).hexdigest()


def token_digest(token_sha256_hex: str) -> str:
    """The digest a session keeps of its operator's ``token_sha256`` (16 hex digits of
    the SHA-256 of a label and it): a changed token hash no longer matches it."""
    label = f"threadbot inspector session {token_sha256_hex.lower()}"
    return hashlib.sha256(label.encode()).hexdigest()[:16]


def host_name(host: str) -> str:
    """The name of a ``Host`` header without its port, lower case (``[::1]:9464`` ->
    ``::1``)."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def allowed_hosts(inspector: Inspector) -> frozenset[str]:
    """The ``Host`` names accepted: ``inspector_hosts`` and a specific ``ops_host``."""
    names = {h.strip().lower() for h in inspector.settings.inspector_hosts}
    ops_host = inspector.settings.ops_host.strip().lower()
    if ops_host not in ("", "0.0.0.0", "::"):
        names.add(ops_host)
    return frozenset(names)


def inside(path: str) -> bool:
    """Whether ``path`` is the inspector's (``/inspector`` or under it)."""
    return path == PREFIX or path.startswith(PREFIX + "/")


async def session_of(inspector: Inspector, session_id: str) -> OperatorSession | None:
    """The session of the cookie's ``session_id`` when it holds: kept, not expired, and
    its operator named in the settings with the token hash it signed in with; else None."""
    if not session_id:
        return None
    session = await inspector.store.operator_sessions.find(
        token_sha256(session_id), at=inspector.clock()
    )
    if session is None:
        return None
    operator = inspector.settings.operators.get(session.operator)
    if operator is None:
        return None
    expected = token_digest(operator.token_sha256)
    if not hmac.compare_digest(session.token_digest.encode(), expected.encode()):
        return None
    return session


async def still_signed_in(request: web.Request) -> bool:
    """Whether the session ``request`` came with still holds (:func:`session_of`): what a
    long answer (an event stream) asks before it sends more."""
    inspector = request.app[INSPECTOR]
    return await session_of(inspector, request.cookies.get(COOKIE, "")) is not None


@web.middleware
async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
    """The checks of the module docstring, for the paths under ``/inspector``."""
    if not inside(request.path):
        return await handler(request)
    inspector = request.app[INSPECTOR]
    if host_name(request.host) not in allowed_hosts(inspector):
        return web.Response(
            status=421,
            text="misdirected: this host name is not one the inspector serves (inspector_hosts)\n",
        )
    if request.path.startswith(STATIC):
        return await handler(request)
    session_id = request.cookies.get(COOKIE, "")
    session = await session_of(inspector, session_id)
    if session is not None:
        request[OPERATOR] = session.operator
        request[CSRF] = csrf_token(session_id)
    elif request.path not in OPEN:
        return _unauthorised(inspector, request)
    if request.method == "POST" and request.path not in OPEN:
        sent = request.headers.get("X-CSRF-Token", "")
        if not sent and request.content_type == "application/x-www-form-urlencoded":
            sent = str((await request.post()).get("csrf", ""))
        if not hmac.compare_digest(sent.encode(), request[CSRF].encode()):
            return web.Response(
                status=403, text="refused: the form's CSRF token is missing or wrong\n"
            )
    return await handler(request)


def _unauthorised(inspector: Inspector, request: web.Request) -> web.Response:
    """401: a short page linking to the sign-in (coming back here after it)."""
    back = request.path_qs if request.method == "GET" else f"{PREFIX}/"
    response = inspector.render(
        request, "signed_out.html", status=401, sign_in=f"{PREFIX}/sign-in?next={quote(back)}"
    )
    response.headers["WWW-Authenticate"] = 'Cookie realm="threadbot inspector"'
    return response


async def secure_headers(request: web.Request, response: web.StreamResponse) -> None:
    """Add :data:`HEADERS` to an answer under ``/inspector`` (and ``Cache-Control:
    no-store`` unless it is a static file's), as it is prepared: pages, JSON, static
    files, refusals and event streams alike."""
    if not inside(request.path):
        return
    response.headers.update(HEADERS)
    if not request.path.startswith(STATIC):
        response.headers["Cache-Control"] = "no-store"
