"""After ``⏹ Stopped by alice``, who starts the conversation again (issue 22, Stops).

A stop is a person's will that the work ends: a bystander's reply after it is
refused with the words a bystander's stop gets, kept as a note, and the
conversation stays ``cancelled``; the requester's or an approver's reply starts it
again at planning. A finished conversation, or one whose request expired, goes
on with anyone's reply, as before.
"""

from __future__ import annotations

from core.models.scripted import ScriptedCall, ScriptedModel, ScriptedTurn
from core.vocabulary.lifecycle import Lifecycle
from tests.harness import Chat

QUESTION = ScriptedTurn(calls=[ScriptedCall("ask_user", {"question": "Which one?"})])
PLAN = ScriptedTurn(calls=[ScriptedCall("propose_plan", {"steps": ["Pick one"]})])
REFUSED = "Only the requester or an approver can restart this, bob."


async def stopped_chat(make_app, model: ScriptedModel) -> Chat:
    """Alice's conversation, asking its question, stopped by alice."""
    app = await make_app(model)
    chat = Chat(app)
    await app.start()
    await chat.mention("pick one")
    await chat.stop(by="alice")
    await app.hub.settled()
    assert "⏹ Stopped by alice." in chat.said()
    return chat


async def test_a_bystanders_reply_after_a_stop_is_refused_and_the_requesters_restarts_it(
    make_app,
) -> None:
    model = ScriptedModel([QUESTION, PLAN])
    chat = await stopped_chat(make_app, model)

    await chat.reply("go on anyway", by="bob")

    assert chat.said()[-1] == REFUSED
    snap = await chat.snapshot()
    assert snap.status.lifecycle is Lifecycle.CANCELLED
    last = snap.journal[-1].entry
    assert last.kind == "user_text" and last.role == "note" and last.text == "go on anyway"
    assert len(model.requests) == 1  # no run started
    assert await chat.app.store.inbox.unhandled() == []  # a restart does not refuse it again

    await chat.reply("go on", by="alice")

    assert chat.said()[-1].startswith("📋 Plan (v1)")
    snap = await chat.snapshot()
    assert str(snap.status) == "waiting(plan_approval)" and snap.position == "approval"
    texts = [b["text"] for b in model.requests[-1].messages[-1]["content"] if b["type"] == "text"]
    assert texts[-2:] == ["bob (note while you work): go on anyway", "alice: go on"]
    assert sum(REFUSED in line for line in chat.said()) == 1


async def test_an_approver_may_start_a_stopped_conversation_again(settings, make_app) -> None:
    settings.approvers = ["bob"]
    model = ScriptedModel([QUESTION, PLAN])
    chat = await stopped_chat(make_app, model)

    await chat.reply("go on", by="bob")

    assert chat.said()[-1].startswith("📋 Plan (v1)")
    assert REFUSED not in chat.said()
    assert str((await chat.snapshot()).status) == "waiting(plan_approval)"


async def test_a_bystanders_reply_goes_on_after_an_answer_or_an_expiry(make_app) -> None:
    finished = ScriptedTurn(calls=[ScriptedCall("finish", {"answer": "Picked the first."})])
    model = ScriptedModel([finished, QUESTION, finished])
    app = await make_app(model)
    chat = Chat(app)
    await app.start()
    await chat.mention("pick one")
    assert (await chat.snapshot()).status.lifecycle is Lifecycle.DONE

    await chat.reply("and another?", by="bob")  # after an answer: bob goes on
    snap = await chat.snapshot()
    assert str(snap.status) == "waiting(question)"
    assert await app.engine.expire(snap.id, snap.open_requests[0].id)
    assert (await chat.snapshot()).status.lifecycle is Lifecycle.CANCELLED

    await chat.reply("still there?", by="bob")  # after an expiry: bob goes on too

    assert (await chat.snapshot()).status.lifecycle is Lifecycle.DONE
    assert len(model.requests) == 3
    assert not any("can restart this" in line for line in chat.said())
