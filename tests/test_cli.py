"""The shipped commands, run as a person would: a real process, piped stdin."""

from __future__ import annotations

import stat
import subprocess
import sys
from pathlib import Path

import pytest

from bot.serve import DEMO_ON_PLATFORMS
from tests.cli_harness import ROOT, clean_env, threadbot


def _env(tmp_path: Path) -> dict[str, str]:
    return clean_env()


def _run(
    tmp_path: Path, env: dict[str, str], stdin: str = "hi\n", *command: str
) -> subprocess.CompletedProcess[str]:
    """``threadbot COMMAND`` (``run`` by default) as a process, in ``tmp_path``."""
    return threadbot(tmp_path, *(command or ("run",)), stdin=stdin, env=env)


def test_piped_hello_shows_the_demo_plan_and_exits_0(tmp_path: Path) -> None:
    result = _run(tmp_path, {}, "hello\n")
    assert result.returncode == 0, result.stderr
    assert "built-in demo model" in result.stdout
    assert "[1] you: hello" in result.stdout
    assert "📋 Plan (v1)" in result.stdout
    assert (tmp_path / ".threadbot" / "threadbot.db").exists()


def test_db_upgrade_creates_the_schema(tmp_path: Path) -> None:
    env = {"THREADBOT_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path}/x.db"}
    result = _run(tmp_path, env, "", "db", "upgrade")
    assert result.returncode == 0, result.stderr
    versions = ROOT / "conversations" / "migrations" / "versions"
    head = max(p.name[:4] for p in versions.glob("[0-9]*.py"))
    assert f"database at revision {head}" in result.stdout

    import sqlite3

    with sqlite3.connect(tmp_path / "x.db") as db:
        tables = {row[0] for row in db.execute("select name from sqlite_master where type='table'")}
        mode = db.execute("pragma journal_mode").fetchone()[0]
    assert {
        "conversations",
        "deliveries",
        "journal",
        "tool_calls",
        "pending_requests",
        "outbox",
        "model_calls",
        "prices",
    } <= tables
    assert mode == "wal"


def test_bad_settings_name_the_variable_the_reason_and_the_allowed_values(
    tmp_path: Path,
) -> None:
    url = "mysql+aiomysql://bot:hunter2@db.internal/threadbot"
    env = {"THREADBOT_PROGRESS_MODE": "loud", "THREADBOT_DATABASE_URL": url}
    result = _run(tmp_path, env, "")
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert lines[0] == "threadbot: bad settings:"
    assert "  THREADBOT_PROGRESS_MODE ('loud'): must be one of 'replies' or 'status'" in lines
    assert any(
        line.startswith("  THREADBOT_DATABASE_URL ('mysql+aiomysql://bot:***@db.internal/")
        and "threadbot keeps its store in SQLite or PostgreSQL, not mysql" in line
        for line in lines
    ), lines
    assert "hunter2" not in result.stderr
    assert "pydantic" not in result.stderr and "Traceback" not in result.stderr


def test_a_bad_key_in_threadbot_toml_is_named_by_its_dotted_path(tmp_path: Path) -> None:
    (tmp_path / "threadbot.toml").write_text(
        "step_turn_limit = 0\n"
        "[policy]\n"
        '[[policy.rules]]\ntool = "run_command"\ndecision = "ask"\n'
        '[[policy.rules]]\ntool = "run_comand"\ndecision = "deny"\n'
    )
    result = _run(tmp_path, {}, "")
    assert result.returncode == 2
    assert "  threadbot.toml: step_turn_limit (0): must be at least 1" in result.stderr
    (tmp_path / "threadbot.toml").write_text(
        '[policy]\n[[policy.rules]]\ntool = "run_comand"\ndecision = "deny"\n'
    )
    result = _run(tmp_path, {}, "")
    assert result.returncode == 2
    assert "  threadbot.toml: policy.rules[0].tool: no tool called 'run_comand'" in result.stderr


@pytest.mark.parametrize(
    ("variable", "value", "said"),
    [
        ("THREADBOT_APROVERS", "alice", "unknown settings: THREADBOT_APROVERS"),
        ("THREADBOT_LOG_LEVEL", "LOUD", "THREADBOT_LOG_LEVEL ('LOUD'): use DEBUG, INFO"),
        ("THREADBOT_DATABASE_URL", "sqlite:///x.db", "use an async driver"),
        ("THREADBOT_CONFIG", "/nonexistent.toml", "not a file"),
        ("THREADBOT_STOP_COMMAND", "", "THREADBOT_STOP_COMMAND (''): must be one word"),
        ("THREADBOT_FAULT", "after_lunch", "unknown fault point"),
        ("THREADBOT_APPROVE_REACTIONS", "x,white_check_mark", "in both approve_reactions"),
        ("THREADBOT_APPROVE_REACTIONS", "", "at least one reaction"),
        ("THREADBOT_STOP_COMMAND", "help", "already a command"),
    ],
)
def test_a_bad_setting_stops_the_bot_with_a_clear_error(tmp_path, variable, value, said) -> None:
    result = _run(tmp_path, {variable: value})
    assert result.returncode == 2
    assert said in result.stderr
    assert "Traceback" not in result.stderr


