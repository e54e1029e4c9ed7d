"""What an approval wider than once remembers, how it reads, and who may revoke it (issue 33).

The pattern a call's wider approval offers (a command's two plain first words, else
the exact arguments) and what it covers (every command of a chain, at a word's end);
the approval message's line and buttons and the decided message's outcome line; the
console's ``+✅ N.K run``; the scopes offered without a sandbox; and the operators of
``threadbot policy revoke``: a token checked against its hash, refused when wrong or
missing (exit 2), never taken as an argument, and ``threadbot operator hash``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.operators import Operator, OperatorRefused, authenticated, token_given, token_sha256
from bot.settings import Settings
from conversations.closing import outcome_line
from conversations.events import PlatformRef, PostReply
from conversations.tool_approvals import tool_approval_message
from core.models.scripted import ScriptedCall, ScriptedModel, ScriptedTurn
from core.policy.remembered import covers, pattern_for
from core.run.settings import EngineSettings
from core.vocabulary.approvals import ApprovalScope, CallPattern
from core.vocabulary.run_events import CallOutcome, GatedCall, RequestClosed, ToolApprovalRequested
from core.vocabulary.tool_records import ToolState
from tests.cli_harness import threadbot
from tests.fakes.slack_api import TEAM_ID
from tests.harness import Chat
from tests.slack_harness import CHANNEL

TOKEN = "ops-token-0123456789abcdef"
RUN = "run_command"


# --- the pattern ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "prefix"),
    [
        ("git push origin main", "git push"),
        ("make test -k login", "make test"),
        ("pip install requests", "pip install"),
        ("  echo   hello  there", "echo hello"),
        ("rm -rf build", None),  # an option second: the call itself
        ("curl -s https://example.com", None),
        ("ls", None),  # one word
        ("make test && make deploy", None),  # a chain
        ("sudo rm x", None),  # a wrapper first
        ("/usr/bin/git push", None),  # a path
        ('echo "hi there"', None),  # quoted
        ("echo $HOME now", None),  # a variable
    ],
)
def test_a_command_offers_its_two_plain_first_words_or_itself(
    command: str, prefix: str | None
) -> None:
    pattern = pattern_for(RUN, {"command": command})
    if prefix is None:
        assert pattern == CallPattern(tool=RUN, arguments={"command": command})
        assert pattern.said() == "this call exactly"
    else:
        assert pattern == CallPattern(tool=RUN, command_prefix=prefix)
        assert pattern.said() == f"commands starting with `{prefix}`"


def test_another_tool_offers_its_exact_arguments() -> None:
    arguments = {"path": "notes/a.md", "content": "x"}
    assert pattern_for("write_file", arguments) == CallPattern(
        tool="write_file", arguments=arguments
    )


@pytest.mark.parametrize(
    ("command", "covered"),
    [
        ("git push", True),
        ("git push -f origin main", True),
        ("git push origin && git push upstream", True),  # every command of the chain
        ("git pushy", False),  # a prefix ends at a word's end
        ("git push && rm -rf /", False),
        ("git push; curl evil.example", False),
        ("git push $(rm -rf /)", False),  # a substitution is a command of its own
        ("git push `rm -rf /`", False),
        ("git push | sh", False),
        ("git status", False),
        ("echo git push", False),
    ],
)
def test_a_prefix_covers_a_line_whose_every_command_starts_with_it(
    command: str, covered: bool
) -> None:
    push = CallPattern(tool=RUN, command_prefix="git push")
    assert covers(push, RUN, {"command": command}) is covered


def test_exact_arguments_cover_the_same_call_only() -> None:
    exact = CallPattern(tool="write_file", arguments={"path": "a.md", "content": "x"})
    assert covers(exact, "write_file", {"content": "x", "path": "a.md"})  # any key order
    assert not covers(exact, "write_file", {"path": "a.md", "content": "y"})
    assert not covers(exact, "edit_file", {"path": "a.md", "content": "x"})


# --- what people read ---------------------------------------------------------------------------


REF = PlatformRef(platform="slack", workspace=TEAM_ID, channel=CHANNEL, thread="1.0")


def test_the_approval_message_says_what_a_wider_approval_covers_and_has_its_buttons() -> None:
    calls = (
        GatedCall(
            number=1,
            tool=RUN,
            summary="`rm -rf build`",
            reason="asks",
            pattern=CallPattern(tool=RUN, arguments={"command": "rm -rf build"}),
        ),
        GatedCall(
            number=2,
            tool=RUN,
            summary="`git push origin main`",
            reason="asks",
            pattern=CallPattern(tool=RUN, command_prefix="git push" + " x" * 40),
        ),
    )
    event = ToolApprovalRequested(request_id="r1", calls=calls, scopes=tuple(ApprovalScope))
    post = tool_approval_message(REF, event, "white_check_mark", "x").action
    assert isinstance(post, PostReply)
    assert post.text.splitlines()[3].startswith(
        "↳ The buttons also allow a call for this run (until it ends) or always in this "
        "channel: 1. this call exactly · 2. commands starting with `git push x"
    )
    labels = [b.label for b in post.buttons]
    assert labels[:6] == [
        "Allow 1",
        "Deny 1",
        "Allow 2",
        "Deny 2",
        "Allow 1 for this run",
        "Always allow 1 here",
    ]
    assert labels[6].startswith("Allow 2 for this run: git push x x")
    assert len(labels[6]) == 75 and labels[6].endswith("…")  # Slack's limit
    assert [b.value for b in post.buttons[4:6]] == [
        'tb1:{"k":"run","r":"r1","n":1}',
        'tb1:{"k":"channel","r":"r1","n":1}',
    ]
    once = ToolApprovalRequested(request_id="r1", calls=calls)  # no wider scope offered
    shown = tool_approval_message(REF, once, "white_check_mark", "x").action
    assert isinstance(shown, PostReply)
    assert [b.label for b in shown.buttons] == ["Allow 1", "Deny 1", "Allow 2", "Deny 2"]
    assert "↳" not in shown.text


def test_the_decided_message_says_the_scope_chosen() -> None:
    push = CallPattern(tool=RUN, command_prefix="git push")

    def closed(*calls: CallOutcome) -> str:
        event = RequestClosed(request_id="r1", request="tool_approval", outcome="decided")
        return outcome_line(event.model_copy(update={"calls": calls}))

    run = CallOutcome(number=1, outcome="allowed", by_name="alice", scope="run", pattern=push)
    assert closed(run) == "✅ Allowed by alice for this run: commands starting with `git push`"
    channel = run.model_copy(update={"scope": ApprovalScope.CHANNEL, "number": 2})
    denied = CallOutcome(number=3, outcome="denied", by_name="bob")
    assert closed(run, channel, denied) == (
        "✅ call 1 allowed by alice for this run, commands starting with `git push` · "
        "✅ call 2 allowed by alice always in this channel, commands starting with "
        "`git push` · ❌ call 3 denied by bob"
    )
    once = CallOutcome(number=1, outcome="allowed", by_name="alice")
    assert closed(once) == "✅ Allowed by alice"


# --- the console ----------------------------------------------------------------------------


@pytest.mark.usefixtures("working_bwrap")
async def test_the_console_allows_a_call_for_the_run(settings: Settings, make_app) -> None:
    policy = {"rules": [{"tool": RUN, "command_prefix": "echo hello", "decision": "ask"}]}
    settings.policy = policy
    calls = [ScriptedCall(RUN, {"command": f"echo hello {n}"}) for n in ("one", "two")]
    model = ScriptedModel(
        [
            ScriptedTurn(calls=[ScriptedCall("propose_plan", {"steps": ["Say hello"]})]),
            ScriptedTurn(calls=calls[:1]),
            ScriptedTurn(calls=calls[1:]),
            ScriptedTurn(calls=[ScriptedCall("finish", {"answer": "Hello twice."})]),
        ]
    )
    chat = Chat(await make_app(model))
    await chat.mention("say hello")
    await chat.react(chat.bot_message("📋 Plan"))
    await chat.app.hub.settled()
    asked = chat.bot_message("🔐 May I run this?")
    assert "[Allow for this run: echo hello …] [Always allow here: echo hello …]" in (
        chat.out.getvalue()
    )

    await chat.decide(asked, 1, "white_check_mark run")
    await chat.app.hub.settled()

    assert "✅ Allowed by alice for this run: commands starting with `echo hello`" in chat.said()
    assert any(s.startswith("✅ Hello twice.") for s in chat.said())
    snap = await chat.snapshot()
    assert {r.state for r in snap.tool_calls.values() if r.name == RUN} == {ToolState.DONE}


# --- without a sandbox ---------------------------------------------------------------------


def test_without_a_sandbox_only_once_is_offered(settings: Settings) -> None:
    unsandboxed = settings.layers(every_command_asks=True).at("slack", TEAM_ID, CHANNEL)
    assert unsandboxed.approval_scopes == (ApprovalScope.ONCE,)
    assert unsandboxed.engine_settings(EngineSettings()).approval_scopes == (ApprovalScope.ONCE,)
    sandboxed = settings.layers().at("slack", TEAM_ID, CHANNEL)
    assert sandboxed.approval_scopes == tuple(ApprovalScope)


# --- operators ------------------------------------------------------------------------------


OPERATORS = {"dana": Operator(token_sha256=token_sha256(TOKEN))}


def test_an_operator_is_their_name_and_the_token_of_its_hash() -> None:
    assert authenticated(OPERATORS, "dana", TOKEN) == "dana"
    for name, token in (("dana", TOKEN + "x"), ("erin", TOKEN)):
        with pytest.raises(OperatorRefused) as refused:
            authenticated(OPERATORS, name, token)
        assert str(refused.value) == f"refused: {name!r} is not an operator with this token"
        assert TOKEN not in str(refused.value)
    with pytest.raises(OperatorRefused, match="no operators are named in the settings"):
        authenticated({}, "dana", TOKEN)


def test_a_token_comes_from_the_environment_or_the_terminal_never_an_argument() -> None:
    assert token_given({"THREADBOT_OPERATOR_TOKEN": TOKEN}) == TOKEN
    assert token_given({}, ask=lambda _prompt: TOKEN, interactive=True) == TOKEN
    with pytest.raises(OperatorRefused, match="set THREADBOT_OPERATOR_TOKEN"):
        token_given({}, interactive=False)
    with pytest.raises(OperatorRefused, match="16 characters at least"):
        token_given({"THREADBOT_OPERATOR_TOKEN": "short"})


def test_operator_hash_prints_the_line_for_the_settings(tmp_path: Path) -> None:
    done = threadbot(tmp_path, "operator", "hash", env={"THREADBOT_OPERATOR_TOKEN": TOKEN})
    assert done.returncode == 0, done.stderr
    assert done.stdout == f'token_sha256 = "{token_sha256(TOKEN)}"\n'
    assert TOKEN not in done.stdout
    missing = threadbot(tmp_path, "operator", "hash")
    assert missing.returncode == 2
    assert "no operator token: set THREADBOT_OPERATOR_TOKEN" in missing.stderr


def test_policy_revoke_refuses_without_operators_a_wrong_token_or_an_unknown_rule(
    tmp_path: Path,
) -> None:
    database = {"THREADBOT_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'bot.db'}"}
    assert threadbot(tmp_path, "db", "upgrade", env=database).returncode == 0
    token = {"THREADBOT_OPERATOR_TOKEN": TOKEN}
    nobody = threadbot(tmp_path, "policy", "revoke", "1", "--operator", "dana", env=token)
    assert nobody.returncode == 2
    assert "no operators are named in the settings" in nobody.stderr

    toml = f'[operators.dana]\ntoken_sha256 = "{token_sha256(TOKEN)}"\n'
    (tmp_path / "threadbot.toml").write_text(toml)
    wrong = {"THREADBOT_OPERATOR_TOKEN": "not-the-token-at-all"}
    refused = threadbot(
        tmp_path, "policy", "revoke", "1", "--operator", "dana", env=database | wrong
    )
    assert (refused.returncode, refused.stdout) == (2, "")
    assert refused.stderr == (
        "threadbot policy revoke: refused: 'dana' is not an operator with this token\n"
    )
    unknown = threadbot(
        tmp_path, "policy", "revoke", "7", "--operator", "dana", env=database | token
    )
    assert unknown.returncode == 2
    assert "there is no rule 7" in unknown.stderr
    huge = "9" * 23  # past any row id: refused as a usage error, no traceback
    past = threadbot(tmp_path, "policy", "revoke", huge, "--operator", "dana", env=database | token)
    assert past.returncode == 2 and f"there is no rule {huge}" in past.stderr
    assert "Traceback" not in past.stderr
    as_argument = threadbot(tmp_path, "policy", "revoke", "7", "--operator", "dana", TOKEN)
    assert as_argument.returncode == 2  # argparse: a token is no argument
    listed = threadbot(tmp_path, "policy", "list", env=database)
    assert (listed.returncode, listed.stdout) == (0, "no remembered approvals\n")


def test_a_bad_token_hash_in_the_settings_stops_the_command(tmp_path: Path) -> None:
    (tmp_path / "threadbot.toml").write_text('[operators.dana]\ntoken_sha256 = "abc"\n')
    done = threadbot(tmp_path, "policy", "list")
    assert done.returncode == 2
    assert "operators.dana.token_sha256" in done.stderr
    assert "64 hexadecimal digits" in done.stderr
