"""The store's ``inspection`` contract on each backend: the run inspector's list of
conversations (docs/architecture.md, "The run inspector").

A row says where the conversation is, who started it (a platform user id, the display
name beside it), its status and workflow state, its first request, when it started and
ended, and its model calls with their cost; the list is newest first, filtered by
place, status, requester and workflow, searched in the first request and the id, and
paged by a cursor that survives a round trip through a URL. ``test_store_contract.py``
checks that every method is called here.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest

from conversations.events import PlatformRef
from conversations.store import Store
from conversations.store.inspection import (
    MAX_PAGE_SIZE,
    ConversationFilter,
    ConversationSummary,
    Cursor,
)
from core.context import now
from core.pricing import Rates
from core.vocabulary import lifecycle
from core.vocabulary.entries import AssistantTurn, ModelUsage, UserText, WorkflowChosen
from core.vocabulary.journal import Change
from core.vocabulary.lifecycle import Lifecycle, Status, WaitKind
from core.vocabulary.people import Person
from tests.test_store_contract import ALICE, BACKENDS, BOB, opened_store

SONNET = Rates(input=3_000_000, output=15_000_000, cache_read=300_000, cache_write=3_750_000)


@pytest.fixture(params=BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """A new, empty store of each backend (as in the contract suite)."""
    async with opened_store(request.param, request, tmp_path) as new:
        yield new


async def opened(
    store: Store,
    thread: str,
    *,
    platform: str = "slack",
    workspace: str = "T1",
    channel: str = "C1",
    parent: str | None = None,
    requester: Person = ALICE,
) -> str:
    binding = PlatformRef(
        platform=platform, workspace=workspace, channel=channel, thread=thread, parent=parent
    )
    cid = await store.threads.open_conversation(
        delivery_key=f"ev-{platform}-{thread}",
        binding=binding,
        requester=requester,
        workspace_root=Path("workspaces"),
        position="planning",
    )
    assert cid is not None
    return cid


async def started(store: Store, cid: str, text: str, workflow: str = "default") -> None:
    """The first run of ``cid``: its workflow chosen and its request, running."""
    await store.journal.commit(
        cid,
        Change(
            entries=(
                WorkflowChosen(name=workflow, definition="{}"),
                UserText(author=ALICE, text=text),
            ),
            status=lifecycle.move(lifecycle.IDLE, lifecycle.RUNNING),
        ),
    )


def call(tokens: tuple[int, int, int, int], cost: int | None) -> Change:
    inp, out, read, write = tokens
    usage = ModelUsage(
        model="sonnet",
        input_tokens=inp,
        output_tokens=out,
        cache_read_tokens=read,
        cache_write_tokens=write,
        price_id=None if cost is None else 1,
        cost_micro_usd=cost,
    )
    return Change(entries=(AssistantTurn(text="ok", model="sonnet", usage=usage),))


async def listed(store: Store, where: ConversationFilter | None = None) -> list[str]:
    """Ids of every conversation ``where`` lets through, page after page of two."""
    ids: list[str] = []
    after: Cursor | None = None
    while True:
        page = await store.inspection.conversations(where, after=after, limit=2)
        ids += [row.id for row in page.rows]
        if page.next is None:
            return ids
        after = page.next


async def test_a_row_says_where_who_what_state_and_what_its_calls_cost(store: Store) -> None:
    await store.usage.sync_prices({"sonnet": SONNET}, now())  # the calls name entry 1
    waiting = await opened(store, "1.0", requester=ALICE)
    await started(store, waiting, "Fix the flaky test in CI", workflow="validate-fix")
    await store.journal.commit(waiting, call((100, 50, 1_000, 200), 2_100))
    await store.journal.commit(waiting, call((10, 5, 0, 0), None))
    await store.journal.commit(
        waiting,
        Change(
            entries=(UserText(author=ALICE, text="also the docs", role="answer"),),
            status=lifecycle.move(lifecycle.RUNNING, lifecycle.waiting(WaitKind.PLAN_APPROVAL)),
            position="approval",
        ),
    )
    done = await opened(
        store, "T9", platform="discord", workspace="G1", channel="T9", parent="C7", requester=BOB
    )
    await started(store, done, "x" * 300)
    await store.journal.commit(done, call((1, 1, 0, 0), None))
    ended = await store.journal.commit(
        done, Change(status=lifecycle.move(lifecycle.RUNNING, lifecycle.DONE), position="answered")
    )
    idle = await opened(store, "2.0")

    page = await store.inspection.conversations()

    assert [row.id for row in page.rows] == [idle, done, waiting]  # newest first
    assert page.next is None
    by_id = {row.id: row for row in page.rows}
    first = by_id[waiting]
    assert (first.platform, first.workspace, first.channel, first.home, first.thread) == (
        "slack",
        "T1",
        "C1",
        "C1",
        "1.0",
    )
    assert (first.requester_id, first.requester_name) == (ALICE.id, ALICE.name)
    assert first.status == Status(lifecycle=Lifecycle.WAITING, wait=WaitKind.PLAN_APPROVAL)
    assert (first.position, first.workflow) == ("approval", "validate-fix")
    assert first.request == "Fix the flaky test in CI"  # the first request, not the answer
    assert first.ended is None
    assert (first.model_calls, first.tokens) == (2, 1_350 + 15)
    assert (first.cost_micro_usd, first.unpriced_calls) == (2_100, 1)
    later = first.started + timedelta(minutes=5)
    assert first.duration(later) == timedelta(minutes=5)  # still waiting: until now

    thread = by_id[done]
    assert (thread.platform, thread.workspace, thread.channel, thread.home) == (
        "discord",
        "G1",
        "T9",
        "C7",
    )
    assert (thread.requester_id, thread.status, thread.position) == (
        BOB.id,
        lifecycle.DONE,
        "answered",
    )
    assert thread.request == "x" * 200 and thread.workflow == "default"
    assert thread.ended == ended.at  # its last change ended the run
    assert thread.duration(later + timedelta(days=1)) == ended.at - thread.started
    assert (thread.model_calls, thread.cost_micro_usd, thread.unpriced_calls) == (1, None, 1)

    fresh = by_id[idle]
    assert (fresh.status, fresh.workflow, fresh.request, fresh.ended) == (
        lifecycle.IDLE,
        None,
        "",
        None,
    )
    assert (fresh.model_calls, fresh.tokens, fresh.cost_micro_usd) == (0, 0, 0)
    assert fresh.started >= thread.started >= first.started


async def test_each_filter_lets_through_only_its_conversations_and_they_combine(
    store: Store,
) -> None:
    slack_c1 = await opened(store, "1.0", channel="C1")
    slack_c2 = await opened(store, "2.0", channel="C2", requester=BOB)
    other_team = await opened(store, "3.0", workspace="T2", channel="C1")
    discord_thread = await opened(
        store, "T5", platform="discord", workspace="G1", channel="T5", parent="C1"
    )
    await started(store, slack_c1, "one", workflow="chat")
    await started(store, slack_c2, "two", workflow="validate-fix")
    await started(store, discord_thread, "three", workflow="chat")
    await store.journal.commit(
        discord_thread, Change(status=lifecycle.move(lifecycle.RUNNING, lifecycle.FAILED))
    )

    def f(**fields: object) -> ConversationFilter:
        return ConversationFilter(**fields)  # type: ignore[arg-type]

    assert await listed(store) == [discord_thread, other_team, slack_c2, slack_c1]
    assert await listed(store, f(platform="slack")) == [other_team, slack_c2, slack_c1]
    assert await listed(store, f(workspace="T2")) == [other_team]
    # A Discord thread is listed under the channel it was started in, and its own.
    assert await listed(store, f(channel="C1")) == [discord_thread, other_team, slack_c1]
    assert await listed(store, f(channel="T5")) == [discord_thread]
    assert await listed(store, f(lifecycle=Lifecycle.RUNNING)) == [slack_c2, slack_c1]
    assert await listed(store, f(lifecycle=Lifecycle.FAILED)) == [discord_thread]
    assert await listed(store, f(lifecycle=Lifecycle.IDLE)) == [other_team]
    assert await listed(store, f(requester=BOB.id)) == [slack_c2]
    assert await listed(store, f(requester=BOB.name)) == []  # a name is no identity
    assert await listed(store, f(workflow="chat")) == [discord_thread, slack_c1]
    assert await listed(store, f(workflow="default")) == []
    assert await listed(store, f(platform="slack", channel="C1", workspace="T1")) == [slack_c1]
    assert await listed(store, f(channel="C1", workflow="chat", lifecycle=Lifecycle.FAILED)) == [
        discord_thread
    ]


async def test_a_search_finds_the_first_request_s_words_or_the_id_in_any_case(
    store: Store,
) -> None:
    flaky = await opened(store, "1.0")
    await started(store, flaky, "Please fix the FLAKY test_login (100% of runs)")
    await store.journal.commit(
        flaky, Change(entries=(UserText(author=ALICE, text="also rotate keys", role="note"),))
    )
    docs = await opened(store, "2.0")
    await started(store, docs, "update the docs")
    await opened(store, "3.0")  # nothing journaled yet: only its id is searched

    async def search(text: str) -> list[str]:
        return await listed(store, ConversationFilter(text=text))

    assert await search("flaky TEST_login") == [flaky]
    assert await search("  docs ") == [docs]  # surrounding blanks are dropped
    assert await search("rotate") == []  # a later note is not the request
    assert await search("100%") == [flaky]  # % and _ are themselves
    assert await search("0% of") == [flaky]
    assert await search("t_e") == []
    assert await search("_") == [flaky]
    assert await search(docs[5:17].upper()) == [docs]
    assert len(await search("   ")) == 3  # an empty search lets everything through
    assert await listed(store, ConversationFilter(text="the", workflow="default")) == [
        docs,
        flaky,
    ]


async def test_pages_follow_each_other_by_cursor_newest_first_without_gaps_or_repeats(
    store: Store,
) -> None:
    ids = [await opened(store, f"{n}.0", channel="C1" if n % 2 else "C2") for n in range(7)]

    seen: list[ConversationSummary] = []
    cursor: Cursor | None = None
    sizes = []
    while True:
        page = await store.inspection.conversations(after=cursor, limit=3)
        sizes.append(len(page.rows))
        seen += page.rows
        if page.next is None:
            break
        assert page.next == Cursor(page.rows[-1].started, page.rows[-1].id)
        cursor = Cursor.parse(page.next.token())  # through a URL and back
        assert cursor == page.next
    assert sizes == [3, 3, 1]
    assert [row.id for row in seen] == list(reversed(ids))
    keys = [(row.started, row.id) for row in seen]
    assert keys == sorted(keys, reverse=True)

    exact = await store.inspection.conversations(limit=7)
    assert len(exact.rows) == 7 and exact.next is None  # no empty page after the last
    assert await listed(store, ConversationFilter(channel="C1")) == [ids[5], ids[3], ids[1]]
    whole = await store.inspection.conversations(limit=MAX_PAGE_SIZE)
    assert [row.id for row in whole.rows] == [row.id for row in seen]
    for wrong in (0, MAX_PAGE_SIZE + 1):
        with pytest.raises(ValueError, match="a page holds 1 to 100 rows"):
            await store.inspection.conversations(limit=wrong)


async def test_an_empty_store_lists_nothing(store: Store) -> None:
    page = await store.inspection.conversations(ConversationFilter(text="x"))
    assert (page.rows, page.next) == ([], None)


@pytest.mark.parametrize("token", ["", "abc", "12", "12.", ".abc", "-1.abc", "1.a b", "1.a/b"])
def test_a_cursor_is_read_back_from_its_token_only(token: str) -> None:
    with pytest.raises(ValueError, match="not a page cursor"):
        Cursor.parse(token)
