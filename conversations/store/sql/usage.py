"""The SQL ``Usage``: the ``prices`` and ``model_calls`` tables (rows written by the
journal's commit, :mod:`conversations.store.sql.journal`)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from conversations.store.records import as_utc
from conversations.store.schema import ConversationRow, ModelCallRow, PriceRow
from conversations.store.sql.database import Database, conversation_row_sync
from conversations.store.usage import NO_ROLE, Grouping, UsageLine, channel_key
from core.pricing import Price, Rates, Spend

_call = ModelCallRow
_conv = ConversationRow
_TOKENS = (
    _call.input_tokens + _call.output_tokens + _call.cache_read_tokens + _call.cache_write_tokens
)
_HOME = func.coalesce(_conv.parent, _conv.channel)
"""A conversation's channel: the one a Discord thread was started in, else its own."""


class SqlUsage:
    """:class:`conversations.store.usage.Usage` in SQL."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def sync_prices(self, sheet: Mapping[str, Rates], now: datetime) -> dict[str, Price]:
        """The current entry of each model of ``sheet``, adding one where the rates changed
        (one write transaction)."""
        return await self._db.write(lambda session: _sync(session, sheet, now))

    async def prices(self) -> list[Price]:
        """Every price entry, oldest first."""
        async with self._db.read() as session:
            rows = (await session.execute(select(PriceRow).order_by(PriceRow.id))).scalars()
            return [_price(row) for row in rows]

    async def channel_spend(self, conversation_id: str, since: datetime) -> Spend:
        """What the calls in ``conversation_id``'s channel spent since ``since``."""

        def read(session: Session) -> Spend:
            row = conversation_row_sync(session, conversation_id)  # ConversationNotFound
            total = func.coalesce(func.sum(_TOKENS), 0)
            cost = func.coalesce(func.sum(_call.cost_micro_usd), 0)
            found = session.execute(
                select(total, cost)
                .join(_conv, _conv.id == _call.conversation_id)
                .where(
                    _conv.platform == row.platform,
                    _conv.workspace == row.workspace,
                    _HOME == (row.parent or row.channel),
                    _call.created_at >= since,
                )
            ).one()
            return Spend(int(found[0] or 0), int(found[1] or 0))

        return await self._db.read_in_thread(read, snapshot=True)

    async def report(self, by: Grouping, since: datetime | None = None) -> list[UsageLine]:
        """Tokens and cost per ``by`` key of the calls made at ``since`` or later."""
        keys = self._keys(by)
        stmt = (
            select(
                *keys,
                func.count(),
                func.sum(_call.input_tokens),
                func.sum(_call.output_tokens),
                func.sum(_call.cache_read_tokens),
                func.sum(_call.cache_write_tokens),
                func.coalesce(func.sum(_call.cost_micro_usd), 0),
                func.count().filter(_call.cost_micro_usd.is_(None)),
            )
            .join(_conv, _conv.id == _call.conversation_id)
            .group_by(*keys)
        )
        if since is not None:
            stmt = stmt.where(_call.created_at >= since)
        async with self._db.read() as session:
            found = (await session.execute(stmt)).all()
        lines = [_line(by, row[: len(keys)], row[len(keys) :]) for row in found]
        return sorted(lines, key=lambda line: line.key)

    @staticmethod
    def _keys(by: Grouping) -> list[Any]:
        match by:
            case "conversation":
                return [_call.conversation_id]
            case "model":
                return [_call.model]
            case "role":
                return [func.coalesce(_call.role, NO_ROLE)]
            case "channel":
                return [_conv.platform, _conv.workspace, _HOME]
            case "day":
                return [func.date(_call.created_at)]  # SQLite keeps UTC times as ISO text


def _line(by: Grouping, keys: Any, sums: Any) -> UsageLine:
    key = channel_key(*keys) if by == "channel" else str(keys[0])
    calls, inp, out, read, write, cost, unpriced = (int(v or 0) for v in sums)
    return UsageLine(key, calls, inp, out, read, write, cost, unpriced)


def _sync(session: Session, sheet: Mapping[str, Rates], now: datetime) -> dict[str, Price]:
    current: dict[str, Price] = {}
    for model, rates in sheet.items():
        row = session.execute(
            select(PriceRow).where(PriceRow.model == model).order_by(PriceRow.id.desc()).limit(1)
        ).scalar_one_or_none()
        if row is None or _price(row).rates != rates:
            row = PriceRow(
                model=model,
                input=rates.input,
                output=rates.output,
                cache_read=rates.cache_read,
                cache_write=rates.cache_write,
                since=now,
            )
            session.add(row)
            session.flush()
        current[model] = _price(row)
    return current


def _price(row: PriceRow) -> Price:
    rates = Rates(row.input, row.output, row.cache_read, row.cache_write)
    return Price(id=row.id, model=row.model, rates=rates, since=as_utc(row.since) or row.since)
