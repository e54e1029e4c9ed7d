"""``threadbot doctor`` tells an operator what works and what does not (issue 14).

Each test runs the real command as an operator would (``python -m bot doctor`` in
a temporary folder, settings from the environment) against the local fakes of
Slack, Discord and the Anthropic API, and asserts the lines it prints and its exit
code. The sandbox is the real bubblewrap where it runs (skipped with the reason
where it cannot; under ``CI=true`` that is a failure), or a stand-in ``bwrap``
script: missing, one that cannot run, one that confines nothing.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from bot.doctor import doctor
from bot.sandboxing import command_groups
from bot.settings import Settings
from conversations.store import migrate
from conversations.store.sql import create_engine
from core.tools.sandbox import DEFAULT_ENV
from tests.fakes.anthropic_server import FakeAnthropicServer
from tests.fakes.discord_api import BOT_USER_ID, BOT_USERNAME, FakeDiscord
from tests.fakes.slack_api import BOT_USER_ID as SLACK_BOT_USER
from tests.fakes.slack_api import TEAM_ID, FakeSlackApi

ROOT = Path(__file__).resolve().parents[1]
SLACK_TOKEN = "xoxb-1111111111-doctor-slack-token"
APP_TOKEN = "xapp-1-A0AGT00001-doctor-app-token"
DISCORD_TOKEN = "MTE5ODkzMDA1NDM0ODkzMTA3NA.doctor.discord-token"
API_KEY = "sk-ant-api03-doctor-test-key"
SANDBOX_PATH = DEFAULT_ENV["PATH"]
"""The ``PATH`` commands get inside the sandbox."""


@dataclass(frozen=True)
class Report:
    """What ``threadbot doctor`` printed, and its exit code."""

    code: int
    stdout: str
    stderr: str

    @property
    def lines(self) -> list[str]:
        return self.stdout.splitlines()

    def line(self, name: str) -> str:
        """The line of the check ``name`` (``"✓ slack: ..."``); fails when there is none."""
        found = [line for line in self.lines if line[2:].startswith(f"{name}: ")]
        assert len(found) == 1, f"no single {name!r} line in:\n{self.stdout}\n{self.stderr}"
        return found[0]

    def shows(self, secret: str) -> bool:
        return secret in self.stdout or secret in self.stderr


async def run_doctor(cwd: Path, *, unset: tuple[str, ...] = (), **env: str) -> Report:
    """``threadbot doctor`` as a process in ``cwd``: an in-memory database, a workspace
    root under ``cwd``, no model key or platform token unless ``env`` sets them; the
    variables in ``unset`` are left out (their defaults apply)."""
    base = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ANTHROPIC_", "THREADBOT_", "SLACK_", "DISCORD_"))
    }
    base |= {
        "PYTHONPATH": str(ROOT),
        "THREADBOT_DATABASE_URL": "memory://",
        "THREADBOT_WORKSPACE_ROOT": str(cwd / "workspaces"),
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        "doctor",
        cwd=cwd,
        env={k: v for k, v in (base | env).items() if k not in unset},
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode is not None
    return Report(process.returncode, out.decode(), err.decode())


def fake_bwrap(folder: Path, script: str) -> Path:
    """An executable called ``bwrap`` in ``folder`` that runs the shell ``script``."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "bwrap"
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(0o755)
    return path


def ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as probe:
            probe.bind(("::1", 0))
    except OSError:
        return False
    return True


# --- the sandbox ----------------------------------------------------------------------


@pytest.mark.usefixtures("working_bwrap")
async def test_a_working_sandbox_is_reported_as_working(tmp_path: Path) -> None:
    report = await run_doctor(tmp_path)

    assert report.code == 0, report.stdout + report.stderr
    bwrap = shutil.which("bwrap")
    assert report.line("sandbox") == (
        f"✓ sandbox: bubblewrap {bwrap} confines commands (own user, PID, IPC and network "
        "namespaces, its own /proc, no host /etc)"
    )
    assert report.line("sandbox secrets").startswith(
        "✓ sandbox secrets: the bot's environment cannot be read from inside the sandbox"
    )
    network = report.line("sandbox network")
    assert network.startswith("✓ sandbox network: no connection out from inside the sandbox: ")
    assert "127.0.0.1:" in network and "192.0.2.1:80 unreachable" in network
    assert network.count(" refused") == (2 if ipv6_loopback() else 1), network
    if ipv6_loopback():
        assert "[::1]:" in network
    groups = command_groups()
    assert not isinstance(groups, str)
    assert report.line("command caps") == (
        f"✓ command caps: each command runs in {groups.said()}: its processes together may "
        "use 2048 MB and run 256 at once"
    )
    assert report.line("slirp4netns").startswith(
        "✓ slirp4netns:" if shutil.which("slirp4netns") else "– slirp4netns: not installed"
    )
    assert report.line("database") == (
        "– database: memory:// keeps nothing past the process (tests, a try)"
    )
    assert report.line("slack") == "– slack: not configured (no SLACK_BOT_TOKEN)"
    assert report.line("discord") == "– discord: not configured (no DISCORD_TOKEN)"
    assert report.line("model API") == "– model API: demo model (no ANTHROPIC_API_KEY set)"
    assert report.line("workspace") == (
        f"✓ workspace: {tmp_path / 'workspaces'} does not exist yet; it can be made, and written to"
    )
    assert not (tmp_path / "workspaces").exists()  # the doctor leaves nothing behind
    assert report.lines[-1] == "threadbot doctor: everything needed works"


