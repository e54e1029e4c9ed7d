"""A conversation's page in the run inspector, after a bot ran the console and Slack
stories (docs/architecture.md, "The run inspector"): the header and the timeline (the
plan, who approved it and how, each tool call, the cost), a large output paged, 404 for
an unknown id, and the live stream: a run's new entries reach an open page as they are
journaled, a reconnect misses nothing, and the stream ends when the client leaves, the
server shuts down, or its session no longer holds (signed out, expired, the operator
removed).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import aiohttp
import markupsafe

from bot.inspector.guard import HEADERS
from bot.inspector.web import Inspector
from bot.operators import Operator, token_sha256
from bot.settings import Settings
from conversations.inspect import timeline
from conversations.inspect.results import FIRST_PAGE
from conversations.render import render_event
from conversations.store.memory import MemoryStore
from core.models.scripted import ScriptedCall, ScriptedModel, ScriptedTurn
from core.secrets import Redactor
from tests.conftest import wait_for
from tests.harness import Chat
from tests.inspector_harness import Client, inspector_served, with_operator
from tests.inspector_stories import PRICE, SLACK_REQUEST, both_stories
from tests.slack_harness import ALICE
from tests.test_inspect_timeline import every_kind
from tests.test_story_console import story_script

WAIT = 60.0
"""Seconds a wait for an event may take before the test fails (a slow machine's)."""


def items(html: str) -> list[tuple[int, str]]:
    """``(seq, kind)`` of each timeline item of a page, in order."""
    return [
        (int(seq), kind)
        for seq, kind in re.findall(
            r'<li id="seq-\d+" [^>]*data-seq="(\d+)" data-kind="(\w+)"', html
        )
    ]


def item(html: str, seq: int) -> str:
    """The HTML of the item ``seq`` of a page."""
    found = re.search(rf'<li id="seq-{seq}" .*?(?=<li id="seq-|</ol>)', html, re.S)
    assert found, f"no item {seq}"
    return found.group(0)


def items_of(html: str, kind: str) -> list[str]:
    """The HTML of each item of ``kind``."""
    return [item(html, seq) for seq, k in items(html) if k == kind]


@dataclass
class Event:
    """One server-sent event: its name, id (None: none) and JSON data."""

    name: str
    id: str | None
    data: dict[str, Any]


class Stream:
    """A conversation's event stream, read as a browser's EventSource does."""

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self.response = response
        self.last_id: str | None = None

    @classmethod
    async def open(
        cls, client: Client, cid: str, *, after: int | None = None, last_id: str | None = None
    ) -> Stream:
        query = f"?after={after}" if after is not None else ""
        headers = {"Last-Event-ID": last_id} if last_id is not None else {}
        response = await client.session.get(
            f"{client.address}/inspector/conversations/{cid}/events{query}", headers=headers
        )
        assert response.status == 200, await response.text()
        assert response.headers["Content-Type"] == "text/event-stream"
        return cls(response)

    async def next(self) -> Event | None:
        """The next event (None: the stream ended)."""
        name, ident, data = "message", None, ""
        async with asyncio.timeout(WAIT):
            while True:
                raw = await self.response.content.readline()
                if not raw:
                    return None
                line = raw.decode().rstrip("\n")
                if line == "":
                    if data:
                        if ident is not None:
                            self.last_id = ident
                        return Event(name, ident, json.loads(data))
                    continue
                field, _, value = line.partition(": ")
                if field == "event":
                    name = value
                elif field == "id":
                    ident = value
                elif field == "data":
                    data += value

    async def until(self, name: str, check: Any = lambda data: True) -> list[Event]:
        """Events up to the first ``name`` event whose data passes ``check``, that one included."""
        seen = []
        while True:
            event = await self.next()
            assert event is not None, f"the stream ended before {name}: {seen}"
            seen.append(event)
            if event.name == name and check(event.data):
                return seen

    async def rest(self) -> list[Event]:
        """The events up to the stream's end."""
        seen = []
        while (event := await self.next()) is not None:
            seen.append(event)
        return seen

    def close(self) -> None:
        self.response.close()


async def test_the_slack_story_s_page_shows_the_plan_who_approved_it_how_each_call_and_the_cost(
    settings: Settings,
) -> None:
    async with both_stories(settings) as stories:
        client = await stories.served.client()
        cid = stories.slack_conversation
        snap = await stories.ws.app.store.journal.load(cid)

        page = await client.get(f"/inspector/conversations/{cid}")

        assert page.status == 200
        html = page.text
        assert [seq for seq, _ in items(html)] == [r.seq for r in snap.journal]
        assert f'<dd id="requester">{ALICE}</dd>' in html
        assert '<dd id="platform">slack</dd>' in html
        assert 'id="lifecycle" class="lifecycle-done">done<' in html
        assert '<dd id="workflow">default · at answered</dd>' in html
        calls = sum(1 for r in snap.journal if getattr(r.entry, "usage", None) is not None)
        cost = calls * int(100 * PRICE.input + 20 * PRICE.output)  # µ$: 100 in, 20 out a call
        assert f'<dd id="cost" data-micro-usd="{cost}">${cost / 1e6:.4f}' in html
        (message, *_) = items_of(html, "message")
        assert f'<span class="who">{ALICE}</span> <span class="role">request</span>' in message
        assert SLACK_REQUEST in message
        plan = items_of(html, "model_turn")[0]
        assert 'data-plan-version="1"' in plan and "<strong>Plan v1</strong>" in plan
        assert "<li>Reproduce the flaky test</li><li>Fix the fixture</li>" in plan
        assert 'data-cost-micro-usd="600"' in plan and "$0.0006" in plan
        (approval,) = [d for d in items_of(html, "decision") if "plan approval" in d]
        assert f'<span class="who">{ALICE}</span>' in approval
        assert '<span class="verdict verdict-approved">approved</span> plan approval v1' in approval
        assert 'data-means="reaction">by reaction<' in approval
        results = items_of(html, "tool_result")
        write = next(r for r in results if 'Result of <code class="tool">write_file</code>' in r)
        assert 'class="state state-done">done<' in write
        assert "conftest.py" in write  # its arguments
        answer = next(m for m in items_of(html, "message") if 'class="role">answer<' in m)
        assert "staging, please" in answer
        assert 'data-kind="step_entered"' in html and 'data-kind="workflow_chosen"' in html


async def test_an_unknown_conversation_or_result_is_404(settings: Settings) -> None:
    async with both_stories(settings) as stories:
        client = await stories.served.client()
        cid = stories.console_conversation
        for path in (
            f"/inspector/conversations/{'0' * 32}",
            f"/inspector/conversations/{'0' * 32}/events",
            f"/inspector/outputs/{cid}/toolu_unknown",
            f"/inspector/outputs/{'0' * 32}/toolu_unknown",
        ):
            page = await client.get(path)
            assert page.status == 404, path
            assert "<h1>Not found</h1>" in page.text


async def test_a_large_output_is_shown_in_part_and_paged_whole(settings: Settings) -> None:
    whole = "".join(f"{n:05d}|" for n in range(8_334))[:50_000]
    async with both_stories(settings) as stories:
        ws = stories.ws
        stories.model.add(
            ScriptedTurn(calls=[ScriptedCall("propose_plan", {"steps": ["Write and read it"]})]),
            ScriptedTurn(calls=[ScriptedCall("write_file", {"path": "big", "content": whole})]),
            ScriptedTurn(calls=[ScriptedCall("read_file", {"path": "big"})]),
            ScriptedTurn(calls=[ScriptedCall("finish", {"answer": "Read."})]),
        )
        root = await ws.mention("read the big file")
        await ws.react(ws.post(root, "📋 Plan (v1)")["ts"])
        (cid,) = [
            c
            for c in await ws.conversation_ids()
            if c not in (stories.slack_conversation, stories.console_conversation)
        ]
        client = await stories.served.client()

        html = (await client.get(f"/inspector/conversations/{cid}")).text

        read = next(r for r in items_of(html, "tool_result") if ">read_file</code>" in r)
        link = re.search(r'<a class="more" href="([^"]+)">the whole output \(out_', read)
        assert link, read
        first = await client.get(link.group(1).replace("&amp;", "&"))
        assert first.status == 200
        assert 'data-offset="0" data-end="20000" data-total="50000" data-whole="yes"' in first.text
        assert f'<pre id="output">{whole[:20_000]}</pre>' in first.text
        after = re.search(r'<a id="next" rel="next" href="\?offset=(\d+)"', first.text)
        assert after and after.group(1) == "20000"
        path = link.group(1).split("?")[0]
        last = await client.get(f"{path}?offset=40000")
        assert f'<pre id="output">{whole[40_000:]}</pre>' in last.text
        assert 'id="next"' not in last.text and 'id="previous"' in last.text


async def test_a_live_page_gets_each_new_entry_as_it_is_journaled(settings: Settings) -> None:
    async with both_stories(settings) as stories:
        ws = stories.ws
        stories.model.add(
            ScriptedTurn(calls=[ScriptedCall("propose_plan", {"steps": ["Write it"]})]),
            ScriptedTurn(calls=[ScriptedCall("write_file", {"path": "a.txt", "content": "a\n"})]),
            ScriptedTurn(calls=[ScriptedCall("finish", {"answer": "Written."})]),
        )
        root = await ws.mention("write a.txt")
        (cid,) = [
            c
            for c in await ws.conversation_ids()
            if c not in (stories.slack_conversation, stories.console_conversation)
        ]
        client = await stories.served.client()
        page = (await client.get(f"/inspector/conversations/{cid}")).text
        last_seq = int(re.search(r'data-last-seq="(\d+)"', page).group(1))
        assert 'data-lifecycle="waiting"' in page and 'data-request-kind="plan_approval"' in page
        stream = await Stream.open(client, cid, after=last_seq)
        try:
            opening = await stream.until("status")
            assert opening[-1].data["lifecycle"] == "waiting"
            # the plan's turn, which the page has, is sent again: its call waits for a person
            assert [e.data["seq"] for e in opening if e.name == "item"] == [
                seq for seq, kind in items(page) if kind == "model_turn"
            ]

            await ws.react(ws.post(root, "📋 Plan (v1)")["ts"])
            seen = await stream.until("status", lambda data: data["lifecycle"] == "done")
        finally:
            stream.close()
        new = [e for e in seen if e.name == "item" and e.data["seq"] > last_seq]
        seqs = [e.data["seq"] for e in new]
        snap = await ws.app.store.journal.load(cid)
        # each entry in order; one sent again (its call running, then done) takes its place
        assert list(dict.fromkeys(seqs)) == [r.seq for r in snap.journal if r.seq > last_seq]
        ids = [int(e.id or 0) for e in new]
        assert ids == sorted(ids) and all(i >= seq for i, seq in zip(ids, seqs, strict=True))
        latest = {e.data["seq"]: e.data["html"] for e in new}  # as the page shows them now
        assert "state-running" not in "".join(latest.values())
        fragments = "".join(latest.values())
        decision = next(e.data["html"] for e in new if 'data-kind="decision"' in e.data["html"])
        assert f'<span class="who">{ALICE}</span>' in decision and "by reaction" in decision
        assert ">write_file</code>" in fragments and 'class="state state-done">done<' in fragments
        assert "Written." in fragments
        assert f'<dd id="cost" data-micro-usd="{snap_cost(snap)}"' in seen[-1].data["html"]


def snap_cost(snap: Any) -> int:
    """What the conversation's model calls cost, in µ$ (from the journal)."""
    return sum(
        r.entry.usage.cost_micro_usd or 0
        for r in snap.journal
        if getattr(r.entry, "usage", None) is not None
    )


async def test_a_reconnect_gets_what_came_after_the_last_event_it_had(settings: Settings) -> None:
    async with both_stories(settings) as stories:
        client = await stories.served.client()
        cid = stories.console_conversation
        snap = await stories.ws.app.store.journal.load(cid)
        middle = snap.journal[len(snap.journal) // 2].seq

        stream = await Stream.open(client, cid, last_id=str(middle), after=0)
        try:
            seen = await stream.until("status")
        finally:
            stream.close()

        sent = [e.data["seq"] for e in seen if e.name == "item"]
        assert sent == [r.seq for r in snap.journal if r.seq > middle]  # Last-Event-ID wins


async def test_the_stream_ends_when_the_client_leaves_and_when_the_server_shuts_down(
    settings: Settings, make_app
) -> None:
    app = await make_app(ScriptedModel(story_script()[:1]))
    chat = Chat(app)
    await chat.mention("fix it")  # the run waits for the plan's approval
    cid = (await app.store.threads.conversations())[0].id
    async with contextlib.AsyncExitStack() as stack:
        own = aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True))
        stack.push_async_callback(own.close)  # closed after the server: it sees the end
        served = await stack.enter_async_context(
            inspector_served(app.store, with_operator(settings), commits=app.commits)
        )
        client = await served.client()
        leaving = await Stream.open(client, cid, after=0)
        await leaving.until("status")
        browser = Client(served.address, own)
        await browser.sign_in()
        staying = await Stream.open(browser, cid, after=0)
        await staying.until("status")
        assert served.inspector.commits.followed == 2

        leaving.close()
        await wait_for(lambda: served.inspector.commits.followed == 1)

        async with asyncio.timeout(30):  # ended by the server, not its 60 s shutdown timeout
            shutting_down = asyncio.ensure_future(stack.aclose())
            assert await staying.next() is None  # the stream ended before the client left
            await shutting_down
    assert served.inspector.commits.followed == 0
    left = [t for t in asyncio.all_tasks() if not t.done() and t is not asyncio.current_task()]
    assert not [t for t in left if "aiohttp" in repr(t.get_coro())], left


