"""Who may ask the run inspector: the ``Host`` header, the session, the CSRF token; and
signing in and out (docs/architecture.md, "The run inspector").

Every request under ``/inspector`` passes :func:`guard`, in this order:

1. its ``Host`` header, without the port, must be one of ``inspector_hosts`` (or
   ``ops_host``), else **421 Misdirected Request**: a name an attacker's DNS points at
   this address (DNS rebinding, https://en.wikipedia.org/wiki/DNS_rebinding) reads
   nothing, even from a browser on the operator's machine;
2. apart from the sign-in page and the static files, it must carry a session cookie of
   an open session, else **401** (a page that links to the sign-in, for a browser);
3. a ``POST`` (anything that changes state) must carry the session's CSRF token, as the
   form field ``csrf`` or the header ``X-CSRF-Token``, else **403**.

An operator signs in once with their token (``[operators.NAME]``, compared in constant
time by :func:`bot.operators.authenticated`); the browser then holds a random session id
in a cookie that is ``HttpOnly`` (no script reads it) and ``SameSite=Strict`` (no other
site's page sends it), because server-sent events cannot carry an ``Authorization``
header (https://html.spec.whatwg.org/multipage/server-sent-events.html). The store keeps
only the SHA-256 of the id. The CSRF token is an HMAC of the session id, so it needs no
row and no other site can make one. Sign-ins, refused sign-ins and sign-outs are audited
as the operator (``sign_in``).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
from collections.abc import Awaitable, Callable
from datetime import timedelta
from urllib.parse import quote, urlsplit

from aiohttp import web

from bot.inspector.web import (
    CSRF,
    INSPECTOR,
    OPERATOR,
    PREFIX,
    Inspector,
    operator_of,
    see_other,
)
from bot.operators import MIN_TOKEN, OperatorRefused, authenticated, token_sha256
from conversations.store.operator_sessions import OperatorSession
from core.vocabulary.audit import SIGN_IN

log = logging.getLogger(__name__)

COOKIE = "threadbot_inspector"
"""The session cookie's name."""
OPEN = frozenset({f"{PREFIX}/sign-in"})
"""Paths served without a session (besides the static files)."""
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def csrf_token(session_id: str) -> str:
    """The CSRF token of the session ``session_id``: HMAC-SHA256 of a fixed label keyed by
    the id, hex (https://cheatsheetseries.owasp.org/cheatsheets/Cross-Site_Request_Forgery_Prevention_Cheat_Sheet.html,
    "Signed Double-Submit Cookie")."""
    return hmac.new(session_id.encode(), b"threadbot inspector csrf", hashlib.sha256).hexdigest()


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


def _inside(path: str) -> bool:
    return path == PREFIX or path.startswith(PREFIX + "/")


@web.middleware
async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
    """The checks of the module docstring, for the paths under ``/inspector``."""
    if not _inside(request.path):
        return await handler(request)
    inspector = request.app[INSPECTOR]
    if host_name(request.host) not in allowed_hosts(inspector):
        return web.Response(
            status=421,
            text="misdirected: this host name is not one the inspector serves (inspector_hosts)\n",
        )
    if request.path.startswith(f"{PREFIX}/static/"):
        return await handler(request)
    session_id = request.cookies.get(COOKIE, "")
    session = None
    if session_id:
        digest = token_sha256(session_id)
        session = await inspector.store.operator_sessions.find(digest, at=inspector.clock())
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
            return web.Response(status=403, text="refused: the form's CSRF token is missing\n")
    return await handler(request)


def _unauthorised(inspector: Inspector, request: web.Request) -> web.Response:
    """401: a short page linking to the sign-in (coming back here after it)."""
    back = request.path_qs if request.method == "GET" else f"{PREFIX}/"
    response = inspector.render(
        request, "signed_out.html", status=401, sign_in=f"{PREFIX}/sign-in?next={quote(back)}"
    )
    response.headers["WWW-Authenticate"] = 'Cookie realm="threadbot inspector"'
    return response


routes = web.RouteTableDef()


def _next(target: str) -> str:
    """Where to go after signing in: a path of the inspector, never another site."""
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or not _inside(parts.path):
        return f"{PREFIX}/"
    return target


@routes.get(f"{PREFIX}/sign-in")
async def sign_in_page(request: web.Request) -> web.Response:
    """The sign-in form: operator name and token."""
    inspector = request.app[INSPECTOR]
    return inspector.render(
        request, "sign_in.html", next=_next(request.query.get("next", "")), refused=""
    )


@routes.post(f"{PREFIX}/sign-in")
async def sign_in(request: web.Request) -> web.Response:
    """Check the operator's name and token; open a session and set its cookie (303 to
    ``next``), or show the form again with 401. Both are audited."""
    inspector = request.app[INSPECTOR]
    form = await request.post()
    name = str(form.get("operator", "")).strip()[:64]
    token = str(form.get("token", "")).strip()
    target = _next(str(form.get("next", "")))
    origin = request.headers.get("Origin")
    if origin is not None and host_name(urlsplit(origin).netloc) != host_name(request.host):
        return web.Response(status=403, text="refused: a sign-in from another site\n")
    try:
        if len(token) < MIN_TOKEN:
            raise OperatorRefused(f"refused: {name!r} is not an operator with this token")
        authenticated(inspector.settings.operators, name, token)
    except OperatorRefused as exc:
        await inspector.audit(
            None, action=SIGN_IN, outcome="refused", reason=str(exc), operator=name
        )
        return inspector.render(request, "sign_in.html", status=401, next=target, refused=str(exc))
    session_id = secrets.token_urlsafe(32)
    now = inspector.clock()
    hours = inspector.settings.inspector_session_hours
    await inspector.store.operator_sessions.open(
        OperatorSession(
            id_sha256=token_sha256(session_id),
            operator=name,
            opened_at=now,
            expires_at=now + timedelta(hours=hours),
        )
    )
    await inspector.audit(None, action=SIGN_IN, outcome="signed_in", operator=name)
    response = see_other(target)
    response.set_cookie(
        COOKIE,
        session_id,
        max_age=int(hours * 3600),
        path=PREFIX,
        httponly=True,
        samesite="Strict",
        secure=request.secure,
    )
    return response


@routes.post(f"{PREFIX}/sign-out")
async def sign_out(request: web.Request) -> web.Response:
    """End this browser's session (on every instance) and forget its cookie; audited."""
    inspector = request.app[INSPECTOR]
    await inspector.store.operator_sessions.close(token_sha256(request.cookies[COOKIE]))
    await inspector.audit(request, action=SIGN_IN, outcome="signed_out")
    log.info("inspector: %s signed out", operator_of(request))
    response = see_other(f"{PREFIX}/sign-in")
    response.del_cookie(COOKIE, path=PREFIX)
    return response
