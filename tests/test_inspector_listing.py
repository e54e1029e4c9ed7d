"""The run inspector's list of conversations, ``GET /inspector/``, through the real server
signed in as an operator (docs/architecture.md, "The run inspector").

Each conversation is one row linking to its page, with its place, requester, status,
workflow and state, start, duration and cost as the store holds them; the form's query
parameters filter and search it; the "next page" link carries the cursor and the
filters until the last page; a query the page cannot read is a 400 that says why.
Who may ask (401, 421, CSRF) is the guard's, tested in ``test_inspector_guard.py``.
"""

from __future__ import annotations

import html
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from pathlib import Path

import pytest

from bot.inspector.listing import link
from bot.inspector.web import duration
from bot.settings import Settings
from conversations.store import Store
from conversations.store.inspection import Cursor
from core.context import now
from core.vocabulary import lifecycle
from core.vocabulary.journal import Change
from core.vocabulary.lifecycle import WaitKind
from tests.inspector_harness import inspector_served, with_operator
from tests.test_inspection_store import SONNET, call, opened, started
from tests.test_store_contract import ALICE, BOB, sqlite_store


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    async with sqlite_store(tmp_path) as opened_store:
        yield opened_store


@pytest.fixture
def inspecting(settings: Settings) -> Settings:
    return with_operator(settings)