def test_a_typo_in_threadbot_toml_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "threadbot.toml").write_text('aprovers = ["alice"]\n')
    result = _run(tmp_path, {})
    assert result.returncode == 2
    assert "aprovers" in result.stderr


def test_a_restart_goes_on_in_the_same_threads(tmp_path: Path, working_bwrap: None) -> None:
    """The demo's command runs without asking only in the sandbox (without bubblewrap
    every command asks first, and this script does not answer)."""
    first = _run(tmp_path, {}, "tidy up\n")
    assert "[2] ↳1 threadbot: 📋 Plan (v1)" in first.stdout
    second = _run(tmp_path, {}, "+✅ 2\n>1 short\n")
    assert second.returncode == 0, second.stderr
    assert "✅ Done." in second.stdout
    assert "[3]" in second.stdout  # the ids go on after the first process's


def test_a_custom_stop_command(tmp_path: Path) -> None:
    result = _run(tmp_path, {"THREADBOT_STOP_COMMAND": "halt"}, "tidy up\n/help\n/halt 1\n")
    assert result.returncode == 0, result.stderr
    assert "/halt [N]" in result.stdout and "/stop [N]" not in result.stdout
    assert "⏹ Stopped by you." in result.stdout


def test_bytes_that_are_not_utf8_do_not_break_the_console(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "bot", "run"],
        input=b"ok \xff\xfe bad\n",
        capture_output=True,
        cwd=tmp_path,
        env=_env(tmp_path),
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "📋 Plan (v1)" in result.stdout.decode()


def test_a_policy_rule_for_a_tool_that_does_not_exist_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "threadbot.toml").write_text(
        '[[policy.rules]]\ntool = "run_comand"\ndecision = "deny"\n'
    )
    result = _run(tmp_path, {})
    assert result.returncode == 2
    assert "no tool called 'run_comand'" in result.stderr


def test_db_upgrade_of_a_file_that_is_no_database_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "x.db").write_text("this is not a database\n" * 100)
    env = {"THREADBOT_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path}/x.db"}
    result = _run(tmp_path, env, "", "db", "upgrade")
    assert result.returncode == 2
    assert "cannot upgrade the database" in result.stderr
    assert "Traceback" not in result.stderr