async def test_the_stream_ends_when_its_session_no_longer_holds(
    settings: Settings, make_app
) -> None:
    app = await make_app(ScriptedModel(story_script()[:1]))
    await Chat(app).mention("fix it")  # the run waits for the plan's approval
    cid = (await app.store.threads.conversations())[0].id
    now = [datetime.now(UTC)]
    inspecting = with_operator(settings, inspector_session_hours=1.0)
    erin = Operator(token_sha256=token_sha256("erin-operator-token-0123456789"))
    removed = inspecting.model_copy(update={"operators": {"erin": erin}})
    async with inspector_served(
        app.store, inspecting, clock=lambda: now[0], commits=app.commits
    ) as served:

        async def following() -> tuple[Client, Stream]:
            client = await served.client()
            stream = await Stream.open(client, cid, after=0)
            await stream.until("status")
            return client, stream

        client, stream = await following()
        assert {k: stream.response.headers.get(k) for k in HEADERS} == HEADERS
        assert stream.response.headers["Cache-Control"] == "no-store"
        assert (await client.post("/inspector/sign-out")).status == 303
        assert [e.name for e in await stream.rest()] == ["signed_out"]

        client, stream = await following()
        now[0] += timedelta(hours=1)  # the session expires
        assert [e.name for e in await stream.rest()] == ["signed_out"]

        client, stream = await following()
        served.inspector.settings = removed  # the operator is no longer named
        assert [e.name for e in await stream.rest()] == ["signed_out"]
        assert (await client.get(f"/inspector/conversations/{cid}/events")).status == 401
    assert served.inspector.commits.followed == 0


