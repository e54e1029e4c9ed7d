"""A scheduled run on Discord and in the console (issue 29, "Time"): the scheduled
message and its thread on each adapter, the sweeper on a clock the test moves.

On Discord (the real discord.py client against FakeDiscord) the bot posts the scheduled
message in the channel, starts a thread on it (whose id is the message's) and posts the
plan in that thread; the owner's ✅ there approves it. Sent again (a redelivery), the
message is not posted twice and the thread not started twice. In the console the
scheduled message is a top-level message whose number names the thread, and the plan
is its reply; the owner approves it by name. (Slack: ``tests/test_schedules_slack.py``.)
"""

from __future__ import annotations

import io
import re

from adapters.console import ConsoleAdapter
from adapters.console.translate import author_for
from adapters.discord.runner import DiscordAdapter, DiscordConfig
from bot.app import build
from bot.settings import Settings
from conversations.events import PlatformRef, ReactionChanged, StartThread
from core.context import ManualClock
from core.models.scripted import ScriptedCall, ScriptedModel, ScriptedTurn
from core.vocabulary.lifecycle import Lifecycle
from tests.fakes.discord_api import GUILD_ID, TEXT_CHANNEL_ID, FakeDiscord
from tests.test_discord_story import ALICE, Guild, _restore_discord_py  # noqa: F401
from tests.test_schedules import MONDAY_9
from tests.test_settings_layers import layered

CLOCK_START = MONDAY_9.replace(hour=8, minute=59, second=30)


def model() -> ScriptedModel:
    plan = ScriptedTurn(calls=[ScriptedCall("propose_plan", {"steps": ["Look", "Report"]})])
    return ScriptedModel([plan, ScriptedTurn(calls=[ScriptedCall("finish", {"answer": "Ok."})])])


def schedule(**place: str) -> dict[str, str]:
    return {"name": "morning-check", "cron": "0 9 * * *", "request": "look around", **place}


class ClockedGuild(Guild):
    """The fake guild, the bot built on ``clock``."""

    def __init__(self, fake: FakeDiscord, settings: Settings, clock: ManualClock) -> None:
        super().__init__(fake, settings)
        self.clock = clock

    async def connect(self, model: ScriptedModel) -> None:
        self.app = await build(self.settings, model=model, wall_clock=self.clock)
        self.adapter = DiscordAdapter(
            DiscordConfig(
                token="fake-token",
                api_url=self.fake.api_url,
                gateway_url=self.fake.gateway_url,
                guilds=(GUILD_ID,),
            )
        )
        self.app.add_sender(self.adapter)
        self.app.add_texts(self.adapter.texts)
        await self.app.start()
        await self.adapter.start(self.app.hub)


async def test_on_discord_the_scheduled_message_starts_the_thread_the_run_works_in(
    settings,
) -> None:
    s = layered(
        settings,
        discord_token="fake-token",
        schedules=[schedule(team=GUILD_ID, channel=TEXT_CHANNEL_ID, owner=ALICE)],
    )
    clock = ManualClock(CLOCK_START)
    async with FakeDiscord() as fake:
        g = ClockedGuild(fake, s, clock)
        try:
            await g.connect(model())
            app = g.hub_app
            await app.sweeper.sweep_once()
            clock.advance(45)
            await app.sweeper.sweep_once()
            await g.settle()

            [announced] = fake.posted(TEXT_CHANNEL_ID)
            assert announced["content"] == (
                f"⏰ Scheduled run `morning-check` for <@{ALICE}>: look around"
            )
            thread = str(announced["id"])
            [started] = fake.calls_to(
                "POST", path=f"/channels/{TEXT_CHANNEL_ID}/messages/{thread}/threads"
            )
            assert started.json["name"].startswith("⏰ Scheduled run `morning-check`")
            plan = g.post(thread, "📋 Plan (v1)")
            snap = await g.snapshot(thread)
            assert snap.requester.id == ALICE
            assert str(snap.status) == "waiting(plan_approval)"
            await g.react(thread, str(plan["id"]), "✅", by=ALICE)
            await g.settle()
            assert (await g.snapshot(thread)).status.lifecycle is Lifecycle.DONE

            # Sent again, as after a crash before its row was marked sent: nothing twice.
            assert g.adapter is not None
            action = StartThread(
                ref=PlatformRef(platform="discord", workspace=GUILD_ID, channel=TEXT_CHANNEL_ID),
                text=announced["content"],
                thread_is_channel=True,
            )
            [row] = [
                r for r in await app.store.outbox.rows(snap.id) if isinstance(r.action, StartThread)
            ]
            again = await g.adapter.send(action, idempotency_key=f"tb-{row.id}", maybe_sent=True)
            assert again == thread
            assert len(fake.posted(TEXT_CHANNEL_ID)) == 1
        finally:
            await g.disconnect()


async def test_in_the_console_the_scheduled_message_is_the_root_of_the_thread(settings) -> None:
    s = layered(settings, schedules=[schedule(channel="console", owner="alice")])
    clock = ManualClock(CLOCK_START)
    out = io.StringIO()
    app = await build(s, model=model(), wall_clock=clock)
    console = ConsoleAdapter(input=io.StringIO(""), output=out)
    app.add_sender(console)
    app.add_texts(console.texts)
    async with app:
        await app.sweeper.sweep_once()
        clock.advance(45)
        await app.sweeper.sweep_once()
        await app.hub.settled()
        lines = out.getvalue().splitlines()
        assert lines[0] == "[1] threadbot: ⏰ Scheduled run `morning-check` for alice: look around"
        plan = re.search(r"\[(\d+)\] ↳1 threadbot: 📋 Plan \(v1\)", out.getvalue())
        assert plan is not None, out.getvalue()
        ref = PlatformRef(platform="console", channel="console", thread="1")
        conversation = await app.store.threads.find_by_thread(ref)
        assert conversation is not None and conversation.requester.name == "alice"

        await app.hub.handle(
            ReactionChanged(
                delivery_key="r1",
                ref=ref.model_copy(update={"message": plan.group(1), "user": "console:alice"}),
                author=author_for("alice"),
                emoji="white_check_mark",
            )
        )
        await app.hub.settled()
        assert "✅ Ok." in out.getvalue()
