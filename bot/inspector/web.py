"""What the run inspector's pages use: the store, templates, JSON and the audit.

:class:`Inspector` is kept on the operations address's aiohttp application under
:data:`INSPECTOR`; a page reads it with ``request.app[INSPECTOR]`` and the operator
signed in with :func:`operator_of` (the guard, :mod:`bot.inspector.guard`, let the
request through only with a session, docs/architecture.md "The run inspector").

Everything served goes through the redactor (:class:`core.secrets.Redactor`): a token
or key that reached the journal, a tool's output or a name is never shown. Every page
shows the bidirectional control characters a text holds as markers (:func:`unbidi`), so
no text can show itself in another order than it has (``evil`` as ``live``).
Templates are Jinja2's (https://jinja.palletsprojects.com/en/stable/api/#autoescaping),
with autoescaping on, from ``bot/inspector/templates/``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import jinja2
import markupsafe
from aiohttp import web

from bot.settings import Settings
from conversations.events import PlatformRef
from conversations.inspect.commits import Commits
from conversations.store.interfaces import Store
from core.secrets import Redactor
from core.vocabulary.audit import Audited, Outcome

TEMPLATES = Path(__file__).parent / "templates"
"""The pages' Jinja2 templates."""
STATIC = Path(__file__).parent / "static"
"""The files served under ``/inspector/static/`` (styles, scripts, vendored libraries)."""
PREFIX = "/inspector"
"""Where the inspector's paths start."""
WHERE = PlatformRef(platform="inspector", channel="")
"""Where an inspector action is recorded in the audit trail when it concerns no
conversation (a sign-in): the platform ``inspector``, no channel."""

OPERATOR = web.RequestKey("operator", str)
"""The signed-in operator's name on a request the guard let through."""
CSRF = web.RequestKey("csrf", str)
"""The CSRF token of the request's session (what a form sends back as ``csrf``)."""


def operator_of(request: web.Request) -> str:
    """The name of the operator signed in for ``request`` (the guard set it)."""
    return request[OPERATOR]


def dollars(micro: int | None) -> str:
    """A cost in micro-USD as dollars with four decimals (``$0.0123``); ``-`` for None
    (no price known)."""
    if micro is None:
        return "-"
    return f"${micro / 1_000_000:,.4f}"


def cost(calls: int, unpriced: int, micro: int | None) -> str:
    """What ``calls`` model calls cost, as the list and a conversation's page both say it
    (``unpriced``: how many had no price; ``micro``: the priced ones' cost in micro-USD,
    :func:`conversations.store.inspection.priced`): ``-`` with no call; ``- (N without a
    price)`` when none had a price; else the dollars (:func:`dollars`), with ``(N without
    a price)`` when some had none."""
    if not calls:
        return "-"
    said = "-" if micro is None else dollars(micro)
    return f"{said} ({unpriced} without a price)" if unpriced else said


BIDI = re.compile("[\u202a-\u202e\u2066-\u2069]")
"""The bidirectional embedding, override and isolate controls (U+202A to U+202E, U+2066
to U+2069): https://www.unicode.org/reports/tr9/#Explicit_Directional_Embeddings."""


def unbidi(text: str) -> str:
    """``text`` with each bidirectional control character (:data:`BIDI`) shown as a marker,
    ``[U+202E]``, so it shows its characters in the order they have."""
    return BIDI.sub(lambda found: f"[U+{ord(found.group()):04X}]", text)


