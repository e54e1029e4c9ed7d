"""The run inspector's list of conversations: ``GET /inspector/``.

One row per conversation, newest first
(:meth:`conversations.store.inspection.Inspection.conversations`): where it is, who
started it, its status, its workflow and state, when it started, how long it ran and
what its model calls cost; filtered and searched by the query parameters of the page's
form, a page at a time (docs/architecture.md, "The run inspector"). The query
parameters, each optional:

- ``platform``, ``workspace``, ``channel``, ``requester`` (a platform user id),
  ``workflow``: exact values (see :class:`conversations.store.inspection.ConversationFilter`);
- ``status``: a lifecycle status (``idle``, ``running``, ``waiting``, ``done``,
  ``failed``, ``cancelled``);
- ``q``: a search in the first request's text and the conversation's id;
- ``after``: the cursor of the page before (the "next page" link carries it);
- ``limit``: rows on a page, 1 to 100 (50 by default).

A value the page cannot read (an unknown status, a cursor it did not make, a limit out
of range) answers 400 with the form and what was wrong.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote_plus, urlencode

from aiohttp import web

from bot.inspector.web import INSPECTOR, PREFIX, query
from conversations.store.inspection import (
    MAX_PAGE_SIZE,
    PAGE_SIZE,
    ConversationFilter,
    ConversationPage,
    Cursor,
)
from core.vocabulary.lifecycle import Lifecycle

routes = web.RouteTableDef()

FILTERS = ("platform", "workspace", "channel", "status", "requester", "workflow", "q")
"""The form's fields, in its order: every query parameter but ``after`` and ``limit``."""
PLATFORMS = ("slack", "discord", "console")
"""The platforms the form offers."""
STATUSES = tuple(status.value for status in Lifecycle)
"""The lifecycle statuses the form offers."""


@dataclass(frozen=True)
class Asked:
    """What a request's query asks for: the filter, the cursor and the page size."""

    where: ConversationFilter
    after: Cursor | None
    limit: int


def asked(values: Mapping[str, str]) -> Asked:
    """The page ``values`` (the query parameters, stripped, empty ones left out) ask for;
    raises :class:`ValueError` naming the parameter that cannot be read."""
    status = values.get("status")
    if status is not None and status not in STATUSES:
        raise ValueError(f"status: {status!r} is none of {', '.join(STATUSES)}")
    where = ConversationFilter(
        platform=values.get("platform"),
        workspace=values.get("workspace"),
        channel=values.get("channel"),
        lifecycle=Lifecycle(status) if status is not None else None,
        requester=values.get("requester"),
        workflow=values.get("workflow"),
        text=values.get("q"),
    )
    after = Cursor.parse(values["after"]) if "after" in values else None
    limit_text = values.get("limit", str(PAGE_SIZE))
    if not limit_text.isdigit() or not 1 <= int(limit_text) <= MAX_PAGE_SIZE:
        raise ValueError(f"limit: a page holds 1 to {MAX_PAGE_SIZE} rows, not {limit_text!r}")
    return Asked(where=where, after=after, limit=int(limit_text))


def link(values: Mapping[str, str], **changed: str | None) -> str:
    """The list's URL with the query ``values``, ``changed`` set (None: left out)."""
    merged = {**values, **changed}
    kept = {key: value for key, value in merged.items() if value}
    return f"{PREFIX}/" + (f"?{urlencode(kept)}" if kept else "")


class Narrowing:
    """The list's URLs that narrow the query ``values`` (``after`` left out: a narrower
    list starts at its first page) by one more filter: ``narrowing("channel", "C1")``.
    The rest of the query is encoded once per filter, not once per row."""

    def __init__(self, values: Mapping[str, str]) -> None:
        self._values = {key: value for key, value in values.items() if key != "after"}
        self._bases: dict[str, str] = {}

    def __call__(self, key: str, value: str) -> str:
        base = self._bases.get(key)
        if base is None:
            others = {k: v for k, v in self._values.items() if k != key}
            base = self._bases[key] = f"{PREFIX}/?" + (f"{urlencode(others)}&" if others else "")
        return f"{base}{key}={quote_plus(value)}"


@routes.get(f"{PREFIX}/")
async def conversations(request: web.Request) -> web.Response:
    """The list page (see the module docstring)."""
    inspector = request.app[INSPECTOR]
    values = query(request)
    try:
        wanted = asked(values)
    except ValueError as exc:
        return inspector.render(
            request,
            "conversations.html",
            status=400,
            **_context(values, ConversationPage(rows=[], next=None), problem=str(exc)),
        )
    page = await inspector.store.inspection.conversations(
        wanted.where, after=wanted.after, limit=wanted.limit
    )
    return inspector.render(request, "conversations.html", **_context(values, page))


def _context(
    values: Mapping[str, str], page: ConversationPage, *, problem: str = ""
) -> dict[str, Any]:
    return {
        "rows": page.rows,
        "values": values,
        "platforms": PLATFORMS,
        "statuses": STATUSES,
        "limit": values.get("limit", ""),
        "next_page": link(values, after=page.next.token()) if page.next else "",
        "first_page": link(values, after=None) if "after" in values else "",
        "problem": problem,
        "narrowed": Narrowing(values),
    }
