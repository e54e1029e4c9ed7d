"""One conversation's page: its header and timeline, a large output paged, and the live
updates (docs/architecture.md, "The run inspector").

- ``GET /inspector/conversations/{id}``: the header (where, who, status, workflow,
  times, cost) and ``<ol id="timeline">``, one ``<li data-seq data-kind>`` per journal
  entry shown (:mod:`conversations.inspect`); 404 for an id the store has not.
- ``GET /inspector/outputs/{conversation}/{call}?offset=N``: a page of the call's output,
  the whole of a large one from the output store.
- ``GET /inspector/conversations/{id}/events``: server-sent events
  (https://html.spec.whatwg.org/multipage/server-sent-events.html): ``item`` (``{"seq",
  "html"}``: a new item, or one that changed, to show in its place; its ``id`` the newest
  ``seq`` sent), ``status`` (``{"lifecycle", "last_seq", "html"}``: the header again),
  ``end`` (the conversation is gone) and ``signed_out`` (the session no longer holds:
  signed out, expired, or its operator's token changed or gone; asked again before each
  read's events, :func:`bot.inspector.guard.still_signed_in`, the stream ends after it).
  A reconnect's ``Last-Event-ID`` (else the query's ``after``) is the newest ``seq`` the
  page has: what came after it is sent, and the items up to it that could still change.
  It reads the store, so it follows a run held by another instance too; it ends when the
  client leaves (seen within ``POLL`` seconds), its session no longer holds, or the
  server shuts down (:func:`end_streams`, on the application's ``on_shutdown``).

Every fragment is rendered through :meth:`bot.inspector.web.Inspector.page` (redacted)
and its JSON redacted again.
"""

from __future__ import annotations

import json
import time
from typing import Any

from aiohttp import web

from bot.inspector.guard import still_signed_in
from bot.inspector.web import INSPECTOR, PREFIX, Inspector
from conversations.inspect import timeline
from conversations.inspect.follow import Follow, Seen
from conversations.inspect.items import Header, Item
from conversations.inspect.outputs import output_page

routes = web.RouteTableDef()

POLL = 1.0
"""Seconds between a live page's looks at the store (a run held by another instance)."""
KEEP_ALIVE = 15.0
"""Seconds of quiet after which a comment is sent, so a proxy keeps the stream open."""
RETRY_MS = 2_000
"""How long a browser waits before it reconnects a stream that broke."""

FOLLOWING = web.AppKey("following", set[Follow])
"""The live streams open on the application, ended by :func:`end_streams`."""


def setup(app: web.Application) -> None:
    """Keep the open streams on ``app`` and end them when it shuts down (before the
    server waits for its handlers to finish)."""
    app[FOLLOWING] = set()
    app.on_shutdown.append(end_streams)


async def end_streams(app: web.Application) -> None:
    """End every live stream of ``app`` (each handler returns at its next wait)."""
    for follow in list(app.get(FOLLOWING, ())):
        follow.stop()


@routes.get(PREFIX + "/conversations/{id}")
async def conversation(request: web.Request) -> web.Response:
    """The conversation's page, or 404."""
    inspector = request.app[INSPECTOR]
    cid = request.match_info["id"]
    found = await timeline.read(inspector.store, cid, inspector.redact)
    if found is None:
        return _not_found(request, inspector, f"There is no conversation {cid}.")
    return inspector.render(
        request, "conversation.html", header=found.header, items=found.items, cid=cid
    )


@routes.get(PREFIX + "/outputs/{conversation}/{call}")
async def output(request: web.Request) -> web.Response:
    """A page of a call's output (``offset``: its first character), or 404."""
    inspector = request.app[INSPECTOR]
    cid, call = request.match_info["conversation"], request.match_info["call"]
    try:
        offset = int(request.query.get("offset", "0"))
    except ValueError:
        offset = 0
    page = await output_page(inspector.store, cid, call, offset, inspector.redact)
    if page is None:
        return _not_found(request, inspector, f"Conversation {cid} has no result of {call}.")
    return inspector.render(request, "output.html", page=page)