def when(moment: datetime | None) -> str:
    """A time as ``2026-12-06 19:30:05 UTC``; ``-`` for None."""
    if moment is None:
        return "-"
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def duration(span: float | timedelta | None) -> str:
    """Seconds (or a span) in words: ``850 ms``, ``12.3 s``, ``4 min 05 s``, ``2 h 03 min``;
    ``-`` for None."""
    if span is None:
        return "-"
    seconds = span.total_seconds() if isinstance(span, timedelta) else span
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {rest:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


@dataclass
class Inspector:
    """What the inspector's pages use: ``store`` (the bot's), ``settings``, ``redactor``
    (applied to everything served) and ``clock`` (aware UTC); ``commits``: this process's
    commits, told at once to the live pages (:mod:`conversations.inspect.commits`; one
    of its own when the engine's is not given: the pages then poll alone)."""

    store: Store
    settings: Settings
    redactor: Redactor
    clock: Callable[[], datetime]
    commits: Commits = field(default_factory=Commits)

    def __post_init__(self) -> None:
        self._templates = jinja2.Environment(
            loader=jinja2.FileSystemLoader(TEMPLATES),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
            finalize=self._redacted,
        )
        self._templates.filters.update(dollars=dollars, when=when, duration=duration)
        self._templates.globals.update(cost=cost)

    def _redacted(self, value: Any) -> Any:
        """Each value a template prints, redacted before it is escaped: a secret with an
        ``&`` or a quote in it is still found (the page is redacted again as a whole);
        markup a template marked safe stays markup."""
        if isinstance(value, markupsafe.Markup):
            return markupsafe.Markup(self.redact(value))
        return self.redact(value) if isinstance(value, str) else value

    def redact(self, text: str) -> str:
        """``text`` with every known secret replaced (:meth:`core.secrets.Redactor.redact`)."""
        return self.redactor.redact(text)

    def page(self, request: web.Request | None, template: str, **values: Any) -> str:
        """``template`` rendered with ``values``, ``operator`` and ``csrf`` (empty when no
        one is signed in) and ``now`` (the clock's: a duration to now), redacted, its
        bidirectional controls shown as markers (:func:`unbidi`)."""
        context = {
            "operator": request.get(OPERATOR, "") if request is not None else "",
            "csrf": request.get(CSRF, "") if request is not None else "",
            "prefix": PREFIX,
            "now": self.clock(),
        }
        html = self._templates.get_template(template).render(**context | values)
        return unbidi(self.redact(html))

    def render(
        self, request: web.Request, template: str, *, status: int = 200, **values: Any
    ) -> web.Response:
        """An HTML response of ``template`` (see :meth:`page`), with ``status``."""
        return web.Response(
            text=self.page(request, template, **values),
            status=status,
            content_type="text/html",
        )

    def json(self, value: Any, *, status: int = 200) -> web.Response:
        """A JSON response of ``value`` (``default=str`` for times), redacted."""
        text = self.redact(json.dumps(value, default=str, ensure_ascii=False))
        return web.Response(text=text, status=status, content_type="application/json")

    async def audit(
        self,
        request: web.Request | None,
        *,
        action: str,
        outcome: Outcome,
        target: str | None = None,
        reason: str = "",
        conversation_id: str | None = None,
        where: PlatformRef = WHERE,
        operator: str | None = None,
    ) -> None:
        """An audit row of ``action`` (the request kind: ``sign_in``, ``fork``, ``stop``)
        on ``target`` by the signed-in operator (or ``operator``), means ``inspector``
        (docs/architecture.md, "The audit trail")."""
        name = operator if operator is not None else operator_of(request) if request else ""
        audited = Audited(
            request_kind=action,
            request_id=target,
            user_id=f"operator:{name}",
            means="inspector",
            outcome=outcome,
            reason=reason,
        )
        await self.store.audit.record(audited, where=where, conversation_id=conversation_id)


INSPECTOR = web.AppKey("inspector", Inspector)
"""The key of the :class:`Inspector` on the aiohttp application."""


def see_other(location: str) -> web.Response:
    """303 See Other to ``location``: where a form's ``POST`` sends the browser next."""
    return web.Response(status=303, headers={"Location": location})


def query(request: web.Request) -> Mapping[str, str]:
    """The request's query parameters, each its first value, stripped, empty ones left out."""
    return {k: v.strip() for k, v in request.query.items() if v.strip()}
