"""Every ``threadbot`` command says what is wrong in one line, and never prints a traceback.

Run as a person would, as real processes: a read-only folder (a real read-only bind
mount, made with bubblewrap), a file that is not a database, a reader that closes the
pipe early (``threadbot doctor | head -1``), a platform nobody listens for, commands
without their subcommand, an id that cannot be one.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import forkserver
from tests.cli_harness import clean_env, threadbot


def one_line(result: subprocess.CompletedProcess[str]) -> str:
    """The one line the command said on stderr (the test fails on more, or a traceback)."""
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def read_only(folder: Path, *command: str) -> subprocess.CompletedProcess[str]:
    """``threadbot COMMAND`` in ``folder``, mounted read-only for it alone (bubblewrap)."""
    return subprocess.run(
        [
            "bwrap",
            *("--bind", "/", "/", "--dev", "/dev", "--proc", "/proc"),
            *("--ro-bind", str(folder), str(folder), "--chdir", str(folder)),
            *("--", sys.executable, "-m", "bot", *command),
        ],
        input="hi\n",
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=60,
    )


def test_db_upgrade_in_a_read_only_folder_says_the_folder_is_read_only(
    tmp_path: Path, working_bwrap: None
) -> None:
    result = read_only(tmp_path, "db", "upgrade")

    assert result.returncode == 2
    assert one_line(result) == (
        "threadbot: cannot upgrade the database: "
        "the database folder .threadbot is on a read-only file system"
    )


def test_run_in_a_read_only_folder_says_so(tmp_path: Path, working_bwrap: None) -> None:
    result = read_only(tmp_path, "run")

    assert result.returncode == 2
    assert one_line(result).endswith(".threadbot: read-only file system")


def test_a_file_that_is_not_a_database_is_said_so_without_sqlalchemys_link(
    tmp_path: Path,
) -> None:
    (tmp_path / ".threadbot").mkdir()
    (tmp_path / ".threadbot" / "threadbot.db").write_text("notes, not a database\n" * 50)

    upgrade = threadbot(tmp_path, "db", "upgrade")
    run = threadbot(tmp_path, "run", stdin="hi\n")

    said = ".threadbot/threadbot.db is not a SQLite database (another kind of file has its name)"
    assert upgrade.returncode == 2 and one_line(upgrade).endswith(said)
    assert run.returncode == 2 and one_line(run) == f"threadbot: {said}"
    assert "sqlalche.me" not in upgrade.stderr + run.stderr


def test_a_file_where_the_database_folder_should_be_is_said_so(tmp_path: Path) -> None:
    (tmp_path / ".threadbot").write_text("")

    result = threadbot(tmp_path, "db", "upgrade")

    assert result.returncode == 2
    assert one_line(result) == (
        "threadbot: cannot upgrade the database: "
        ".threadbot is a file, not a folder: the database cannot be made in it"
    )


@pytest.mark.parametrize(
    "command",
    [
        ("doctor",),
        ("settings", "explain", "--platform", "slack", "--team", "T0123", "--channel", "C0456"),
        ("run",),
    ],
    ids=["doctor", "settings explain", "run (the console)"],
)
def test_output_cut_short_by_a_closed_pipe_ends_quietly(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    reader, writer = os.pipe()
    os.close(reader)  # as `| head -1` after its line: every write meets a closed pipe
    try:
        result = forkserver.run(
            [sys.executable, "-m", "bot", *command],
            input="tidy up the notes\n",
            stdout=writer,
            stderr=subprocess.PIPE,
            text=True,
            cwd=tmp_path,
            env=clean_env(),
            timeout=60,
        )
    finally:
        os.close(writer)

    assert result.returncode == 141  # 128 + SIGPIPE, as a shell reports it
    assert result.stderr == ""


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A local port that refuses connections: bound by this test, never listening."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


def test_a_discord_start_that_cannot_connect_names_the_address(
    tmp_path: Path, closed_port: int
) -> None:
    env = {
        "DISCORD_TOKEN": "test-discord-token",
        "DISCORD_API_URL": f"http://127.0.0.1:{closed_port}/api/v10",
        "DISCORD_GATEWAY_URL": f"ws://127.0.0.1:{closed_port}/gateway",
        "THREADBOT_OPS_PORT": "0",
    }

    result = threadbot(tmp_path, "run", env=env)

    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last == (
        "threadbot: could not start discord: the Discord connection ended: cannot connect "
        f"to 127.0.0.1:{closed_port}: connection refused (nothing listens there)"
    )
    assert "ConnectionKey" not in result.stderr
    assert "PyNaCl" not in result.stderr and "davey" not in result.stderr  # no voice notices


def test_a_slack_start_that_cannot_connect_names_the_address_without_bolts_notice(
    tmp_path: Path, closed_port: int
) -> None:
    env = {
        "SLACK_BOT_TOKEN": "xoxb-test",
        "SLACK_SIGNING_SECRET": "test-secret",
        "SLACK_API_URL": f"http://127.0.0.1:{closed_port}/api/",
        "THREADBOT_SLACK_HOST": "127.0.0.1",
        "THREADBOT_SLACK_PORT": "0",
        "THREADBOT_OPS_PORT": "0",
    }

    result = threadbot(tmp_path, "run", env=env)

    assert result.returncode == 2
    assert one_line(result) == (
        f"threadbot: could not start slack: cannot connect to 127.0.0.1:{closed_port}: "
        "connection refused (nothing listens there)"
    )
    assert "xoxb-test" not in result.stderr


def test_an_operations_port_in_use_is_a_start_error_naming_it(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {
            "SLACK_BOT_TOKEN": "xoxb-test",
            "SLACK_SIGNING_SECRET": "test-secret",
            "THREADBOT_SLACK_HOST": "127.0.0.1",
            "THREADBOT_SLACK_PORT": "0",
            "THREADBOT_OPS_PORT": str(port),
        }
        result = threadbot(tmp_path, "run", env=env)

    assert result.returncode == 2
    assert one_line(result) == (
        f"threadbot: cannot listen on the operations address http://127.0.0.1:{port}: address "
        "already in use (set THREADBOT_OPS_HOST or THREADBOT_OPS_PORT; a port of 0 takes any "
        "free one)"
    )


def test_version_is_the_installed_ones(tmp_path: Path) -> None:
    from importlib.metadata import version

    result = threadbot(tmp_path, "--version")

    assert result.returncode == 0
    assert result.stdout == f"threadbot {version('threadbot')}\n"


def test_help_lists_every_command(tmp_path: Path) -> None:
    result = threadbot(tmp_path, "--help")

    assert result.returncode == 0
    # "    run       start every...", not the next line of a wrapped description
    listed = re.findall(r"^ {4}(\w+) ", result.stdout, flags=re.MULTILINE)
    assert listed == [
        "run",
        "console",
        "db",
        "doctor",
        "settings",
        "workflows",
        "tokens",
        "policy",
        "fork",
        "operator",
        "schedules",
        "usage",
        "audit",
    ]


@pytest.mark.parametrize(
    ("group", "subcommand"),
    [
        ("db", "upgrade"),
        ("settings", "explain"),
        ("workflows", "check"),
        ("tokens", "rekey"),
        ("policy", "revoke"),
        ("operator", "hash"),
    ],
    ids=["db", "settings", "workflows", "tokens", "policy", "operator"],
)
def test_a_group_without_its_subcommand_lists_them(
    tmp_path: Path, group: str, subcommand: str
) -> None:
    result = threadbot(tmp_path, group)

    assert result.returncode == 2
    assert "Traceback" not in result.stderr and "required" not in result.stderr
    assert any(line.split()[:1] == [subcommand] for line in result.stderr.splitlines())


@pytest.mark.parametrize(
    ("place", "said"),
    [
        (
            ("--platform", "slack", "--team", "general"),
            "--team: 'general' is not a Slack team id (T0123ABCD, or E0123ABCD for an "
            "organisation)",
        ),
        (
            ("--platform", "slack", "--team", "T0123", "--channel", "#general"),
            "--channel: '#general' is not a Slack channel id (C0123ABCD; G or D for private ones)",
        ),
        (
            ("--platform", "discord", "--team", "1198206788567171079", "--channel", "general"),
            "--channel: 'general' is not a Discord id (a number, e.g. 1198206788567171079)",
        ),
    ],
    ids=["slack team", "slack channel", "discord channel"],
)
def test_settings_explain_with_an_id_that_cannot_be_one_says_so(
    tmp_path: Path, place: tuple[str, ...], said: str
) -> None:
    result = threadbot(tmp_path, "settings", "explain", *place)

    assert result.returncode == 2
    assert one_line(result) == f"threadbot settings explain: {said}"
    assert result.stdout == ""