async def test_commands_that_cannot_be_capped_are_reported_with_what_to_do(
    tmp_path: Path,
) -> None:
    nowhere = tmp_path / "no-cgroups"
    report = await run_doctor(tmp_path, THREADBOT_CGROUP_ROOT=str(nowhere))

    assert report.code == 1
    assert report.line("command caps") == (
        f"✗ command caps: no cgroup the bot may create command groups in: no cgroup v2 under "
        f"{nowhere}, and no writable cgroup v1 memory and pids hierarchies are under {nowhere}: "
        "a command's memory and processes cannot be capped, so every command asks a person "
        "first; run the bot as root (cgroup v1), or in a cgroup v2 group with the memory and "
        "pids controllers (systemd: Delegate=memory pids and DelegateSubgroup=)"
    )


async def test_a_missing_bubblewrap_is_reported_with_how_to_install_it(tmp_path: Path) -> None:
    report = await run_doctor(tmp_path, THREADBOT_BWRAP="/nonexistent/bwrap")

    assert report.code == 1
    sandbox = report.line("sandbox")
    assert sandbox.startswith(
        "✗ sandbox: bubblewrap (/nonexistent/bwrap) is not installed: "
        "apt install bubblewrap slirp4netns"
    )
    assert "every command asks a person first" in sandbox
    assert report.line("sandbox secrets") == "– sandbox secrets: the sandbox does not run"
    assert report.line("sandbox network") == "– sandbox network: the sandbox does not run"
    assert report.lines[-1] == "threadbot doctor: 1 check failed"
    assert "Traceback" not in report.stderr


async def test_a_bubblewrap_that_cannot_run_is_reported_as_unusable(tmp_path: Path) -> None:
    bwrap = fake_bwrap(
        tmp_path / "bin",
        'echo "bwrap: No permissions to create a new namespace" >&2\nexit 1\n',
    )
    report = await run_doctor(tmp_path, THREADBOT_BWRAP=str(bwrap))

    assert report.code == 1
    sandbox = report.line("sandbox")
    assert sandbox.startswith(
        f"✗ sandbox: bubblewrap {bwrap} cannot run here (bwrap failed: bwrap: No permissions "
        "to create a new namespace): in a container, allow user namespaces"
    )
    assert "--security-opt seccomp=unconfined --security-opt systempaths=unconfined" in sandbox
    assert report.line("sandbox network") == "– sandbox network: the sandbox does not run"


async def test_a_bubblewrap_that_confines_nothing_is_caught_reading_secrets_and_connecting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    if shutil.which("python3", path=SANDBOX_PATH) is None:
        pytest.skip(f"no python3 on {SANDBOX_PATH} to connect with")
    # A "bwrap" that drops its options, and a root bot's drop to nobody, and runs the
    # command as it is.
    skip_options = 'while [ "$1" != "--" ]; do shift; done\nshift\n'
    bwrap = fake_bwrap(
        tmp_path / "bin",
        f'{skip_options}if [ "$1" = /usr/bin/setpriv ]; then\n{skip_options}fi\nexec "$@"\n',
    )
    # Nothing leaves the machine: the "public" address is a closed port of this host.
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        monkeypatch.setattr(
            "bot.doctor_sandbox.PUBLIC_TARGET", f"127.0.0.1:{closed.getsockname()[1]}"
        )
        settings = Settings(
            bwrap=str(bwrap), database_url="memory://", workspace_root=tmp_path / "ws"
        )
        code = await doctor(settings)

    out = capsys.readouterr().out
    lines = {line[2:].split(":", 1)[0]: line for line in out.splitlines()}
    assert code == 1
    assert lines["sandbox secrets"].startswith(
        "✗ sandbox secrets: the bot's environment CAN be read from inside the sandbox"
    )
    network = lines["sandbox network"]
    assert network.startswith("✗ sandbox network: from inside the sandbox: 127.0.0.1:")
    assert "reached" in network and network.endswith("a command can reach the host or the network")