class Rows(HTMLParser):
    """The rows of ``table#conversations``: per ``data-conversation`` id, the text of each
    cell by its class, and every link's ``href``."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.rows: dict[str, dict[str, str]] = {}
        self.order: list[str] = []
        self.links: dict[str, str] = {}
        self._row: str | None = None
        self._cell: str | None = None
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "tr" and found.get("data-conversation"):
            self._row = found["data-conversation"]
            assert self._row is not None
            self.order.append(self._row)
            self.rows[self._row] = {"status-attribute": found.get("data-status") or ""}
        elif tag == "td" and self._row is not None:
            self._cell = (found.get("class") or "").split()[0]
            self.rows[self._row][self._cell] = ""
        elif tag == "a" and found.get("href"):
            key = found.get("id") or f"{self._row}:{self._cell}"
            self.links[key] = found["href"] or ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "tr":
            self._row = None
        if tag == "td":
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._row is not None and self._cell is not None:
            cells = self.rows[self._row]
            cells[self._cell] = " ".join((cells[self._cell] + " " + data).split())


async def test_each_conversation_is_a_row_with_its_place_people_state_time_and_cost(
    store: Store, inspecting: Settings
) -> None:
    await store.usage.sync_prices({"sonnet": SONNET}, now())
    waiting = await opened(store, "1.0", requester=ALICE)
    await started(store, waiting, "<b>fix</b> the flaky test", workflow="validate-fix")
    await store.journal.commit(waiting, call((1_000, 200, 0, 0), 12_300))
    await store.journal.commit(waiting, call((10, 5, 0, 0), None))
    await store.journal.commit(
        waiting,
        Change(
            status=lifecycle.move(lifecycle.RUNNING, lifecycle.waiting(WaitKind.PLAN_APPROVAL)),
            position="approval",
        ),
    )
    done = await opened(
        store, "T9", platform="discord", workspace="G1", channel="T9", parent="C7", requester=BOB
    )
    await started(store, done, "summarise the logs")
    ended = await store.journal.commit(
        done, Change(status=lifecycle.move(lifecycle.RUNNING, lifecycle.DONE))
    )
    [second, first] = (await store.inspection.conversations()).rows
    clock = first.started + timedelta(minutes=5)

    async with inspector_served(store, inspecting, clock=lambda: clock) as served:
        client = await served.client()
        page = await client.get("/inspector/")

    assert page.status == 200
    assert 'id="conversations"' in page.text
    shown = Rows(page.text)
    assert shown.order == [done, waiting]  # newest first
    row = shown.rows[waiting]
    assert row["id"] == f"{waiting} <b>fix</b> the flaky test"  # escaped, shown as text
    assert "&lt;b&gt;fix&lt;/b&gt;" in page.text
    assert shown.links[f"{waiting}:id"] == f"/inspector/conversations/{waiting}"
    assert row["platform"] == "slack"
    assert row["channel"] == "T1 / C1 thread 1.0"
    assert row["requester"] == f"{ALICE.id} {ALICE.name}"
    assert row["status"] == "waiting(plan_approval)" and row["status-attribute"] == "waiting"
    assert row["workflow"] == "validate-fix · approval"
    assert row["started"] == first.started.strftime("%Y-%m-%d %H:%M:%S UTC")
    assert row["duration"] == "5 min 00 s so far"
    assert row["cost"] == "$0.0123 (1 without a price)"
    assert row["calls"] == "2 (1,215 tokens)"
    # the place, the requester and the workflow link to the list filtered by them
    assert shown.links[f"{waiting}:requester"] == f"/inspector/?requester={ALICE.id}"
    assert shown.links[f"{waiting}:workflow"] == "/inspector/?workflow=validate-fix"

    thread = shown.rows[done]
    assert thread["channel"] == "G1 / C7 thread channel T9"
    assert shown.links[f"{done}:channel"] == "/inspector/?channel=C7"
    assert (thread["status"], thread["workflow"]) == ("done", "default · planning")
    ran = (ended.at - second.started).total_seconds()
    assert thread["duration"] == duration(ran)  # until it ended, not until now
    assert (thread["cost"], thread["calls"]) == ("-", "0")  # no call: no cost, not $0
    assert "next-page" not in shown.links and "first-page" not in shown.links


async def test_the_form_s_parameters_filter_and_search_the_list(
    store: Store, inspecting: Settings
) -> None:
    chat = await opened(store, "1.0", channel="C1")
    await started(store, chat, "Why is the build red?", workflow="chat")
    fix = await opened(store, "2.0", channel="C2", requester=BOB)
    await started(store, fix, "fix the build", workflow="validate-fix")
    await store.journal.commit(
        fix, Change(status=lifecycle.move(lifecycle.RUNNING, lifecycle.DONE))
    )
    thread = await opened(
        store, "T5", platform="discord", workspace="G1", channel="T5", parent="C1"
    )

    async with inspector_served(store, inspecting) as served:
        client = await served.client()

        async def listed(query: str) -> list[str]:
            page = await client.get(f"/inspector/?{query}")
            assert page.status == 200, page.text
            return Rows(page.text).order

        assert await listed("") == [thread, fix, chat]
        assert await listed("platform=slack") == [fix, chat]
        assert await listed("channel=C1") == [thread, chat]
        assert await listed("workspace=G1") == [thread]
        assert await listed("status=done") == [fix]
        assert await listed("status=idle&platform=") == [thread]  # an empty field is no filter
        assert await listed(f"requester={BOB.id}") == [fix]
        assert await listed("workflow=chat") == [chat]
        assert await listed("q=BUILD") == [fix, chat]
        assert await listed("q=red%3F") == [chat]
        assert await listed(f"q={thread[3:15]}") == [thread]
        assert await listed("q=build&status=running") == [chat]
        nothing = await client.get("/inspector/?q=nowhere")
        assert Rows(nothing.text).order == [] and 'id="no-conversations"' in nothing.text
        # a row's links narrow the list asked for, from its first page
        later = Cursor(datetime(2100, 1, 1, tzinfo=UTC), "f" * 32).token()
        narrowed = Rows((await client.get(f"/inspector/?status=done&limit=5&after={later}")).text)
        assert narrowed.links[f"{fix}:requester"] == (
            f"/inspector/?status=done&limit=5&requester={BOB.id}"
        )
        assert narrowed.links[f"{fix}:workflow"] == (
            "/inspector/?status=done&limit=5&workflow=validate-fix"
        )
        # the form shows what was asked
        form = (await client.get("/inspector/?status=done&q=fix+it")).text
        assert '<option value="done" selected>' in form
        assert 'name="q" value="fix it"' in form


async def test_the_next_page_link_carries_the_cursor_and_the_filters_to_the_last_page(
    store: Store, inspecting: Settings
) -> None:
    ids = [await opened(store, f"{n}.0", channel="C1" if n < 5 else "C2") for n in range(7)]

    async with inspector_served(store, inspecting) as served:
        client = await served.client()
        seen: list[str] = []
        path: str | None = "/inspector/?channel=C1&limit=2"
        pages = 0
        while path is not None:
            page = await client.get(path)
            assert page.status == 200
            shown = Rows(page.text)
            seen += shown.order
            pages += 1
            if pages > 1:
                assert shown.links["first-page"] == "/inspector/?channel=C1&limit=2"
            following = shown.links.get("next-page")
            if following is not None:
                assert "channel=C1" in following and "limit=2" in following
            path = html.unescape(following) if following else None

    assert pages == 3
    assert seen == list(reversed(ids[:5]))


@pytest.mark.parametrize(
    ("query", "problem"),
    [
        ("status=asleep", "status: &#39;asleep&#39; is none of idle, running, waiting"),
        ("after=not-a-cursor", "not a page cursor"),
        ("limit=101", "limit: a page holds 1 to 100 rows, not &#39;101&#39;"),
        ("limit=two", "limit: a page holds 1 to 100 rows"),
    ],
)
async def test_a_query_the_page_cannot_read_is_a_400_that_says_why(
    store: Store, inspecting: Settings, query: str, problem: str
) -> None:
    await opened(store, "1.0")
    async with inspector_served(store, inspecting) as served:
        client = await served.client()
        page = await client.get(f"/inspector/?{query}")
    assert page.status == 400
    assert problem in page.text
    assert 'id="problem"' in page.text and 'id="filters"' in page.text
    assert Rows(page.text).order == []


def test_a_cursor_in_a_link_is_url_safe() -> None:
    cursor = Cursor(datetime(2026, 12, 8, 9, 30, 1, 250, tzinfo=UTC), "ab" * 16)
    made = link({"q": "a&b c", "after": "x"}, after=cursor.token())
    assert made == f"/inspector/?q=a%26b+c&after={cursor.token()}"
    assert Cursor.parse(cursor.token()) == cursor


async def test_a_long_request_is_cut_and_bidirectional_controls_are_shown_as_markers(
    store: Store, inspecting: Settings
) -> None:
    long = await opened(store, "1.0")
    words = "word " * 600  # 3,000 characters
    await started(store, long, words)
    tricky = await opened(store, "2.0")
    await started(store, tricky, "deploy \u202eevil\u202c and \u2066isolated\u2069")

    async with inspector_served(store, inspecting) as served:
        client = await served.client()
        page = await client.get("/inspector/")
        opened_page = await client.get(f"/inspector/conversations/{tricky}")

    shown = Rows(page.text).rows
    request = shown[long]["id"].removeprefix(long).strip()
    assert request.endswith("…") and len(request) <= 201  # about 200 characters, then "…"
    assert request[:-1].strip() == words[:200].strip()
    assert (
        shown[tricky]["id"] == f"{tricky} deploy [U+202E]evil[U+202C] and [U+2066]isolated[U+2069]"
    )
    for text in (page.text, opened_page.text):  # no page holds a control that reorders it
        assert not re.search("[\u202a-\u202e\u2066-\u2069]", text)
    assert "deploy [U+202E]evil[U+202C]" in opened_page.text
