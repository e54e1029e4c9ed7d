"""``threadbot doctor``'s sandbox checks: what the command sandbox confines, here or on a
Ray node (:mod:`bot.doctor` runs them and prints their lines).

bubblewrap and the bot's own probe (:func:`bot.sandboxing.probed`: namespaces, its
``/proc``, the network unshare, a canary of the bot's user that must not be readable
from inside); from inside, a ``python3`` socket connect to listeners this process opens
on 127.0.0.1 and ``::1`` and to 192.0.2.1:80 (TEST-NET-1, RFC 5737: no real host), all
of which must fail, the public one with "Network is unreachable" (no route at all: a
timeout would mean packets left the sandbox); slirp4netns (needed only when a policy
rule grants a network); the command caps (:func:`bot.sandboxing.command_groups`).
Blocking: the caller runs them in a thread (docs/architecture.md, "Tools and the
sandbox").
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bot.doctor_calls import Check, failed, ok, skipped
from bot.sandboxing import command_groups, probed
from bot.settings import Settings
from core.policy.policy import ToolPolicy
from core.tools.sandbox import LEAK_PROBLEM, Probe, Sandbox

PUBLIC_TARGET = "192.0.2.1:80"
"""An address outside the host that no connection may reach from the sandbox
(TEST-NET-1, RFC 5737: reserved for documentation, so no real host is ever tried)."""
CONNECT_TIMEOUT = 2.0
"""Seconds each connection attempt from inside the sandbox may take."""
INSTALL = "apt install bubblewrap slirp4netns"
CONTAINER = (
    "in a container, allow user namespaces and bubblewrap's own /proc: docker run "
    "--security-opt seccomp=unconfined --security-opt systempaths=unconfined (and "
    "--security-opt apparmor=unconfined where AppArmor runs); see the README's Sandbox "
    "and secrets"
)

_CONNECT_SCRIPT = """\
import errno, socket, sys
for target in sys.argv[2:]:
    host, _, port = target.rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=float(sys.argv[1])).close()
        print("REACHED", target)
    except OSError as exc:
        code = errno.errorcode.get(exc.errno or 0) or type(exc).__name__
        print("FAILED", target, code, exc.strerror or str(exc) or type(exc).__name__)
"""
"""Run inside the sandbox as ``python3 -c SCRIPT TIMEOUT TARGET...``: one line per target,
``REACHED host:port`` or ``FAILED host:port ERRNO_NAME reason``."""


def sandbox_checks(settings: Settings) -> list[Check]:
    """bubblewrap, the bot's environment, connections out, slirp4netns (blocking)."""
    sandbox, found = probed(settings.bwrap)
    checks = [_bwrap_check(settings.bwrap, sandbox, found)]
    if sandbox is None or not found.ran:
        why = "the sandbox does not run"
        checks += [skipped("sandbox secrets", why), skipped("sandbox network", why)]
    else:
        if found.leaked:
            checks.append(
                failed(
                    "sandbox secrets",
                    "the bot's environment CAN be read from inside the sandbox (a canary in a "
                    "process of the bot's user was found in /proc there): its tokens are exposed",
                )
            )
        else:
            checks.append(
                ok(
                    "sandbox secrets",
                    "the bot's environment cannot be read from inside the sandbox (no "
                    "/proc/*/environ or cmdline there held a canary)",
                )
            )
        checks.append(connect_check(sandbox))
    checks.append(caps_check(settings))
    checks.append(_slirp_check(settings))
    return checks


def caps_check(settings: Settings) -> Check:
    """Where each command gets its cgroup, with the bot's caps; or why nowhere (blocking)."""
    found = command_groups(settings.cgroup_root)
    if isinstance(found, str):
        return failed(
            "command caps",
            f"{found}: a command's memory and processes cannot be capped, so every command "
            "asks a person first; run the bot as root (cgroup v1), or in a cgroup v2 group "
            "with the memory and pids controllers (systemd: Delegate=memory pids and "
            "DelegateSubgroup=)",
        )
    memory = settings.command_memory_mb
    processes = settings.command_processes
    return ok(
        "command caps",
        f"each command runs in {found.said()}: its processes together "
        + (f"may use {memory} MB" if memory is not None else "have no memory cap")
        + (f" and run {processes} at once" if processes is not None else ", no process cap"),
    )


def _bwrap_check(bwrap: str, sandbox: Sandbox | None, found: Probe) -> Check:
    if sandbox is None:
        return failed(
            "sandbox",
            f"bubblewrap ({bwrap}) is not installed: {INSTALL} (THREADBOT_BWRAP names "
            f"another binary); {_fallback()}",
        )
    said = "; ".join(found.problems)
    if not found.ran:
        return failed(
            "sandbox",
            f"bubblewrap {sandbox.bwrap} cannot run here ({said}): {CONTAINER}; {_fallback()}",
        )
    others = "; ".join(p for p in found.problems if p != LEAK_PROBLEM)  # its own line
    if others:
        return failed(
            "sandbox",
            f"bubblewrap {sandbox.bwrap} runs commands but does not confine them: {others}; "
            f"check THREADBOT_BWRAP names bubblewrap itself; {_fallback()}",
        )
    return ok(
        "sandbox",
        f"bubblewrap {sandbox.bwrap} confines commands (own user, PID, IPC and network "
        "namespaces, its own /proc, no host /etc)",
    )