def _piped_run(tmp_path: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    """``threadbot run`` (the console) as a fresh process in ``tmp_path``, its standard
    streams piped as text, its input left open."""
    return subprocess.Popen(
        [sys.executable, "-m", "bot", "run"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env=env,
    )


def test_a_second_console_in_the_same_folder_is_refused_while_the_first_runs(
    tmp_path: Path,
) -> None:
    """Two consoles on one state file gave the same ids to different messages, and a reply
    by id went to the other's thread (found by a newcomer's trial): the second is a start
    error now, and the first goes on."""
    first = _piped_run(tmp_path, _env(tmp_path))
    with first:  # a failure closes its input, so it ends too
        assert first.stdin is not None and first.stdout is not None
        first.stdin.write("from A\n")
        first.stdin.flush()
        while "[2] ↳1 threadbot: 📋 Plan (v1)" not in (line := first.stdout.readline()):
            assert line, "the first console ended before its plan"

        second = _run(tmp_path, _env(tmp_path), "from B\n")
        assert second.returncode == 2
        state = tmp_path / ".threadbot" / "console.jsonl"
        assert second.stderr.splitlines() == [
            f"threadbot: the console state file {state.relative_to(tmp_path)} is in use by "
            "another threadbot console: run one console per state file (stop the other, or "
            "set THREADBOT_CONSOLE_STATE to another file)"
        ]
        assert second.stdout == ""  # refused before it showed or kept anything
        assert not state.with_name("console.jsonl.pending").exists()

        out, _ = first.communicate(">1 on in A\n", timeout=60)
        assert first.returncode == 0
        assert "[3] ↳1 you: on in A" in out


def _console_with_a_long_command(tmp_path: Path) -> tuple[subprocess.Popen[str], Path]:
    """The console running ``sleep 300`` after an approved plan; the process and the pid file
    (long enough that ``late`` appears only if the kill never came, on a slow machine too)."""
    import json
    import sqlite3
    import time

    script = tmp_path / "script.json"
    command = {"command": "echo $$ > pid; sleep 300; touch late"}
    script.write_text(
        json.dumps(
            [
                {"calls": [{"name": "propose_plan", "input": {"steps": ["wait"]}}]},
                {"calls": [{"name": "run_command", "input": command}]},
            ]
        )
    )
    env = _env(tmp_path) | {
        "THREADBOT_MODEL_SCRIPT": str(script),
        "THREADBOT_CONSOLE_WAIT": "no",
        "THREADBOT_SHUTDOWN_GRACE": "0.5",
    }
    proc = _piped_run(tmp_path, env)
    assert proc.stdin is not None
    proc.stdin.write("wait a bit\n")
    proc.stdin.flush()
    db = tmp_path / ".threadbot" / "threadbot.db"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            with sqlite3.connect(db) as conn:
                sent = conn.execute(
                    "select 1 from outbox where request_id is not null and state = 'sent'"
                ).fetchall()
        except sqlite3.OperationalError:
            sent = []
        if sent:
            break
        time.sleep(0.1)
    proc.stdin.write("+✅ 2\n")
    proc.stdin.flush()
    pid_files = list((tmp_path / ".threadbot" / "workspaces").glob("*/pid"))
    deadline = time.monotonic() + 20
    while not pid_files and time.monotonic() < deadline:
        time.sleep(0.1)
        pid_files = list((tmp_path / ".threadbot" / "workspaces").glob("*/pid"))
    assert pid_files, proc.stdout
    return proc, pid_files[0]


def _assert_interrupted(tmp_path: Path, pid_file: Path) -> None:
    """The command's process is gone, it never finished, and its call is ``interrupted``."""
    import sqlite3

    assert pid_file.read_text().strip()  # the command had started
    with sqlite3.connect(tmp_path / ".threadbot" / "threadbot.db") as conn:
        states = conn.execute("select state, process_group from tool_calls")
        ((state, pid),) = [row for row in states.fetchall() if row[1] is not None]
    assert state == "interrupted"
    assert (  # the group's leader (bwrap, or the shell) is gone
        not Path(f"/proc/{pid}").exists()
        or "Z" in Path(f"/proc/{pid}/stat").read_text().split(")")[1][:3]
    )
    assert not (pid_file.parent / "late").exists()


def test_sigterm_kills_the_running_command_after_the_grace_and_exits_0(tmp_path: Path) -> None:
    import signal

    proc, pid_file = _console_with_a_long_command(tmp_path)

    proc.send_signal(signal.SIGTERM)

    assert proc.wait(timeout=120) == 0
    _assert_interrupted(tmp_path, pid_file)
    assert proc.stderr is not None
    said = proc.stderr.read()
    assert "shutting down: waiting up to 0.5 s for 1 run to finish the step in progress" in said


def test_quit_while_a_run_works_says_it_waits_and_ctrl_c_leaves_cleanly(tmp_path: Path) -> None:
    import signal
    import time

    proc, pid_file = _console_with_a_long_command(tmp_path)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("/quit\n")
    proc.stdin.flush()
    deadline = time.monotonic() + 20
    line = ""
    while "still working" not in line and time.monotonic() < deadline:
        line = proc.stdout.readline()
    assert "1 conversation is still working" in line and "Press Ctrl-C to leave now" in line

    proc.send_signal(signal.SIGINT)

    assert proc.wait(timeout=120) == 0
    _assert_interrupted(tmp_path, pid_file)


async def test_threadbot_run_connects_to_slack_when_a_token_is_set(tmp_path: Path) -> None:
    import asyncio
    import signal

    from tests.fakes.slack_api import FakeSlackApi

    async with FakeSlackApi() as api:
        env = _env(tmp_path) | {
            "SLACK_BOT_TOKEN": "xoxb-test",
            "SLACK_SIGNING_SECRET": "test-secret",
            "SLACK_API_URL": api.base_url,
            "THREADBOT_SLACK_HOST": "127.0.0.1",
            "THREADBOT_SLACK_PORT": "0",
        }
        proc, line = await _start_run(tmp_path, env)
        assert line.decode().strip() == "threadbot: connected to slack"
        assert [c.method for c in api.calls][:1] == ["auth.test"]
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 30) == 0
        assert proc.stderr is not None
        stderr = (await proc.stderr.read()).decode()
    # no ANTHROPIC_API_KEY: people in Slack get the demo model, so the start says so
    assert f"threadbot: {DEMO_ON_PLATFORMS}" in stderr.splitlines()


async def test_a_refused_slack_token_is_a_start_error_naming_slack(tmp_path: Path) -> None:
    import asyncio

    from tests.fakes.slack_api import FakeSlackApi

    async with FakeSlackApi() as api:
        api.fail("auth.test", "invalid_auth")
        env = _env(tmp_path) | {
            "SLACK_BOT_TOKEN": "xoxb-revoked",
            "SLACK_SIGNING_SECRET": "test-secret",
            "SLACK_API_URL": api.base_url,
            "THREADBOT_SLACK_HOST": "127.0.0.1",
            "THREADBOT_SLACK_PORT": "0",
        }
        proc, line = await _start_run(tmp_path, env)
        assert line == b""  # never connected
        assert await asyncio.wait_for(proc.wait(), 30) == 2
        assert proc.stderr is not None
        stderr = (await proc.stderr.read()).decode()
    assert any(
        line.startswith("threadbot: could not start slack: ") for line in stderr.splitlines()
    )
    assert "invalid_auth" in stderr and "Traceback" not in stderr
    assert "xoxb-revoked" not in stderr


async def test_threadbot_run_connects_to_discord_when_a_token_is_set(tmp_path: Path) -> None:
    import asyncio
    import signal

    from tests.fakes.discord_api import FakeDiscord

    async with FakeDiscord(token="test-discord-token") as fake:
        env = _env(tmp_path) | {
            "DISCORD_TOKEN": "test-discord-token",
            "DISCORD_API_URL": fake.api_url,
            "DISCORD_GATEWAY_URL": fake.gateway_url,
            "THREADBOT_DISCORD_GUILDS": "1198205278617731073",
            "ANTHROPIC_API_KEY": "test-key",  # never used: nobody mentions the bot
        }
        proc, line = await _start_run(tmp_path, env)
        assert line.decode().strip() == "threadbot: connected to discord"
        assert fake.identify is not None
        assert fake.commands.get("1198205278617731073")  # /stop registered in the guild
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 30) == 0
        assert proc.stderr is not None
        assert "demo model" not in (await proc.stderr.read()).decode()


