"""Signing in to the run inspector and out of it (docs/architecture.md, "The run
inspector").

- ``GET /inspector/sign-in``: the form (operator name and token); ``?signed-out`` says
  "Signed out.", ``next`` is where to go after it (a path of the inspector only).
- ``POST /inspector/sign-in``: the operator's token is checked in constant time
  (:func:`bot.operators.authenticated`); a session is opened (its id in the cookie, the
  SHA-256 of the id and a :func:`bot.inspector.guard.token_digest` of the operator's
  token hash in the store) and the browser sent to ``next`` (303); refused, the form
  again with 401, the name typed kept. A sign-in posted from another site's page (its
  ``Origin``) is refused (403). After :data:`bot.inspector.refusals.LIMIT` refusals
  within a minute from one client address or as one operator name, this instance
  answers 429 with ``Retry-After``, without checking the token
  (:class:`bot.inspector.refusals.Refusals`).
- ``POST /inspector/sign-out``: the session ends on every instance (the sessions expired
  by then are dropped with it); 303 to the form, which says "Signed out.".

Every sign-in, refused sign-in (the client's address in its reason) and sign-out is a
row of the audit trail (``sign_in``) as ``operator:<name>``; a name given that is not an
operator's name (:func:`bot.operators.is_operator_name`) is recorded as ``operator:?``,
never as typed (it may hold escape codes or line breaks). A limit is recorded once, when
it begins, not at every try it refuses.
"""

from __future__ import annotations

import logging
import secrets
from datetime import timedelta
from urllib.parse import urlsplit

from aiohttp import web

from bot.inspector.guard import COOKIE, host_name, inside, token_digest
from bot.inspector.refusals import Refusals
from bot.inspector.web import INSPECTOR, PREFIX, Inspector, operator_of, see_other
from bot.operators import (
    MIN_TOKEN,
    OperatorRefused,
    authenticated,
    is_operator_name,
    token_sha256,
)
from conversations.store.operator_sessions import OperatorSession
from core.vocabulary.audit import SIGN_IN

log = logging.getLogger(__name__)

REFUSALS = web.AppKey("inspector_refusals", Refusals)
"""This instance's refused sign-ins, on the application (:func:`setup`)."""
SIGNED_OUT = "signed-out"
"""The query parameter of the form shown after a sign-out."""

routes = web.RouteTableDef()


def setup(app: web.Application) -> None:
    """Keep a count of refused sign-ins on ``app`` (in this process's memory)."""
    app[REFUSALS] = Refusals()


def _next(target: str) -> str:
    """Where to go after signing in: a path of the inspector, never another site."""
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or not inside(parts.path):
        return f"{PREFIX}/"
    return target


def _form(
    request: web.Request,
    inspector: Inspector,
    *,
    status: int = 200,
    target: str,
    name: str = "",
    refused: str = "",
    notice: str = "",
) -> web.Response:
    """The sign-in form with ``status``: ``name`` in its operator field, ``refused`` (why
    the last try was refused) or ``notice`` said above it."""
    return inspector.render(
        request,
        "sign_in.html",
        status=status,
        next=target,
        name=name,
        refused=refused,
        notice=notice,
        min_token=MIN_TOKEN,
    )


@routes.get(f"{PREFIX}/sign-in")
async def sign_in_page(request: web.Request) -> web.Response:
    """The sign-in form: operator name and token."""
    inspector = request.app[INSPECTOR]
    notice = "Signed out." if SIGNED_OUT in request.query else ""
    return _form(request, inspector, target=_next(request.query.get("next", "")), notice=notice)


@routes.post(f"{PREFIX}/sign-in")
async def sign_in(request: web.Request) -> web.Response:
    """Check the operator's name and token; open a session and set its cookie (303 to
    ``next``), or show the form again with 401 (429 while limited). Audited."""
    inspector = request.app[INSPECTOR]
    form = await request.post()
    given = str(form.get("operator", "")).strip()
    token = str(form.get("token", "")).strip()
    target = _next(str(form.get("next", "")))
    origin = request.headers.get("Origin")
    if origin is not None and host_name(urlsplit(origin).netloc) != host_name(request.host):
        return web.Response(status=403, text="refused: a sign-in from another site\n")
    address = request.remote or "an unknown address"
    named = is_operator_name(given)
    recorded = given if named else "?"
    shown = given if given.isprintable() else ""  # kept in the form: no control codes
    keys = (f"address {address}", f"operator {given[:64]}")
    refusals = request.app[REFUSALS]
    now = inspector.clock()
    wait = refusals.wait(keys, now)
    if wait is not None:
        if refusals.first_told(keys, now):
            window = int(refusals.window.total_seconds())
            reason = (
                f"sign-ins limited for {wait} s: {refusals.limit} refused within {window} s "
                f"from {address} or as this name"
            )
            await inspector.audit(
                None, action=SIGN_IN, outcome="refused", reason=reason, operator=recorded
            )
        said = f"Too many refused sign-ins: try again in {wait} s."
        limited = _form(request, inspector, status=429, target=target, name=shown, refused=said)
        limited.headers["Retry-After"] = str(wait)
        return limited
    try:
        if not named:
            raise OperatorRefused("refused: not an operator name")
        if len(token) < MIN_TOKEN:
            raise OperatorRefused(f"refused: {given!r} is not an operator with this token")
        authenticated(inspector.settings.operators, given, token)
    except OperatorRefused as exc:
        refusals.refused(keys, now)
        await inspector.audit(
            None,
            action=SIGN_IN,
            outcome="refused",
            reason=f"{exc} (from {address})",
            operator=recorded,
        )
        return _form(request, inspector, status=401, target=target, name=shown, refused=str(exc))
    refusals.succeeded(keys)
    return await _open(request, inspector, given, target)


async def _open(request: web.Request, inspector: Inspector, name: str, target: str) -> web.Response:
    """Open a session for the operator ``name`` (signed in): its row, its audit, its
    cookie; 303 to ``target``."""
    session_id = secrets.token_urlsafe(32)
    now = inspector.clock()
    hours = inspector.settings.inspector_session_hours
    await inspector.store.operator_sessions.open(
        OperatorSession(
            id_sha256=token_sha256(session_id),
            operator=name,
            opened_at=now,
            expires_at=now + timedelta(hours=hours),
            token_digest=token_digest(inspector.settings.operators[name].token_sha256),
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
    ended = token_sha256(request.cookies[COOKIE])
    await inspector.store.operator_sessions.close(ended, at=inspector.clock())
    await inspector.audit(request, action=SIGN_IN, outcome="signed_out")
    log.info("inspector: %s signed out", operator_of(request))
    response = see_other(f"{PREFIX}/sign-in?{SIGNED_OUT}")
    response.del_cookie(COOKIE, path=PREFIX)
    return response