def _fallback() -> str:
    """What the bot does meanwhile (:func:`bot.sandboxing.confine`)."""
    who = "as nobody" if os.geteuid() == 0 else "as this user, the bot not dumpable"
    return f"until then every command asks a person first and runs {who}"


def connect_check(sandbox: Sandbox) -> Check:
    """From inside ``sandbox``, connect to listeners of this process on 127.0.0.1 and
    ``::1`` and to :data:`PUBLIC_TARGET`: ✓ when every attempt fails (the public one
    with ``ENETUNREACH``), ✗ naming what was reached (blocking; at most
    :data:`CONNECT_TIMEOUT` per target, at once where the network is unshared)."""
    name = "sandbox network"
    if shutil.which("python3", path=sandbox.env.get("PATH", "")) is None:
        return skipped(name, "no python3 inside the sandbox to try connecting with")
    with _listeners() as local, tempfile.TemporaryDirectory(prefix="threadbot-doctor-") as scratch:
        targets = [*local, PUBLIC_TARGET]
        argv = ["python3", "-c", _CONNECT_SCRIPT, str(CONNECT_TIMEOUT), *targets]
        try:
            done = sandbox.run(
                argv,
                Path(scratch),
                capture_output=True,
                text=True,
                timeout=CONNECT_TIMEOUT * len(targets) + 10,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            return failed(name, f"could not try from inside the sandbox: {exc}")
    outcomes = dict(_outcome(line) for line in done.stdout.splitlines() if line.count(" ") >= 1)
    if set(outcomes) != set(targets):
        said = (done.stderr or done.stdout).strip().splitlines()
        return failed(name, f"could not try from inside the sandbox: {said[-1] if said else '?'}")
    reached = [t for t in targets if outcomes[t][0] == "REACHED"]
    routed = outcomes[PUBLIC_TARGET][0] not in ("REACHED", "ENETUNREACH")
    shown = ", ".join(f"{t} {outcomes[t][1]}" for t in targets)
    if reached or routed:
        return failed(
            name,
            f"from inside the sandbox: {shown}: a command can reach "
            + ("the host or the network" if reached else "a network (packets left the sandbox)"),
        )
    return ok(name, f"no connection out from inside the sandbox: {shown}")


def _outcome(line: str) -> tuple[str, tuple[str, str]]:
    """``(target, (code, shown))`` of one line of :data:`_CONNECT_SCRIPT`'s output."""
    word, target, *rest = line.split(" ", 3)
    if word == "REACHED":
        return target, ("REACHED", "reached")
    code, reason = [*rest, "-", ""][:2]
    shown = {"ECONNREFUSED": "refused", "ENETUNREACH": "unreachable"}.get(code, reason or code)
    return target, (code, shown)


@contextlib.contextmanager
def _listeners() -> Iterator[list[str]]:
    """TCP listeners of this process on 127.0.0.1 and, where IPv6 is there, ``::1``
    (free ports): their ``host:port`` (``[::1]:port``), closed after."""
    opened: list[socket.socket] = []
    try:
        for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
            server = socket.socket(family, socket.SOCK_STREAM)
            try:
                server.bind((host, 0))
                server.listen()
            except OSError:
                server.close()
                continue
            opened.append(server)
        yield [
            f"[{s.getsockname()[0]}]:{s.getsockname()[1]}"
            if s.family == socket.AF_INET6
            else f"{s.getsockname()[0]}:{s.getsockname()[1]}"
            for s in opened
        ]
    finally:
        for server in opened:
            server.close()


def _slirp_check(settings: Settings) -> Check:
    found = shutil.which("slirp4netns")
    if found is not None:
        return ok("slirp4netns", f"{found}, for commands a policy rule grants a network")
    if grants_network(settings):
        return failed(
            "slirp4netns",
            "not installed, and a policy rule grants a network: those commands fail "
            "(apt install slirp4netns)",
        )
    return skipped(
        "slirp4netns",
        "not installed; no policy rule grants a network, so nothing needs it yet "
        "(apt install slirp4netns)",
    )


def grants_network(settings: Settings) -> bool:
    """Whether any policy rule (the bot's, a workspace's, a guild's or a channel's) has
    ``network = true``."""
    tables: list[dict[str, Any] | None] = [settings.policy]
    for workspaces in (settings.slack, settings.discord):
        for top in workspaces.values():
            tables += [top.policy, *(channel.policy for channel in top.channels.values())]
    rules = [rule for table in tables if table for rule in ToolPolicy.from_toml_table(table).rules]
    return any(rule.network for rule in rules)
