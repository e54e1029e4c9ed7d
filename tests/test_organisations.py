"""Organisations (docs/architecture.md, "Settings in layers"): the layer between the bot's
settings and a Slack workspace or Discord guild.

An organisation's value applies in each of its workspaces and guilds and their channels, and
nowhere else; ``[organisations.default]`` holds every workspace and guild no table lists,
and the console none; a workspace or channel nearer still wins, and an organisation
tightens and loosens by the same rule as a workspace; one workspace in two organisations
is refused at start; ``threadbot settings explain`` says which organisation a place is in
and which value came from it. End to end, a workspace installed through OAuth in its
organisation gets that organisation's setting, the other workspace does not
(``tests/test_slack_installs.py`` for the install itself).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from bot.organisations import Organisation
from bot.settings import Settings
from bot.settings_errors import explain
from core.models.scripted import ScriptedModel
from tests.cli_harness import threadbot
from tests.fakes.slack_api import TEAM_ID
from tests.slack_harness import CHANNEL
from tests.test_settings_layers import layered
from tests.test_slack_installs import (
    C2,
    T2,
    finish,
    install,
    posted_answer,
    second_mention,
    two_workspaces,
    with_installs,
)

ACME = {"slack": [T2, "T0ACME0002"], "discord": ["1198205278617731073"]}


def organised(settings: Settings, **tables: Any) -> Settings:
    return layered(settings, organisations=tables)


def test_an_organisations_value_applies_in_its_workspaces_and_their_channels_only(
    settings: Settings,
) -> None:
    layers = organised(settings, acme={**ACME, "model": "claude-for-acme", "user_runs": 3}).layers()

    for platform, team in (("slack", T2), ("slack", "T0ACME0002"), ("discord", ACME["discord"][0])):
        here = layers.at(platform, team, "C0ANY00001" if platform == "slack" else "1")
        assert (here["model"], here.values["model"].layer) == (
            "claude-for-acme",
            "organisation acme",
        )
        assert here["user_runs"] == 3
    for platform, team, channel in (("slack", TEAM_ID, CHANNEL), ("console", "", "")):
        here = layers.at(platform, team, channel)
        assert here["model"] == settings.model and here["user_runs"] is None


def test_the_default_organisation_holds_every_workspace_no_table_lists(
    settings: Settings,
) -> None:
    layers = organised(settings, acme=ACME, default={"mutating_tools": False}).layers()

    elsewhere = layers.at("slack", TEAM_ID, CHANNEL)
    assert elsewhere["mutating_tools"] is False
    assert elsewhere.values["mutating_tools"].layer == "organisation default"
    assert elsewhere.explain()[0] == "organisation = 'default'  (organisations.default)"
    assert layers.at("slack", T2, C2)["mutating_tools"] is True  # acme's
    assert layers.at("console", "", "")["mutating_tools"] is True  # in no organisation
    assert not any(
        line.startswith("organisation") for line in layers.at("console", "", "").explain()
    )


def test_a_workspace_or_channel_is_nearer_and_loosens_only_where_the_bot_lets_it(
    settings: Settings,
) -> None:
    layers = organised(
        settings.model_copy(update={"workspaces_may_loosen": ["approvers"]}),
        acme={**ACME, "workspace_runs": 4, "model": "claude-for-acme", "approvers": ["U0ALICE001"]},
    )
    layers = layered(
        layers,
        slack={
            T2: {
                "workspace_runs": 6,  # looser than acme's 4: refused
                "approvers": ["U0ALICE001", "U0BOB00001"],  # looser too, but allowed
                "channels": {C2: {"model": "claude-for-c2"}},
            }
        },
    ).layers()

    here = layers.at("slack", T2, C2)
    assert (here["model"], here.values["model"].layer) == (
        "claude-for-c2",
        f"slack channel {C2}",
    )
    assert here["workspace_runs"] == 4
    assert here["approvers"] == ["U0ALICE001", "U0BOB00001"]
    [refused] = here.refusals.by_name["workspace_runs"]
    assert refused == (
        f"slack workspace {T2} sets workspace_runs = 6 (looser than 4, from organisation acme): "
        'refused; the bot\'s settings may allow it with workspaces_may_loosen = ["workspace_runs"]'
    )
    tightening = organised(settings, acme={**ACME, "command_timeout": 1000.0}).layers()
    [over] = tightening.at("slack", T2, C2).refusals.by_name["command_timeout"]
    assert over.startswith("organisation acme sets command_timeout = 1000.0 (looser than 120.0")
    assert over in tightening.refusals()


def test_one_workspace_in_two_organisations_is_refused(settings: Settings) -> None:
    secret = "https://oauth2:ghp_SECRETSECRETSECRET123@github.com/acme/repo.git"
    with pytest.raises(ValidationError) as raised:
        organised(settings, acme={**ACME, "git_repo": secret}, other={"slack": [T2]})
    said = explain(raised.value, fields=Settings.model_fields, environ={}, toml_file=Path("x"))
    assert any(f"slack {T2} is in organisations 'acme' and 'other'" in line for line in said), said
    assert not any("ghp_" in line for line in said), said  # the tables are not echoed
    with pytest.raises(ValidationError, match="not an organisation name"):
        organised(settings, ACME={"slack": ["T0ACME0003"]})


def test_settings_explain_says_the_organisation_and_the_values_from_it(tmp_path: Path) -> None:
    (tmp_path / "threadbot.toml").write_text(
        "[organisations.acme]\n"
        f'slack = ["{T2}"]\n'
        'model = "claude-for-acme"\n'
        f"[slack.{T2}.channels.{C2}]\n"
        'instructions = "ship it"\n',
        encoding="utf-8",
    )
    acme = threadbot(
        tmp_path, "settings", "explain", "--platform", "slack", "--team", T2, "--channel", C2
    )
    other = threadbot(tmp_path, "settings", "explain", "--platform", "slack", "--team", TEAM_ID)

    assert acme.returncode == 0, acme.stderr
    lines = acme.stdout.splitlines()
    assert lines[:3] == [
        f"settings for slack {T2} {C2}",
        "organisation = 'acme'  (organisations.acme)",
        "model = 'claude-for-acme'  (organisation acme)",
    ]
    assert "instructions = 'ship it'  (slack channel C0SECOND01)" in lines
    assert "organisation = 'default'  (no table of its own)" in other.stdout.splitlines()
    assert "model = 'claude-opus-5-5'  (defaults)" in other.stdout.splitlines()


async def test_an_installed_workspace_gets_its_organisations_setting(
    sqlite_settings: Settings,
) -> None:
    install_settings = with_installs(sqlite_settings)
    install_settings.organisations = {
        "acme": Organisation(slack=[T2], mention_requester=False),
    }
    model = ScriptedModel([finish("Answered at home."), finish("Answered at acme.")])
    async with two_workspaces(install_settings, model) as (ws, second):
        await install(ws, f"http://127.0.0.1:{ws.adapter.port}")

        home = await ws.mention("hello")
        ts = str(ws.api.add_message(C2, "hi", user="U0CAROL001")["ts"])
        await ws.deliver("events_api", second_mention(second, ts, "hello"))
        await ws.settle()

        at_home = await posted_answer(ws, CHANNEL, home, "Answered at home.")
        at_acme = await posted_answer(ws, C2, ts, "Answered at acme.")
        assert at_home["text"].endswith("<@U0ALICE001>, here is the answer.")
        assert "here is the answer" not in at_acme["text"]  # acme mentions nobody
