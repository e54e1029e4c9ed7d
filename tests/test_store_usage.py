"""The store's ``usage`` and ``outputs`` contracts, on each backend: dated price entries,
a model call recorded with its assistant turn, a channel's spend and the usage report;
large tool outputs kept whole, per conversation.

The other interfaces' contract is in ``test_store_contract.py`` (its last test checks
that every method of every interface is called in one of the two modules).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy.exc import IntegrityError

from conversations.events import PlatformRef
from conversations.store import Store
from conversations.store.usage import UsageLine
from core.pricing import Rates, Spend
from core.vocabulary.entries import AssistantTurn, ModelRole, ModelUsage
from core.vocabulary.errors import ConversationNotFound
from core.vocabulary.journal import Change
from tests.test_store_contract import ALICE, BACKENDS, opened_store

SONNET = Rates(input=3_000_000, output=15_000_000, cache_read=300_000, cache_write=3_750_000)
HAIKU = Rates(input=1_000_000, output=5_000_000, cache_read=100_000, cache_write=1_250_000)
NOW = datetime(2026, 12, 1, 9, 30, tzinfo=UTC)


@pytest.fixture(params=BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """A new, empty store of each backend (as in the contract suite)."""
    async with opened_store(request.param, request, tmp_path) as new:
        yield new


async def opened(store: Store, thread: str, channel: str, parent: str | None = None) -> str:
    """A Discord conversation in ``thread`` (a thread channel of ``parent``, when given)."""
    binding = PlatformRef(
        platform="discord", workspace="G1", channel=channel, thread=thread, parent=parent
    )
    cid = await store.threads.open_conversation(
        delivery_key=f"ev-{thread}",
        binding=binding,
        requester=ALICE,
        workspace_root=Path("workspaces"),
        position="executing",
    )
    assert cid is not None
    return cid


def call(
    model: str,
    tokens: tuple[int, int, int, int],
    cost: int | None,
    role: ModelRole | None = "executor",
) -> Change:
    """A turn answered by ``model`` with ``(input, output, cache read, cache write)`` tokens,
    for ``role`` (None: a call recorded before roles were)."""
    inp, out, read, write = tokens
    usage = ModelUsage(
        model=model,
        input_tokens=inp,
        output_tokens=out,
        cache_read_tokens=read,
        cache_write_tokens=write,
        latency_ms=840,
        price_id=None if cost is None else 1,
        cost_micro_usd=cost,
        run_id="run-1",
        position="executing",
        role=role,
    )
    return Change(entries=(AssistantTurn(text="ok", model=model, usage=usage),))


async def test_a_changed_price_is_a_new_dated_entry_and_an_unchanged_one_is_not(
    store: Store,
) -> None:
    first = await store.usage.sync_prices({"sonnet": SONNET, "haiku": HAIKU}, NOW)
    again = await store.usage.sync_prices({"sonnet": SONNET, "haiku": HAIKU}, NOW + timedelta(1))
    assert again == first  # same rates: the same entries, still dated NOW
    assert first["sonnet"].since == NOW and first["sonnet"].rates == SONNET

    dearer = Rates(input=4_000_000, output=20_000_000, cache_read=400_000, cache_write=5_000_000)
    later = NOW + timedelta(days=2)
    changed = await store.usage.sync_prices({"sonnet": dearer, "haiku": HAIKU}, later)

    assert changed["haiku"] == first["haiku"]
    assert changed["sonnet"].id not in {p.id for p in first.values()}
    assert (changed["sonnet"].rates, changed["sonnet"].since) == (dearer, later)
    entries = await store.usage.prices()
    assert [(p.model, p.rates) for p in entries] == [
        ("sonnet", SONNET),
        ("haiku", HAIKU),
        ("sonnet", dearer),
    ]


async def test_calls_add_up_per_channel_and_in_the_report(store: Store) -> None:
    await store.usage.sync_prices({"sonnet": SONNET}, NOW)  # the calls name entry 1
    here = await opened(store, "T100", "T100", parent="C1")  # a thread of channel C1
    also_here = await opened(store, "C1-root", "C1")
    elsewhere = await opened(store, "T200", "T200", parent="C2")
    before = datetime.now(UTC) - timedelta(seconds=1)
    await store.journal.commit(here, call("sonnet", (100, 50, 1_000, 200), 2_100, "planner"))
    await store.journal.commit(here, call("sonnet", (10, 5, 1_300, 0), 499))
    await store.journal.commit(also_here, call("haiku", (7, 3, 0, 0), None, role=None))
    await store.journal.commit(elsewhere, call("sonnet", (1, 1, 1, 1), 25))

    spent = await store.usage.channel_spend(here, before)
    assert spent == Spend(tokens=1_350 + 1_315 + 10, micro_usd=2_100 + 499)
    assert await store.usage.channel_spend(elsewhere, before) == Spend(4, 25)
    assert await store.usage.channel_spend(here, datetime.now(UTC) + timedelta(1)) == Spend()
    with pytest.raises(ConversationNotFound):
        await store.usage.channel_spend("no-such-conversation", before)

    by_channel = await store.usage.report("channel")
    assert by_channel == [
        UsageLine("discord:G1:C1", 3, 117, 58, 2_300, 200, 2_599, 1),
        UsageLine("discord:G1:C2", 1, 1, 1, 1, 1, 25, 0),
    ]
    by_model = await store.usage.report("model", since=before)
    assert [(line.key, line.calls, line.tokens, line.cost_micro_usd) for line in by_model] == [
        ("haiku", 1, 10, 0),
        ("sonnet", 3, 2_669, 2_624),
    ]
    by_role = await store.usage.report("role")
    assert [(line.key, line.calls, line.tokens, line.cost_micro_usd) for line in by_role] == [
        ("(none)", 1, 10, 0),  # recorded without a role
        ("executor", 2, 1_319, 524),
        ("planner", 1, 1_350, 2_100),
    ]
    by_conversation = {line.key: line.calls for line in await store.usage.report("conversation")}
    assert by_conversation == {here: 2, also_here: 1, elsewhere: 1}
    (today,) = await store.usage.report("day")
    assert (today.key, today.calls) == (datetime.now(UTC).date().isoformat(), 4)
    assert await store.usage.report("day", since=datetime.now(UTC) + timedelta(1)) == []


async def test_an_output_is_kept_whole_and_read_back_only_by_its_conversation(
    store: Store,
) -> None:
    mine = await opened(store, "T300", "T300")
    theirs = await opened(store, "T400", "T400")
    whole = "line\n" * 20_000
    await store.outputs.put_output(mine, "out_0001", whole)

    assert await store.outputs.get_output(mine, "out_0001") == whole
    assert await store.outputs.get_output(theirs, "out_0001") is None  # not theirs
    assert await store.outputs.get_output(mine, "out_0002") is None
    with pytest.raises((ConversationNotFound, IntegrityError)):
        await store.outputs.put_output("no-such-conversation", "out_0003", "x")