@routes.get(PREFIX + "/conversations/{id}/events")
async def events(request: web.Request) -> web.StreamResponse:
    """The conversation's live updates as server-sent events (see the module docstring)."""
    inspector = request.app[INSPECTOR]
    cid = request.match_info["id"]
    if await inspector.store.threads.find(cid) is None:
        return _not_found(request, inspector, f"There is no conversation {cid}.")
    follow = Follow(
        inspector.store,
        cid,
        after=_after(request),
        commits=inspector.commits,
        poll=POLL,
        redact=inspector.redact,
    )
    response = web.StreamResponse(
        headers={
            "Content-Type": "text/event-stream",
            "Cache-Control": "no-store",
            "X-Accel-Buffering": "no",  # a proxy in front passes each event on at once
        }
    )
    await response.prepare(request)
    following = request.app[FOLLOWING]
    following.add(follow)
    updates = follow.updates()
    sent = follow.last_seq
    try:
        await response.write(f"retry: {RETRY_MS}\n\n".encode())
        quiet_since = time.monotonic()
        async for seen in updates:
            if request.transport is None or request.transport.is_closing():
                break  # the client left
            if not await still_signed_in(request):
                await response.write(_event("signed_out", inspector, {}).encode())
                break
            text, sent = _events(request, inspector, seen, sent)
            if text:
                await response.write(text.encode())
                quiet_since = time.monotonic()
            elif time.monotonic() - quiet_since >= KEEP_ALIVE:
                await response.write(b": still here\n\n")
                quiet_since = time.monotonic()
            if seen.ended:
                break
    except ConnectionError:
        pass  # the client left while an event was written
    finally:
        following.discard(follow)
        await updates.aclose()
    return response


def _after(request: web.Request) -> int:
    """The newest ``seq`` the page has: ``Last-Event-ID`` (a reconnect), else ``after``."""
    for given in (request.headers.get("Last-Event-ID"), request.query.get("after")):
        if given is not None and given.strip().isdigit():
            return int(given.strip())
    return 0


def _events(request: web.Request, inspector: Inspector, seen: Seen, sent: int) -> tuple[str, int]:
    """The server-sent events of ``seen`` (its items in order, then the header) for a page
    that has every ``seq`` up to ``sent``, and the newest ``seq`` it has after them: each
    item's event id says it, so a reconnect after any event misses nothing."""
    out = []
    for item in seen.items:
        sent = max(sent, item.seq)
        data = {"seq": item.seq, "html": _item(request, inspector, item)}
        out.append(_event("item", inspector, data, sent))
    if seen.header is not None:
        out.append(_event("status", inspector, _status(request, inspector, seen.header)))
    if seen.ended:
        out.append(_event("end", inspector, {}))
    return "".join(out), sent


def _event(name: str, inspector: Inspector, data: dict[str, Any], last: int | None = None) -> str:
    """One event: its name, its id (the newest ``seq`` sent, when given) and its JSON
    data on one line, redacted."""
    payload = inspector.redact(json.dumps(data, ensure_ascii=False))
    ident = f"id: {last}\n" if last is not None else ""
    return f"event: {name}\n{ident}data: {payload}\n\n"


def _item(request: web.Request, inspector: Inspector, item: Item) -> str:
    """One timeline item as the page shows it (``<li data-seq data-kind>``)."""
    cid = request.match_info["id"]
    return inspector.page(request, "timeline_item.html", item=item, cid=cid)


def _status(request: web.Request, inspector: Inspector, header: Header) -> dict[str, Any]:
    """The ``status`` event's data: the lifecycle, the newest ``seq``, the header's HTML."""
    html = inspector.page(request, "conversation_header.html", header=header)
    return {"lifecycle": header.lifecycle, "last_seq": header.last_seq, "html": html}


def _not_found(request: web.Request, inspector: Inspector, what: str) -> web.Response:
    """The 404 page, saying ``what`` was not found."""
    return inspector.render(request, "not_found.html", status=404, what=what)