async def test_no_secret_is_served_whole_escaped_or_cut_in_two(
    settings: Settings, make_app
) -> None:
    secret = 'sk-&<"live">-5f2a9c1e77d04b2e'  # what HTML and JSON escape, at a page's end
    content = "x" * (FIRST_PAGE - 10) + secret + "y" * 2_000  # cut at FIRST_PAGE: in it
    model = ScriptedModel(
        [
            ScriptedTurn(calls=[ScriptedCall("propose_plan", {"steps": ["Write, read"]})]),
            ScriptedTurn(calls=[ScriptedCall("write_file", {"path": "s", "content": content})]),
            ScriptedTurn(calls=[ScriptedCall("read_file", {"path": "s"})]),
            ScriptedTurn(calls=[ScriptedCall("ask_user", {"question": f"Is {secret} yours?"})]),
        ]
    )
    app = await make_app(model)  # its engine does not know the secret: the journal holds it
    chat = Chat(app)
    await chat.mention(f"use the key {secret}")
    await chat.react(chat.bot_message("Plan"))
    await app.hub.settled()
    cid = (await app.store.threads.conversations())[0].id
    redactor = Redactor({"TEST_KEY": secret})
    async with inspector_served(app.store, with_operator(settings), redactor=redactor) as served:
        client = await served.client()
        page = (await client.get(f"/inspector/conversations/{cid}")).text
        stream = await Stream.open(client, cid, after=0)
        try:
            raw = "".join(json.dumps(e.data) for e in await stream.until("status"))
        finally:
            stream.close()
        read = next(r for r in items_of(page, "tool_result") if ">read_file</code>" in r)
        link = re.search(r'<a class="more" href="([^"]+)"', read)
        assert link, read
        output = (await client.get(link.group(1).replace("&amp;", "&"))).text

    for served_text in (page, raw, output):
        assert "[redacted TEST_KEY]" in served_text
        for part in (secret, secret[:10]):  # whole, or its head before a page's end
            for shown in (part, str(markupsafe.escape(part)), json.dumps(part)[1:-1]):
                assert shown not in served_text


