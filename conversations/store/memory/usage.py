"""The in-memory ``Usage``: model calls read from the journals' assistant turns."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import datetime

from conversations.store.memory._tables import Conversation, Tables, checkpoint
from conversations.store.usage import NO_ROLE, Grouping, UsageLine, channel_key
from core.pricing import Price, Rates, Spend
from core.run.fork import copied_through
from core.vocabulary.entries import ModelUsage, PricedEntry


class MemoryUsage:
    """:class:`conversations.store.usage.Usage` in memory."""

    def __init__(self, tables: Tables) -> None:
        self._t = tables

    async def sync_prices(self, sheet: Mapping[str, Rates], now: datetime) -> dict[str, Price]:
        """The current entry of each model of ``sheet``, adding one where the rates changed."""
        await checkpoint()
        current: dict[str, Price] = {}
        for model, rates in sheet.items():
            newest = next((p for p in reversed(self._t.prices) if p.model == model), None)
            if newest is None or newest.rates != rates:
                newest = Price(id=len(self._t.prices) + 1, model=model, rates=rates, since=now)
                self._t.prices.append(newest)
            current[model] = newest
        return current

    async def prices(self) -> list[Price]:
        """Every price entry, oldest first."""
        await checkpoint()
        return list(self._t.prices)

    async def channel_spend(self, conversation_id: str, since: datetime) -> Spend:
        """What the calls in ``conversation_id``'s channel spent since ``since``."""
        await checkpoint()
        home = _channel(self._t.conversation(conversation_id))
        spent = Spend()
        for conversation, _at, usage in self._calls(since):
            if _channel(conversation) == home:
                spent += Spend(usage.total_tokens, usage.cost_micro_usd or 0)
        return spent

    async def report(self, by: Grouping, since: datetime | None = None) -> list[UsageLine]:
        """Tokens and cost per ``by`` key of the calls made at ``since`` or later."""
        await checkpoint()
        lines: dict[str, UsageLine] = {}
        for conversation, at, usage in self._calls(since):
            key = {
                "conversation": conversation.id,
                "channel": _channel(conversation),
                "day": at.date().isoformat(),
                "model": usage.model,
                "role": usage.role or NO_ROLE,
            }[by]
            line = lines.get(key) or UsageLine(key, 0, 0, 0, 0, 0, 0, 0)
            lines[key] = UsageLine(
                key=key,
                calls=line.calls + 1,
                input_tokens=line.input_tokens + usage.input_tokens,
                output_tokens=line.output_tokens + usage.output_tokens,
                cache_read_tokens=line.cache_read_tokens + usage.cache_read_tokens,
                cache_write_tokens=line.cache_write_tokens + usage.cache_write_tokens,
                cost_micro_usd=line.cost_micro_usd + (usage.cost_micro_usd or 0),
                unpriced=line.unpriced + (usage.cost_micro_usd is None),
            )
        return [lines[k] for k in sorted(lines)]

    def _calls(self, since: datetime | None) -> Iterator[tuple[Conversation, datetime, ModelUsage]]:
        """Each model call made at ``since`` or later, with its conversation and time: a
        fork's own calls, not those of the entries it copied (counted where they were
        made, as the SQL store's ``model_calls`` holds them once)."""
        for conversation in self._t.conversations.values():
            copied = copied_through(conversation.journal)
            for record in conversation.journal:
                entry = record.entry
                if not isinstance(entry, PricedEntry) or entry.usage is None:
                    continue
                if record.seq > copied and (since is None or record.at >= since):
                    yield conversation, record.at, entry.usage


def _channel(conversation: Conversation) -> str:
    ref = conversation.binding
    return channel_key(ref.platform, ref.workspace, ref.home)
