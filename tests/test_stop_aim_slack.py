"""A stop on Slack ends the run it was aimed at (issue 31, "Stops and mentions").

Through the real bolt app and slack-sdk against :class:`tests.fakes.slack_api.FakeSlackApi`
(:mod:`tests.slack_harness`): the stop word in the thread and a mention right behind
it, delivered while the stop is on its way to the run: the run stops and the mention's
run goes on to its answer; and a stop sent after the run ended stops nothing and says
so in the thread.
"""

from __future__ import annotations

import asyncio

from conversations.stopping import ALREADY_ENDED
from core.models.scripted import ScriptedCall, ScriptedModel, ScriptedTurn
from core.vocabulary.inputs import ThreadMessage
from core.vocabulary.lifecycle import Lifecycle
from tests.conftest import wait_for
from tests.fakes.slack_api import BOT_USER_ID
from tests.slack_harness import ALICE, CHANNEL, WAIT, slack_workspace

STOPPED = f"⏹ Stopped by <@{ALICE}>."


def plan(step: str) -> ScriptedTurn:
    return ScriptedTurn(calls=[ScriptedCall("propose_plan", {"steps": [step]})])


def finish(answer: str) -> ScriptedTurn:
    return ScriptedTurn(calls=[ScriptedCall("finish", {"answer": answer})])


async def test_the_stop_word_then_a_mention_at_once_stop_the_run_and_the_mention_goes_on(
    settings,
) -> None:
    working = ScriptedTurn(gate=asyncio.Event(), calls=[ScriptedCall("list_files", {})])
    model = ScriptedModel(
        [plan("Look around"), working, plan("Do the other thing"), finish("Did the other thing.")]
    )
    async with slack_workspace(settings, model) as ws:
        root = await ws.mention("look around")
        await ws.deliver("events_api", ws.reaction_body(ws.post(root, "📋 Plan (v1)")["ts"]))
        await asyncio.wait_for(working.started.wait(), WAIT)  # run A works, in its model call
        cid = (await ws.snapshot(root)).id

        # "stop", then at once a mention in the same thread, which reaches the hub while
        # the stop is on its way to the run (queued behind A before A's job is cancelled)
        stop_ts = str(ws.api.add_message(CHANNEL, "stop", user=ALICE, thread_ts=root)["ts"])
        said = f"<@{BOT_USER_ID}> do the other thing instead"
        again = str(ws.api.add_message(CHANNEL, said, user=ALICE, thread_ts=root)["ts"])
        queue = ws.app.hub.stopper._queue
        queue_stop = queue.stop

        async def stop_with_the_mention_behind(conversation_id: str) -> list[ThreadMessage]:
            await ws.deliver("events_api", ws.message_body(again, said, thread=root))
            await wait_for(lambda: queue.queued(cid))
            return await queue_stop(conversation_id)

        queue.stop = stop_with_the_mention_behind
        await ws.deliver("events_api", ws.message_body(stop_ts, "stop", thread=root))
        await ws.settle()

        texts = ws.api.posted_texts(CHANNEL, root)
        assert STOPPED in texts, texts
        after = texts[texts.index(STOPPED) + 1 :]
        assert [t.split(" —")[0] for t in after] == ["📋 Plan (v2)"], texts
        assert working.gate is not None and not working.gate.is_set()  # A never went on

        await ws.react(ws.post(root, "📋 Plan (v2)")["ts"])
        texts = ws.api.posted_texts(CHANNEL, root)
        assert texts[-1].startswith("✅ Did the other thing."), texts
        snap = await ws.snapshot(root)
        assert (snap.id, snap.status.lifecycle) == (cid, Lifecycle.DONE)
        assert [r.entry.kind for r in snap.journal].count("stop") == 1
        requests = [r.entry.text for r in snap.journal if getattr(r.entry, "role", "") == "request"]
        assert requests[-1] == "do the other thing instead", requests


async def test_a_stop_sent_after_the_run_ended_stops_nothing_and_says_so(settings) -> None:
    model = ScriptedModel([plan("Look around"), finish("Looked around.")])
    async with slack_workspace(settings, model) as ws:
        root = await ws.mention("look around")
        await ws.react(ws.post(root, "📋 Plan (v1)")["ts"])
        assert ws.api.posted_texts(CHANNEL, root)[-1].startswith("✅ Looked around.")

        await ws.reply(root, "stop")

        texts = ws.api.posted_texts(CHANNEL, root)
        assert texts[-1] == ALREADY_ENDED, texts
        assert not any(t.startswith("⏹ Stopped") for t in texts), texts
        snap = await ws.snapshot(root)
        assert snap.status.lifecycle is Lifecycle.DONE
        assert [r.entry.kind for r in snap.journal].count("stop") == 0