async def test_slirp4netns_is_needed_only_where_a_rule_grants_a_network(tmp_path: Path) -> None:
    no_programs = tmp_path / "empty"
    no_programs.mkdir()
    env = {"PATH": str(no_programs), "THREADBOT_BWRAP": "/nonexistent/bwrap"}

    report = await run_doctor(tmp_path, **env)
    assert report.line("slirp4netns") == (
        "– slirp4netns: not installed; no policy rule grants a network, so nothing needs it "
        "yet (apt install slirp4netns)"
    )

    (tmp_path / "threadbot.toml").write_text(
        "[slack.T0123.channels.C0456]\n[[slack.T0123.channels.C0456.policy.rules]]\n"
        'tool = "run_command"\ncommand_prefix = "pip install"\ndecision = "ask"\nnetwork = true\n'
    )
    report = await run_doctor(tmp_path, **env)
    assert report.line("slirp4netns") == (
        "✗ slirp4netns: not installed, and a policy rule grants a network: those commands "
        "fail (apt install slirp4netns)"
    )


# --- the database and the workspace root ------------------------------------------------


async def test_a_database_behind_the_newest_migration_needs_db_upgrade(tmp_path: Path) -> None:
    versions = ROOT / "conversations" / "migrations" / "versions"
    revisions = sorted(p.name[:4] for p in versions.glob("[0-9]*.py"))
    head, older = revisions[-1], revisions[-2]
    path = tmp_path / "data" / "threadbot.db"
    url = f"sqlite+aiosqlite:///{path}"

    report = await run_doctor(tmp_path, THREADBOT_DATABASE_URL=url)
    assert report.line("database") == (
        f"– database: {url}: no database there yet; `threadbot db upgrade` (or the first "
        "`threadbot run`) makes it"
    )
    assert not path.exists() and not path.parent.exists()  # the doctor made nothing

    engine = create_engine(url)
    try:
        await migrate.upgrade(engine, older)
    finally:
        await engine.dispose()
    report = await run_doctor(tmp_path, THREADBOT_DATABASE_URL=url)
    assert report.line("database") == (
        f"✗ database: {url} is at revision {older}, the newest is {head}: "
        "needs `threadbot db upgrade`"
    )
    assert report.code == 1

    upgrade = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        "db",
        "upgrade",
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT), "THREADBOT_DATABASE_URL": url},
        stdout=asyncio.subprocess.DEVNULL,
    )
    assert await upgrade.wait() == 0
    report = await run_doctor(tmp_path, THREADBOT_DATABASE_URL=url)
    assert report.line("database") == f"✓ database: {url} opens, at the newest revision {head}"


async def test_on_a_fresh_installation_the_doctor_makes_nothing(tmp_path: Path) -> None:
    report = await run_doctor(
        tmp_path, unset=("THREADBOT_DATABASE_URL", "THREADBOT_WORKSPACE_ROOT")
    )
    assert report.line("database") == (
        "– database: sqlite+aiosqlite:///.threadbot/threadbot.db: no database there yet; "
        "`threadbot db upgrade` (or the first `threadbot run`) makes it"
    )
    assert report.line("workspace") == (
        f"✓ workspace: {tmp_path / '.threadbot' / 'workspaces'} does not exist yet; it can be "
        "made, and written to"
    )
    assert os.listdir(tmp_path) == []  # both tried .threadbot/, and removed it again


