"""Runs on a Ray cluster (``runner = "ray"``): the Slack story, answers, a stop, a lost actor.

Each test runs the bot on Slack (:mod:`tests.slack_harness`: the real bolt app and
slack-sdk against the fakes) with :class:`bot.ray_runner.RayRunner` on the session's
local Ray cluster (``tests/ray_cluster.py``) and PostgreSQL. The runs' model is the
real ``anthropic`` client in the actors, pointed at the local Messages API fake by
URL; the bot process's own engine gets a scripted model with no turns, so a run that
went on in the bot process instead would fail. What the tests assert is what Slack
received, what the store holds, what the commands left in the workspace and whether
their processes are gone.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from pydantic import SecretStr

from bot.ray_runner import RayRunner
from bot.settings import Settings
from conversations.store.slots import Category, SlotState
from core.models.scripted import ScriptedModel
from core.runner.protocol import RunEnded, RunKind, RunRequest
from core.tools.processes import group_alive
from core.vocabulary.entries import UserText
from core.vocabulary.errors import LeaseLost
from core.vocabulary.inputs import ThreadMessage
from core.vocabulary.lifecycle import Lifecycle
from core.vocabulary.people import Person
from core.vocabulary.requests import RequestState
from tests.conftest import wait_for
from tests.fakes.anthropic_server import FakeAnthropicServer, tool_use
from tests.ray_cluster import RayCluster
from tests.slack_harness import ALICE, CHANNEL, Workspace, slack_workspace

pytestmark = pytest.mark.xdist_group("ray")

PLAN = [tool_use("toolu_plan", "propose_plan", {"steps": ["Look around", "Run the job"]})]
ASK = [
    tool_use(
        "toolu_ask",
        "ask_user",
        {"question": "Staging or production database?", "options": ["staging", "prod"]},
    )
]


def finish(answer: str) -> list[dict]:
    return [tool_use("toolu_finish", "finish", {"answer": answer})]


def command(line: str) -> list[dict]:
    return [tool_use("toolu_job", "run_command", {"command": line})]


@pytest.fixture
async def model() -> AsyncIterator[FakeAnthropicServer]:
    async with FakeAnthropicServer() as server:
        yield server


@pytest.fixture
def ray_settings(
    settings: Settings, postgres_url: str, model: FakeAnthropicServer, ray_cluster: RayCluster
) -> Settings:
    """The bot on PostgreSQL, its runs on an actor of the session's cluster (each actor
    takes seconds to start: one where one does), their model the fake Messages API."""
    settings.database_url = postgres_url
    settings.runner = "ray"
    settings.ray_actors = 1
    settings.anthropic_api_key = SecretStr("sk-ant-ray-test")
    settings.anthropic_base_url = model.base_url
    settings.commands_at_once = 1  # the actors' commands wait for their slots
    return settings


@pytest.fixture
async def ws(ray_settings: Settings, request: pytest.FixtureRequest) -> AsyncIterator[Workspace]:
    """The bot on Slack with its runs on ``request.param`` actors (default one)."""
    ray_settings.ray_actors = getattr(request, "param", 1)
    local = ScriptedModel([])  # the bot process's engine: no run may ask it
    async with slack_workspace(ray_settings, local) as workspace:
        assert isinstance(workspace.app.hub.runner, RayRunner)
        yield workspace
    assert local.requests == []


def runner(ws: Workspace) -> RayRunner:
    found = ws.app.hub.runner
    assert isinstance(found, RayRunner)
    return found


async def approved(ws: Workspace, text: str = "please run the job") -> str:
    """Alice mentions the bot and approves its plan with a reaction (waiting for neither
    run: another conversation's may be going on); the thread's ts."""
    root = await ws.mention(text, settle=False)
    await wait_for(lambda: any("📋 Plan (v1)" in m["text"] for m in ws.posts(root)))
    plan = ws.post(root, "📋 Plan (v1)")
    await ws.deliver("events_api", ws.reaction_body(plan["ts"], "white_check_mark"))
    return root


async def job_group(ws: Workspace, root: str) -> int:
    """The process group of the running command ``toolu_job``, once recorded."""
    found: list[int] = []

    async def recorded() -> bool:
        record = (await ws.snapshot(root)).tool_calls.get("toolu_job")
        if record is not None and record.process is not None:
            found.append(record.process.group)
        return bool(found)

    await wait_for(recorded)
    return found[0]


async def test_the_slack_story_runs_on_the_actors(
    ws: Workspace, model: FakeAnthropicServer
) -> None:
    model.add(PLAN, command("echo ran >> ran.txt"), finish("The job ran."))
    root = await ws.mention("please run the job")
    plan = ws.post(root, "📋 Plan (v1)")
    assert str((await ws.snapshot(root)).status) == "waiting(plan_approval)"

    await ws.react(plan["ts"], "white_check_mark")
    await wait_for(lambda: any("✅ The job ran." in m.get("text", "") for m in ws.posts(root)))

    snap = await ws.snapshot(root)
    assert snap.status.lifecycle is Lifecycle.DONE
    assert snap.tool_calls["toolu_job"].state == "done"
    assert (Path(snap.workspace) / "ran.txt").read_text() == "ran\n"  # once
    assert len(model.requests) == 3  # plan, command, finish: all from the actors
    assert all(r.api_key == "sk-ant-ray-test" for r in model.requests)
    texts = [m["text"] for m in ws.posts(root)]
    assert texts[0].startswith("✅ Approved by <@U0ALICE001> (plan v1)\n📋 Plan (v1)"), texts
    assert texts[-1].startswith("✅ The job ran."), texts
    assert runner(ws).placed == [2]  # the start, and the run after the approval
    assert await runner(ws).running() == [[]]


async def test_an_answer_is_verified_against_the_pending_question(
    ws: Workspace, model: FakeAnthropicServer
) -> None:
    model.add(PLAN, ASK, finish("Done on staging."))
    root = await ws.mention("please migrate the database")
    await ws.react(ws.post(root, "📋 Plan (v1)")["ts"], "white_check_mark")
    await wait_for(lambda: any("Staging or production" in m["text"] for m in ws.posts(root)))
    snap = await ws.snapshot(root)
    assert str(snap.status) == "waiting(question)"
    plan_request, question = snap.requests
    assert plan_request.state is RequestState.DECIDED
    alice = Person(id=ALICE, name="alice")

    async def reply(text: str, answers: str) -> list[object]:
        request = RunRequest(
            conversation_id=snap.id,
            run_id=secrets.token_hex(8),
            kind=RunKind.REPLY,
            message=ThreadMessage(text=text, author=alice),
            answers=answers,
        )
        async with ws.app.hub.leases.held(snap.id):
            return [item async for item in runner(ws).run(request)]

    # the plan's request, answered already: the words are an ordinary message, a note
    items = await reply("prod, I think", answers=plan_request.id)
    assert items[-1] == RunEnded(lifecycle=None)
    after = await ws.snapshot(root)
    assert str(after.status) == "waiting(question)"
    assert after.requests[1].state is RequestState.OPEN
    note = after.journal[-1].entry
    assert isinstance(note, UserText) and (note.role, note.text) == ("note", "prod, I think")
    assert len(model.requests) == 2  # the run did not go on

    # the question pending now: the answer, and the run goes on to its end
    items = await reply("staging", answers=question.id)
    assert items[-1] == RunEnded(lifecycle=Lifecycle.DONE)
    done = await ws.snapshot(root)
    assert done.requests[1].state is RequestState.DECIDED
    assert len(model.requests) == 3
    ws.app.deliverer.look_at(snap.id)
    await wait_for(lambda: any("✅ Done on staging." in m["text"] for m in ws.posts(root)))


async def test_a_stop_kills_the_command_on_its_actor(
    ws: Workspace, model: FakeAnthropicServer
) -> None:
    marker = f"{secrets.randbelow(10**6) + 100}.5"  # this test's command alone sleeps so long
    model.add(PLAN, command(f"touch started; sleep {marker}"))
    root = await approved(ws)
    group = await job_group(ws, root)
    started = Path((await ws.snapshot(root)).workspace) / "started"
    await wait_for(started.exists)  # the command runs
    assert group_alive(group)

    await ws.slash("/stop")

    await wait_for(lambda: not group_alive(group))
    await wait_for(lambda: any("Stopped by" in m["text"] for m in ws.posts(root)))
    snap = await ws.snapshot(root)
    assert snap.status.lifecycle is Lifecycle.CANCELLED
    assert snap.tool_calls["toolu_job"].state == "interrupted"
    assert await runner(ws).running() == [[]]
    assert len(model.requests) == 2


async def test_cancel_returns_once_the_command_on_the_actor_is_gone(
    ws: Workspace, model: FakeAnthropicServer
) -> None:
    marker = f"{secrets.randbelow(10**6) + 100}.5"
    model.add(PLAN, command(f"sleep {marker}"))
    root = await approved(ws)
    group = await job_group(ws, root)
    ((run_id,),) = await runner(ws).running()

    assert await runner(ws).cancel(run_id) is True

    assert not group_alive(group)  # killed before cancel returned
    assert await runner(ws).running() == [[]]
    assert await runner(ws).cancel(run_id) is False  # nothing of it is left
    await ws.settle()  # the job that followed the run saw it cancelled, and ended


@pytest.mark.parametrize("ws", [2], indirect=True, ids=["two actors"])
async def test_a_run_whose_actor_is_killed_goes_on_on_another_one(
    ws: Workspace, model: FakeAnthropicServer
) -> None:
    import ray

    marker = f"{secrets.randbelow(10**6) + 100}.5"
    model.add(
        PLAN,
        command(f"echo ran >> ran.txt; sleep {marker}"),
        finish("It may have run; checked."),
    )
    root = await approved(ws)
    group = await job_group(ws, root)
    snap = await ws.snapshot(root)
    ran = Path(snap.workspace) / "ran.txt"
    await wait_for(ran.exists)
    hosting = [i for i, runs in enumerate(await runner(ws).running()) if runs]
    assert len(hosting) == 1
    placed = list(runner(ws).placed)

    ray.kill(runner(ws).hosts[hosting[0]], no_restart=False)  # Ray restarts it

    await wait_for(lambda: any("✅ It may have run" in m["text"] for m in ws.posts(root)))
    other = 1 - hosting[0]
    assert runner(ws).placed[other] == placed[other] + 1  # sent again, to the other actor
    assert runner(ws).lost == 1
    assert ran.read_text() == "ran\n"  # the command ran once
    done = await ws.snapshot(root)
    assert done.status.lifecycle is Lifecycle.DONE
    assert done.tool_calls["toolu_job"].state == "unknown"
    told = model.requests[-1].body["messages"][-1]["content"]
    results = [b for b in told if b.get("type") == "tool_result"]
    assert [b["tool_use_id"] for b in results] == ["toolu_job"]
    await wait_for(lambda: not group_alive(group))
    assert len(model.requests) == 3


async def test_a_reply_while_the_run_works_is_its_note_and_its_own_job_drops_it(
    ws: Workspace, model: FakeAnthropicServer
) -> None:
    model.add(PLAN, command("while [ ! -e go ]; do sleep 0.05; done"), finish("Noted."))
    root = await approved(ws)
    await job_group(ws, root)  # the command waits for the file go
    snap = await ws.snapshot(root)
    said = "also look at the logs, please"
    ts = str(ws.api.add_message(CHANNEL, said, user=ALICE, thread_ts=root)["ts"])
    await ws.deliver("events_api", ws.message_body(ts, said, thread=root))
    host = runner(ws).hosts[0]

    async def read_there() -> bool:
        return (await host.replies_waiting.remote()).get(snap.id, 0) == 1

    await wait_for(read_there)  # the actor read it from the store's inbox
    (Path(snap.workspace) / "go").touch()

    await wait_for(lambda: any("✅ Noted." in m["text"] for m in ws.posts(root)))
    await ws.settle()  # the reply's own job ran too: it found the reply journaled
    done = await ws.snapshot(root)
    assert done.status.lifecycle is Lifecycle.DONE
    texts = [r.entry for r in done.journal if isinstance(r.entry, UserText)]
    assert [t.role for t in texts if t.text == said] == ["note"]  # once, the run's note
    assert len(model.requests) == 3  # the reply started no run of its own
    assert said in json.dumps(model.requests[2].body["messages"][-1])
    assert await ws.app.store.inbox.unhandled() == []


async def test_a_reply_while_a_ray_run_works_is_steered_whatever_the_busy_mode(
    ray_settings: Settings, model: FakeAnthropicServer
) -> None:
    """The actor reads replies from the store, which knows no busy mode: a channel set to
    ``queue`` still gets the 👀 and is told the reply is a note, which it is."""
    ray_settings.busy_mode = "queue"
    model.add(PLAN, command("while [ ! -e go ]; do sleep 0.05; done"), finish("Noted."))
    async with slack_workspace(ray_settings, ScriptedModel([])) as ws:
        root = await approved(ws)
        await job_group(ws, root)  # the command waits for the file go
        snap = await ws.snapshot(root)
        said = "also look at the logs, please"
        ts = str(ws.api.add_message(CHANNEL, said, user=ALICE, thread_ts=root)["ts"])
        await ws.deliver("events_api", ws.message_body(ts, said, thread=root))
        await wait_for(lambda: any(m["text"].startswith("💬 Noted") for m in ws.posts(root)))
        host = runner(ws).hosts[0]

        async def read_there() -> bool:
            return (await host.replies_waiting.remote()).get(snap.id, 0) == 1

        await wait_for(read_there)  # the actor read it from the store's inbox
        (Path(snap.workspace) / "go").touch()
        await wait_for(lambda: any("✅ Noted." in m["text"] for m in ws.posts(root)))
        await ws.settle()
        eyes = [c.args["timestamp"] for c in ws.calls("reactions.add") if c.args["name"] == "eyes"]
        assert eyes == [ts]
        assert not any(m["text"].startswith("📥") for m in ws.posts(root))
        done = await ws.snapshot(root)
        texts = [r.entry for r in done.journal if isinstance(r.entry, UserText)]
        assert [t.role for t in texts if t.text == said] == ["note"]


async def test_a_run_under_a_lease_taken_over_writes_nothing_on_its_actor(
    ws: Workspace, model: FakeAnthropicServer
) -> None:
    model.add(PLAN)
    root = await ws.mention("please run the job")
    snap = await ws.snapshot(root)
    assert str(snap.status) == "waiting(plan_approval)"
    request = RunRequest(
        conversation_id=snap.id,
        run_id=secrets.token_hex(8),
        kind=RunKind.REPLY,
        message=ThreadMessage(text="one more thing", author=Person(id=ALICE, name="alice")),
    )
    leases = ws.app.hub.leases
    async with leases.held(snap.id) as lease:
        taken = await ws.app.store.leases.acquire_lease(  # another process takes it over
            snap.id, "elsewhere:1", ttl=60, dead=leases.owner
        )
        assert taken is not None and taken.epoch > lease.epoch
        with pytest.raises(LeaseLost):
            async for _item in runner(ws).run(request):
                pass
    after = await ws.snapshot(root)
    assert after.journal == snap.journal  # the note was refused whole
    assert await runner(ws).running() == [[]]


def two_jobs(body: dict) -> list[dict]:
    """The model for two conversations at once (``job-a``, ``job-b``): a plan, then a
    command that waits for the file ``go`` in its workspace, then the answer."""
    job = "job-a" if "job-a" in json.dumps(body["messages"][0]) else "job-b"
    turns = sum(m["role"] == "assistant" for m in body["messages"])
    if turns == 0:
        return PLAN
    if turns == 1:
        return command("while [ ! -e go ]; do sleep 0.05; done")
    return finish(f"{job} done.")


@pytest.mark.parametrize("ws", [2], indirect=True, ids=["two actors"])
async def test_commands_at_once_holds_across_the_actors(
    ws: Workspace, model: FakeAnthropicServer
) -> None:
    model.respond = two_jobs
    slots = ws.app.store.slots
    first = await approved(ws, "please run job-a")
    await job_group(ws, first)
    second = await approved(ws, "please run job-b")

    async def waits_behind() -> bool:
        rows = await slots.slots(Category.COMMAND)
        return [row.state for row in rows] == [SlotState.HELD, SlotState.WAITING]

    await wait_for(waits_behind)  # the second actor's command waits for the slot
    rows = await slots.slots(Category.COMMAND)
    assert len({row.holder for row in rows}) == 2  # one row per actor
    assert runner(ws).placed == [2, 2]  # each conversation's runs on an actor of its own
    waiting = (await ws.snapshot(second)).tool_calls["toolu_job"]
    assert (waiting.state, waiting.process) == ("approved", None)

    (Path((await ws.snapshot(first)).workspace) / "go").touch()
    await job_group(ws, second)  # granted once the first command ended
    (Path((await ws.snapshot(second)).workspace) / "go").touch()

    for root, job in ((first, "job-a"), (second, "job-b")):
        await wait_for(lambda r=root, j=job: any(f"✅ {j} done." in m["text"] for m in ws.posts(r)))
    assert await slots.slots(Category.COMMAND) == []