def test_every_kind_of_item_is_shown_with_its_kind_and_the_marked_states_marked(
    settings: Settings,
) -> None:
    info, snap, rows = every_kind()
    found = timeline.build(info, snap, rows)
    inspector = Inspector(
        store=MemoryStore(render=render_event),
        settings=settings,
        redactor=Redactor(),
        clock=lambda: datetime.now(UTC),
    )

    shown = [inspector.page(None, "timeline_item.html", item=i, cid=info.id) for i in found.items]

    kinds = [re.findall(r'data-seq="(\d+)" data-kind="(\w+)"', h) for h in shown]
    assert kinds == [[(str(i.seq), getattr(i, "entry", i.kind))] for i in found.items]
    results = [h for h in shown if 'data-kind="tool_result"' in h]
    assert [re.findall(r'class="state state-(\w+) marked"', h) for h in results] == [
        ["denied"],
        ["interrupted"],
        ["unknown"],
        ["cancelled"],
    ]
    notes = "".join(shown)
    for said in ("Escalated: stuck", "Compacted", "Delegation #1 ended", "Nudged (prose)"):
        assert said in notes
    assert 'data-means="native_stop">by native_stop<' in notes
    header = inspector.page(None, "conversation_header.html", header=found.header)
    running = '<li data-call="toolu_4"><code>run_command</code> <span class="state state-running">'
    assert running in header
    assert 'data-request-kind="question">question: <span class="prompt">Which one?' in header
