"""The agent's commands cannot reach the bot, the network or each other (issue 14).

Commands run through the real ``run_command`` in the real bubblewrap sandbox the
bot probes at start (:func:`bot.sandboxing.confine`), as an attacker's command
would: each attempt to read the bot's tokens, its database or settings, a file
outside the workspace, to write outside it, to reach 127.0.0.1, ``::1`` or a Unix
socket of the host must fail, and nothing it starts may outlive it. Where
bubblewrap cannot run these tests skip with the reason; under ``CI=true`` that
is a failure.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.app import build
from bot.sandboxing import NOBODY, confine
from bot.settings import Settings
from core.models.scripted import ScriptedCall, ScriptedModel, ScriptedTurn
from core.policy.policy import Permission, Rule, RuleLayer, ToolPolicy
from core.secrets import Redactor
from core.tools.base import ToolContext
from core.tools.command import RunCommand
from core.vocabulary.errors import ToolError
from core.vocabulary.tool_records import ToolState
from tests.harness import Chat
from tests.process_harness import live_with, sleep_marker

TOKEN = "xoxb-7777777777-sandbox-test-token"


@pytest.fixture
def sandboxed(working_bwrap: None) -> RunCommand:
    """``run_command`` in the sandbox the bot would use; skipped (failed under CI) without."""
    confinement = confine("bwrap")
    assert confinement.problem is None and not confinement.every_command_asks
    return confinement.run_command


@pytest.fixture
def secrets_in_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bot's tokens, in the bot's environment as an operator would set them (what a
    command would inherit if the environment were passed on)."""
    for name in ("SLACK_BOT_TOKEN", "DISCORD_TOKEN", "ANTHROPIC_API_KEY"):
        monkeypatch.setenv(name, TOKEN)


@pytest.fixture
def bot_with_tokens() -> Iterator[int]:
    """A process of the bot's user started with the tokens in its environment and on its
    command line, as the bot is: ``monkeypatch.setenv`` changes this process's memory,
    never its ``/proc/<pid>/environ``, which shows the environment a process started
    with (proc(5)). Its pid; the fixture checks first that the host can read the token
    there, so a sandbox that let a command read the host's ``/proc`` would show it."""
    env = {"PATH": os.defpath, "SLACK_BOT_TOKEN": TOKEN, "ANTHROPIC_API_KEY": TOKEN}
    stand_in = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; time.sleep(600)", TOKEN],
        env=env,
        stdin=subprocess.DEVNULL,
    )
    proc = Path(f"/proc/{stand_in.pid}")
    try:
        deadline = time.monotonic() + 30  # until the new program has its environment
        while TOKEN.encode() not in (proc / "environ").read_bytes():
            assert time.monotonic() < deadline, "the stand-in never showed its environment"
            time.sleep(0.01)
        assert TOKEN.encode() in (proc / "cmdline").read_bytes()
        yield stand_in.pid
    finally:
        stand_in.kill()
        stand_in.wait()


async def run(tool: RunCommand, command: str, workspace: Path, **ctx: Any) -> str:
    await asyncio.to_thread(workspace.mkdir, parents=True, exist_ok=True)
    out = await tool.run({"command": command}, ToolContext(workspace=workspace, **ctx))
    return out.content


@contextlib.contextmanager
def listening(family: socket.AddressFamily, host: str) -> Iterator[int]:
    """A TCP server on ``host`` that answers ``hello`` to whoever connects; its port."""
    server = socket.socket(family, socket.SOCK_STREAM)
    server.bind((host, 0))
    server.listen()
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            with contextlib.suppress(OSError):
                conn, _ = server.accept()
                conn.sendall(b"hello")
                conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        stop.set()
        thread.join()
        server.close()


def connect(host: str, port: int) -> str:
    """A plain ``python3 -c`` client: prints what the server said, or the error."""
    family = "AF_INET6" if ":" in host else "AF_INET"
    return (
        f"python3 -c 'import socket; s = socket.socket(socket.{family}); s.settimeout(3); "
        f's.connect(("{host}", {port})); print("GOT", s.recv(5).decode())\' 2>&1 | tail -1'
    )


