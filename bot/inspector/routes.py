"""The run inspector put together on the operations address's application.

:func:`install` adds the guard (:mod:`bot.inspector.guard`) and its headers, the
sign-in (:mod:`bot.inspector.sign_in`), the static files (:func:`static_file`) and every
page's routes to the aiohttp application of :class:`bot.ops.Operations`
(docs/architecture.md, "The run inspector").
"""

from __future__ import annotations

from aiohttp import web

from bot.inspector import actions, guard, listing, sign_in, timeline_page, usage_page
from bot.inspector.actions import STOPPER
from bot.inspector.web import INSPECTOR, PREFIX, STATIC, Inspector
from bot.settings import Settings
from conversations.stopping import Stopper


async def static_file(request: web.Request) -> web.StreamResponse:
    """A file of ``bot/inspector/static/`` (its type from its name, cached by its date and
    ETag), or a plain-text 404 for a path that is no file there (a folder, ``..``)."""
    root = STATIC.resolve()
    path = (root / request.match_info["path"]).resolve()
    if not path.is_relative_to(root) or not path.is_file():
        return web.Response(status=404, text="not found: no such file of the inspector\n")
    return web.FileResponse(path)


def install(app: web.Application, inspector: Inspector, stopper: Stopper | None = None) -> None:
    """Serve the inspector on ``app`` (not started yet): its pages under ``/inspector``,
    each behind :func:`bot.inspector.guard.guard` and with its headers
    (:func:`bot.inspector.guard.secure_headers`); ``stopper``: the hub's, where the bot
    runs beside it (the page's Stop, :mod:`bot.inspector.actions`)."""
    app[INSPECTOR] = inspector
    if stopper is not None:
        app[STOPPER] = stopper
    app.middlewares.append(guard.guard)
    app.on_response_prepare.append(guard.secure_headers)
    app.router.add_get(f"{PREFIX}/static/{{path:.+}}", static_file)
    sign_in.setup(app)
    app.add_routes(sign_in.routes)
    app.add_routes(listing.routes)
    timeline_page.setup(app)
    app.add_routes(timeline_page.routes)
    app.add_routes(usage_page.routes)
    app.add_routes(actions.routes)


def inspector_address(settings: Settings, address: str) -> str:
    """Where a browser finds the inspector of the operations address ``address``
    (``http://host:port``): its ``/inspector/`` there, or, when the address listens on
    every interface (``0.0.0.0``, ``::``), at the first of ``inspector_hosts`` (a browser
    that asks for ``0.0.0.0`` gets 421: it is no name the inspector serves)."""
    host, _, port = address.removeprefix("http://").rpartition(":")
    if host.strip("[]") in ("0.0.0.0", "::") and settings.inspector_hosts:
        name = settings.inspector_hosts[0]
        address = f"http://{f'[{name}]' if ':' in name else name}:{port}"
    return f"{address}{PREFIX}/"
