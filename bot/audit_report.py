"""``threadbot audit``: every decision and every refused attempt in the store, oldest first.

Reads the ``audit`` rows (docs/architecture.md, "The audit trail") through
:class:`conversations.store.audit.AuditTrail`, on a database opened read-only
(:func:`conversations.store.sql.database.create_read_only_engine`: it writes nothing,
and a write would fail). ``--conversation ID``, ``--channel ID`` (the channel's id; a
Discord thread's rows are its channel's) and ``--since DATE`` (a day, from 00:00 UTC, or
an ISO time, as ``threadbot usage`` takes it) narrow it down.

Prints one line per entry, its columns aligned: when (ISO 8601, UTC), the conversation,
the channel, the request's kind, id and plan version (``v2``), who (a platform user id),
how (``reaction``, ``button``, ``reply``, ``command``, ``native_stop``), the outcome and
its reason. With ``--json``, a list of objects with the keys ``at`` (ISO 8601, UTC),
``conversation``, ``platform``, ``workspace``, ``channel``, ``request_kind``,
``request_id``, ``version``, ``user_id``, ``means``, ``outcome``, ``reason`` (null where
there is nothing to say). A database that is missing or not at the newest schema is an
error (exit 2) that says what to do, as ``threadbot usage`` does.
"""

from __future__ import annotations

import asyncio
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.settings import Settings
from conversations.render import render_event
from conversations.store import migrate
from conversations.store.audit import AuditEntry
from conversations.store.backends import is_memory
from conversations.store.sql import SqlStore
from conversations.store.sql.database import create_read_only_engine
from conversations.store.sql.failures import database_said

HEAD = ("at", "conversation", "channel", "request", "version", "user", "means", "outcome")
"""The columns of the human output; the reason follows, unaligned (it is the last)."""


def as_dict(entry: AuditEntry) -> dict[str, Any]:
    """One entry as ``--json`` shows it (see the module docstring)."""
    return {
        "at": entry.at.astimezone(UTC).isoformat(),
        "conversation": entry.conversation_id,
        "platform": entry.platform,
        "workspace": entry.workspace,
        "channel": entry.channel,
        "request_kind": entry.request_kind,
        "request_id": entry.request_id,
        "version": entry.version,
        "user_id": entry.user_id,
        "means": entry.means,
        "outcome": entry.outcome,
        "reason": entry.reason or None,
    }


def as_json(entries: list[AuditEntry]) -> str:
    """The entries as one JSON list, oldest first."""
    return json.dumps([as_dict(e) for e in entries], indent=2)


def as_lines(entries: list[AuditEntry]) -> str:
    """A header and one aligned line per entry (``-`` where there is nothing to say);
    ``no decisions recorded`` when there is none."""
    if not entries:
        return "no decisions recorded"
    rows = [
        (
            e.at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            e.conversation_id or "-",
            e.channel,
            " ".join(p for p in (e.request_kind, e.request_id) if p) or "-",
            f"v{e.version}" if e.version is not None else "-",
            e.user_id,
            e.means or "-",
            e.outcome,
        )
        for e in entries
    ]
    widths = [max(len(row[i]) for row in (HEAD, *rows)) for i in range(len(HEAD))]
    reasons = ["reason", *(e.reason for e in entries)]
    return "\n".join(
        (
            "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) + f"  {reason}"
        ).rstrip()
        for row, reason in zip((HEAD, *rows), reasons, strict=True)
    )


async def _schema_problem(engine: AsyncEngine, url: str) -> str | None:
    """Why the database behind ``engine`` cannot be read (not there, no schema, another
    revision than this threadbot's newest), else None; reads only."""
    parsed = make_url(url)
    shown = parsed.render_as_string(hide_password=True)
    file = Path(parsed.database or "")
    if parsed.get_backend_name() == "sqlite" and not await asyncio.to_thread(file.is_file):
        return f"{shown}: no database there"
    try:
        current = await migrate.current_revision(engine)
    except (SQLAlchemyError, OSError) as exc:
        return f"{shown} does not open: {database_said(url, exc)}"
    newest = migrate.newest_revision()
    if current == newest:
        return None
    if current is None:
        return f"{shown} has no schema yet: needs `threadbot db upgrade`"
    return f"{shown} is at revision {current}, the newest is {newest}: see `threadbot doctor`"


async def audit(
    settings: Settings,
    *,
    conversation: str | None = None,
    channel: str | None = None,
    since: datetime | None = None,
    json_out: bool = False,
) -> int:
    """Print the audit trail of the store at ``settings.database_url`` (filtered); the exit
    code (2 for ``memory://``, which keeps nothing, or a database that cannot be read)."""
    url = settings.database_url
    if is_memory(url):
        print("threadbot: memory:// keeps no audit trail (it keeps nothing)", file=sys.stderr)
        return 2
    engine = create_read_only_engine(url)
    try:
        problem = await _schema_problem(engine, url)
        if problem is not None:
            print(f"threadbot: {problem}", file=sys.stderr)
            return 2
        store = SqlStore(engine=engine, render=render_event)
        try:
            entries = await store.audit.entries(
                conversation_id=conversation, channel=channel, since=since
            )
        finally:
            await store.close()
    finally:
        await engine.dispose()
    print(as_json(entries) if json_out else as_lines(entries))
    return 0