def host_address() -> str:
    """An address of this host that is not loopback (where the default route leaves)."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("192.0.2.1", 9))  # TEST-NET-1: no packet is sent for UDP connect
        return str(probe.getsockname()[0])
    finally:
        probe.close()


# --- what a command cannot read or write -------------------------------------------------


async def test_no_token_is_readable_from_proc(
    sandboxed: RunCommand, secrets_in_env: None, bot_with_tokens: int, tmp_path: Path
) -> None:
    out = await run(
        sandboxed,
        "cat /proc/1/environ /proc/*/environ /proc/*/cmdline 2>/dev/null | tr '\\0' '\\n'; "
        "env; ls /proc | grep -c '^[0-9]'",
        tmp_path / "ws",
    )
    assert TOKEN not in out
    assert "xoxb-" not in out
    assert "PATH=" in out  # it did read its own environment
    processes = int(out.strip().splitlines()[-1])
    assert processes <= 6  # its own PID namespace: bwrap's init, the shell and its pipes


async def test_the_database_settings_and_other_files_are_out_of_reach(
    sandboxed: RunCommand, tmp_path: Path
) -> None:
    database = tmp_path / "threadbot.db"
    database.write_text("the database")
    settings = tmp_path / "threadbot.toml"
    settings.write_text('anthropic_api_key = "sk-ant-secret"')
    beside = tmp_path / "other-conversation" / "notes.md"
    beside.parent.mkdir()
    beside.write_text("another conversation's notes")
    workspace = tmp_path / "workspaces" / "c1"

    out = await run(
        sandboxed,
        f"cat {database} {settings} {beside} ../../threadbot.toml /etc/shadow /etc/hostname; "
        "ls /root /home /run 2>&1; cat /etc/passwd",
        workspace,
    )
    for secret in ("the database", "sk-ant-secret", "another conversation", "root:"):
        assert secret not in out
    assert "threadbot:x:" in out and "root:" not in out  # the synthetic passwd: one user

    out = await run(
        sandboxed,
        f"echo x > {tmp_path}/planted; echo x > /usr/planted; echo x > ../planted; "
        "echo ok > mine.txt; cat mine.txt",
        workspace,
    )
    assert not (tmp_path / "planted").exists()
    assert not (tmp_path / "workspaces" / "planted").exists()
    assert (workspace / "mine.txt").read_text() == "ok\n"
    assert out.rstrip().endswith("ok")


async def test_no_connection_reaches_the_host_s_loopback_or_its_unix_sockets(
    sandboxed: RunCommand, tmp_path: Path
) -> None:
    unix_path = tmp_path / "service.sock"
    unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    unix.bind(str(unix_path))
    unix.listen()
    try:
        with listening(socket.AF_INET, "127.0.0.1") as v4, listening(socket.AF_INET6, "::1") as v6:
            for host, port in (("127.0.0.1", v4), ("::1", v6)):
                out = await run(sandboxed, connect(host, port), tmp_path / "ws")
                assert "GOT" not in out, out
            client = (
                "python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); "
                f's.connect("{unix_path}"); print("GOT")\' 2>&1 | tail -1'
            )
            assert "GOT" not in await run(sandboxed, client, tmp_path / "ws")
    finally:
        unix.close()


# --- nothing outlives the command ----------------------------------------------------------


async def gone(marker: str, seconds: float = 60.0) -> bool:
    """Whether every process with ``marker`` is gone within ``seconds`` (polled)."""
    deadline = time.monotonic() + seconds
    while live_with(marker):
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


ESCAPES = "setsid sleep {m}1 &\n(sleep {m}2 &)\nnohup sleep {m}3 >/dev/null 2>&1 &\n"
"""A ``setsid`` child, a double fork and a nohup'd one, each a ``sleep`` named by its
duration (``{m}`` + a digit makes each one findable in ``/proc``)."""


async def test_setsid_and_double_forked_children_die_when_the_command_ends(
    sandboxed: RunCommand, tmp_path: Path
) -> None:
    marker = sleep_marker(3001)
    out = await run(sandboxed, ESCAPES.format(m=marker) + "echo started", tmp_path / "ws")
    assert "started" in out
    assert await gone(marker)


async def test_they_die_at_a_timeout_too(sandboxed: RunCommand, tmp_path: Path) -> None:
    marker = sleep_marker(3002)
    command = ESCAPES.format(m=marker) + "sleep 600"
    with pytest.raises(ToolError, match="timed out"):
        await run(sandboxed, command, tmp_path / "ws", command_timeout=1.0)
    assert await gone(marker)


async def test_they_die_when_the_call_is_stopped(sandboxed: RunCommand, tmp_path: Path) -> None:
    marker = sleep_marker(3003)
    task = asyncio.create_task(
        run(sandboxed, ESCAPES.format(m=marker) + "sleep 600", tmp_path / "ws")
    )
    deadline = time.monotonic() + 60
    while len(live_with(marker)) < 3:  # until all three escaped children run
        assert not task.done() and time.monotonic() < deadline, "the children never ran"
        await asyncio.sleep(0.05)
    task.cancel()  # what /stop does to the run's task
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await gone(marker)


# --- the sandbox's own names ----------------------------------------------------------------

LOCAL_ROUND_TRIP = """\
import socket
import subprocess
import sys
server = socket.create_server(("127.0.0.1", 0))
client = socket.create_connection(("localhost", server.getsockname()[1]), timeout=5)
server.accept()[0].sendall(b"hello")
print("GOT", client.recv(5).decode())
"""


async def test_localhost_and_the_sandbox_s_own_name_resolve_inside(
    sandboxed: RunCommand, tmp_path: Path
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "round_trip.py").write_text(LOCAL_ROUND_TRIP)

    out = await run(sandboxed, "getent hosts threadbot; python3 round_trip.py", workspace)

    assert out.splitlines()[1].split() == ["127.0.0.1", "localhost", "threadbot"]
    assert out.splitlines()[2] == "GOT hello"  # a project's tests reach localhost


# --- a granted network ----------------------------------------------------------------------


async def test_a_granted_network_reaches_the_host_but_never_its_loopback(
    sandboxed: RunCommand, tmp_path: Path
) -> None:
    if sandboxed.sandbox is None or sandboxed.sandbox.network_helper is None:
        pytest.fail("slirp4netns is not installed (make test installs it)")
    outside = host_address()
    with (
        listening(socket.AF_INET, outside) as public,
        listening(socket.AF_INET, "127.0.0.1") as v4,
        listening(socket.AF_INET6, "::1") as v6,
    ):
        reached = await run(sandboxed, connect(outside, public), tmp_path / "ws", network=True)
        assert "GOT hello" in reached
        for host, port in (("127.0.0.1", v4), ("::1", v6)):
            out = await run(sandboxed, connect(host, port), tmp_path / "ws", network=True)
            assert "GOT" not in out, out
        without = await run(sandboxed, connect(outside, public), tmp_path / "ws")
        assert "GOT" not in without  # no grant, no network


# --- secrets in a command's output -----------------------------------------------------------


async def test_a_token_split_across_two_chunks_of_output_is_redacted(
    sandboxed: RunCommand, tmp_path: Path
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    half = len(TOKEN) // 2
    (workspace / "a").write_text(TOKEN[:half])
    (workspace / "b").write_text(TOKEN[half:])
    redactor = Redactor({"SLACK_BOT_TOKEN": TOKEN})
    out = await run(
        sandboxed,
        "cat a; sleep 0.2; cat b; echo; cat a b",  # two reads apart, then one
        workspace,
        redactor=redactor,
        output_limit=200,
    )
    assert TOKEN not in out and TOKEN[:half] not in out
    assert out.count("[redacted SLACK_BOT_TOKEN]") == 2


# --- without a sandbox ----------------------------------------------------------------------


async def test_when_the_probe_fails_every_command_asks_first(tmp_path: Path) -> None:
    confinement = confine(str(tmp_path / "no-such-bwrap"))
    assert confinement.every_command_asks and confinement.problem
    assert "not installed" in confinement.problem
    if os.geteuid() == 0:
        assert confinement.run_command.run_as == NOBODY  # root's commands run as nobody
    policy = ToolPolicy(every_command_asks=True).with_layers(
        [RuleLayer(name="slack channel C1", rules=(Rule(tool="*", decision="allow"),))]
    )
    for command in ("ls", "make test", "python3 -c 'print(1)'"):
        verdict = policy.check(
            tool_name="run_command",
            read_only=False,
            arguments={"command": command},
            plan_approved=True,
        )
        assert verdict.decision is Permission.ASK, command
        assert "every command asks first" in verdict.reason
    denied = ToolPolicy(
        every_command_asks=True,
        rules=(Rule(tool="run_command", command_prefix="rm", decision="deny"),),
    ).check(
        tool_name="run_command", read_only=False, arguments={"command": "rm x"}, plan_approved=True
    )
    assert denied.decision is Permission.DENY  # a deny still wins


async def test_a_bot_without_a_working_sandbox_says_so_and_asks_before_a_command(
    settings, caplog: pytest.LogCaptureFixture
) -> None:
    settings.bwrap = "/nonexistent/bwrap"
    model = ScriptedModel(
        [
            ScriptedTurn(calls=[ScriptedCall("propose_plan", {"steps": ["list the files"]})]),
            ScriptedTurn(calls=[ScriptedCall("run_command", {"command": "ls"})]),
        ]
    )
    with caplog.at_level(logging.WARNING):
        app = await build(settings, model=model)
    assert "the command sandbox does not work here" in caplog.text
    async with app:
        chat = Chat(app)
        await chat.mention("list the files")
        await chat.react(chat.bot_message("📋 Plan (v1)"))
        await app.hub.settled()
        snap = await chat.snapshot()
        (record,) = [r for r in snap.tool_calls.values() if r.name == "run_command"]
        assert record.state is ToolState.PENDING_APPROVAL
        assert str(snap.status) == "waiting(tool_approval)"
        chat.bot_message("May I run this?")  # the approval message is there ...
        assert "`ls` — commands run without a sandbox here: every command asks first" in (
            chat.out.getvalue()  # ... and says why
        )


async def test_settings_add_to_a_command_s_environment_but_never_a_secret(
    sandboxed: RunCommand, settings, tmp_path: Path
) -> None:
    settings.command_env = {"PIP_INDEX_URL": "https://pypi.example/simple"}
    confinement = confine("bwrap", settings.command_env)
    out = await run(confinement.run_command, "env | sort", tmp_path / "ws")
    assert "PIP_INDEX_URL=https://pypi.example/simple" in out
    assert "HOME=/home/threadbot" in out
    with pytest.raises(ValueError, match="would hand a token or key"):
        Settings.model_validate({"discord_token": TOKEN, "command_env": {"MY_TOKEN": TOKEN}})


async def test_a_command_is_never_root_on_the_host_and_cannot_write_proc_sys(
    sandboxed: RunCommand, tmp_path: Path
) -> None:
    core_pattern = Path("/proc/sys/kernel/core_pattern")
    before = await asyncio.to_thread(core_pattern.read_text)
    out = await run(
        sandboxed,
        "id -u; echo '|/tmp/x' > /proc/sys/kernel/core_pattern; "
        "cp /usr/bin/id rid && chmod 4755 rid; echo done",
        tmp_path / "ws",
    )
    assert out.splitlines()[1] != "0"  # not root, inside or (mapped) outside
    assert await asyncio.to_thread(core_pattern.read_text) == before
    planted = await asyncio.to_thread((tmp_path / "ws" / "rid").stat)
    assert planted.st_uid != 0  # a setuid file it plants is not root's