async def test_a_workspace_root_that_cannot_be_a_folder_is_reported(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("a file where a folder should be")
    report = await run_doctor(
        tmp_path, THREADBOT_WORKSPACE_ROOT=str(tmp_path / "notes.txt" / "workspaces")
    )
    assert report.code == 1
    assert report.line("workspace") == (
        f"✗ workspace: {tmp_path / 'notes.txt' / 'workspaces'}: {tmp_path / 'notes.txt'} "
        "is not a folder"
    )

    (tmp_path / "workspaces").mkdir()
    report = await run_doctor(tmp_path)
    workspaces = tmp_path / "workspaces"
    assert report.line("workspace") == f"✓ workspace: {workspaces} exists and is writable"
    assert list((tmp_path / "workspaces").iterdir()) == []


# --- credentials ------------------------------------------------------------------------


async def test_slack_credentials_are_checked_with_auth_test(tmp_path: Path) -> None:
    async with FakeSlackApi() as api:
        report = await run_doctor(
            tmp_path,
            SLACK_BOT_TOKEN=SLACK_TOKEN,
            SLACK_APP_TOKEN=APP_TOKEN,
            SLACK_API_URL=api.base_url,
        )

    assert report.line("slack") == (
        f"✓ slack: the bot token works (auth.test): workspace Fake Workspace ({TEAM_ID}), "
        f"bot user threadbot ({SLACK_BOT_USER})"
    )
    assert report.line("slack events") == (
        "✓ slack events: Socket Mode: SLACK_APP_TOKEN is an app-level token (xapp-)"
    )
    assert [(call.method, call.token) for call in api.calls] == [("auth.test", SLACK_TOKEN)]
    assert not report.shows(SLACK_TOKEN) and not report.shows(APP_TOKEN)


async def test_a_refused_slack_token_is_reported_without_showing_it(tmp_path: Path) -> None:
    not_an_app_token = "xoxb-2222222222-pasted-into-the-wrong-variable"
    async with FakeSlackApi() as api:
        api.fail("auth.test", error="invalid_auth")  # what Slack answers a revoked token
        report = await run_doctor(
            tmp_path,
            SLACK_BOT_TOKEN=SLACK_TOKEN,
            SLACK_APP_TOKEN=not_an_app_token,
            SLACK_API_URL=api.base_url,
        )

    assert report.code == 1
    assert report.line("slack") == (
        f"✗ slack: auth.test at {api.base_url} refused the bot token (invalid_auth): copy the "
        "Bot User OAuth Token (xoxb-) from OAuth & Permissions into SLACK_BOT_TOKEN"
    )
    assert report.line("slack events").startswith(
        "✗ slack events: SLACK_APP_TOKEN does not start with xapp-"
    )
    assert not report.shows(SLACK_TOKEN) and not report.shows(not_an_app_token)
    assert not report.shows("xoxb-2222")


async def test_discord_credentials_are_checked_with_get_current_user(tmp_path: Path) -> None:
    async with FakeDiscord(token=DISCORD_TOKEN) as fake:
        report = await run_doctor(
            tmp_path, DISCORD_TOKEN=DISCORD_TOKEN, DISCORD_API_URL=fake.api_url
        )

    assert report.line("discord") == (
        f"✓ discord: the bot token works (GET /users/@me): bot user {BOT_USERNAME} ({BOT_USER_ID})"
    )
    [call] = fake.calls
    assert (call.method, call.path, call.status) == ("GET", "/users/@me", 200)
    assert call.headers["Authorization"] == f"Bot {DISCORD_TOKEN}"
    assert call.headers["User-Agent"].startswith("DiscordBot (https://github.com/Rapptz/")
    assert not report.shows(DISCORD_TOKEN)


async def test_a_refused_discord_token_is_reported_without_showing_it(tmp_path: Path) -> None:
    wrong = "MTE5ODkzMDA1NDM0ODkzMTA3NA.wrong.an-old-token-reset-since"
    async with FakeDiscord(token=DISCORD_TOKEN) as fake:
        report = await run_doctor(tmp_path, DISCORD_TOKEN=wrong, DISCORD_API_URL=fake.api_url)

    assert report.code == 1
    assert report.line("discord") == (
        f"✗ discord: GET /users/@me at {fake.api_url} refused the bot token (401 "
        "Unauthorized): copy it from the developer portal (Bot -> Reset Token) into "
        "DISCORD_TOKEN"
    )
    assert not report.shows(wrong) and not report.shows("an-old-token")


async def test_the_model_key_is_checked_with_a_models_list(tmp_path: Path) -> None:
    async with FakeAnthropicServer(api_key=API_KEY) as server:
        report = await run_doctor(
            tmp_path, ANTHROPIC_API_KEY=API_KEY, ANTHROPIC_BASE_URL=server.base_url
        )

    assert report.line("model API") == (
        f"✓ model API: the key works (GET /v1/models at {server.base_url}); model claude-opus-5-5"
    )
    [listed] = server.model_lists
    assert (listed.body, listed.api_key) == ({"limit": "1"}, API_KEY)
    assert server.requests == []  # no message was asked for
    assert not report.shows(API_KEY)


async def test_a_refused_model_key_is_reported_without_showing_it(tmp_path: Path) -> None:
    wrong = "sk-ant-api03-revoked-key-of-last-year"
    async with FakeAnthropicServer(api_key=API_KEY) as server:
        report = await run_doctor(
            tmp_path, ANTHROPIC_API_KEY=wrong, ANTHROPIC_BASE_URL=server.base_url
        )

    assert report.code == 1
    assert report.line("model API") == (
        f"✗ model API: GET /v1/models at {server.base_url} refused the key (401 "
        "authentication_error invalid x-api-key): check ANTHROPIC_API_KEY"
    )
    assert len(server.model_lists) == 1  # a 401 is not retried
    assert not report.shows(wrong) and not report.shows("revoked-key")