async def _start_run(tmp_path: Path, env: dict[str, str]):  # type: ignore[no-untyped-def]
    """``threadbot run`` as a process (its operations address on any free port); returns
    it and the first line it printed that says ``threadbot: connected to ...`` (lines
    before it, such as the operations address, are passed over), or ``b""`` when it
    ended without one."""
    import asyncio

    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        "run",
        cwd=tmp_path,
        env=env | {"THREADBOT_OPS_PORT": "0"},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    async with asyncio.timeout(30):
        while line := await proc.stdout.readline():
            if line.startswith(b"threadbot: connected to "):
                break
    return proc, line


def test_help_answers_without_importing_the_platform_sdks_or_the_model_client(
    tmp_path: Path,
) -> None:
    probe = (
        "import sys\n"
        "from bot.cli import main\n"
        "try:\n"
        "    main(['--help'])\n"
        "except SystemExit as exc:\n"
        "    assert exc.code == 0\n"
        "heavy = ('slack_bolt', 'slack_sdk', 'discord', 'anthropic', 'sqlalchemy', 'alembic')\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=_env(tmp_path),
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "usage: threadbot" in result.stdout
    assert result.stdout.strip().splitlines()[-1] == "[]"


def test_the_data_folder_and_the_console_state_are_the_bots_alone(tmp_path: Path) -> None:
    result = _run(tmp_path, {}, "tidy up the notes\n")

    assert result.returncode == 0, result.stderr
    data = tmp_path / ".threadbot"
    assert stat.S_IMODE(data.stat().st_mode) == 0o700  # the database holds every conversation
    assert stat.S_IMODE((data / "console.jsonl").stat().st_mode) == 0o600


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ("nope", "a model script is JSON: Expecting value"),
        ('{"turns": []}', "a model script is a JSON list of turns"),
        ('[{"calls": [{"input": {}}]}]', 'turn 1: each call is an object with a "name"'),
        ('[{"text": "hi"}, {"text": 5}]', "turn 2: text is a string"),
        ('[{"calls": "x"}]', "turn 1: calls is a list"),
        ('[{"role": "planner"}]', 'turn 1: role is "expert" or absent'),
        ('[{"txt": "hi"}]', "turn 1: unknown keys ['txt']"),
    ],
)
def test_a_malformed_model_script_is_refused_at_start_naming_the_file_and_turn(
    tmp_path: Path, content: str, said: str
) -> None:
    (tmp_path / "script.json").write_text(content)
    result = _run(tmp_path, {"THREADBOT_MODEL_SCRIPT": "script.json"}, "hi\n")
    assert result.returncode == 2, result.stdout
    assert f"threadbot: script.json: {said}" in result.stderr
    assert "Traceback" not in result.stderr
