"""Choosing how the agent's commands are confined, at start.

threadbot probes the real sandbox (:func:`core.tools.sandbox.probe`: bubblewrap's
namespaces, its ``/proc``, the network unshare, the bot's environment unreadable
from inside). When it works, ``run_command`` runs in it. When it does not (no
bubblewrap, or a container whose seccomp profile or masked ``/proc`` forbids
user namespaces), threadbot says so at start and falls back:

- the tool policy asks a person before every command
  (:attr:`core.policy.policy.ToolPolicy.every_command_asks`);
- running as root, commands run as ``nobody`` (uid and gid 65534) through
  ``setpriv`` (util-linux), which cannot read the bot's ``/proc/<pid>/environ``;
- otherwise the bot marks itself not dumpable (``prctl(PR_SET_DUMPABLE, 0)``,
  prctl(2)): a process of the same user can no longer read its
  ``/proc/<pid>/environ``. Secrets are best read from files then
  (``THREADBOT_*_FILE``).

The host's ``/proc`` is never bound into anything as a fallback.

Each command also gets a cgroup of its own that caps its memory and processes
together (:mod:`core.tools.cgroups`: cgroup v2 where the bot may create one, else
the v1 memory and pids hierarchies). Where neither can be had, the bot says so at
start and every command asks a person first, as without a sandbox.

The folder of every conversation's workspace is reachable by the bot alone (mode
0700, :func:`core.tools.file_modes.close_root`); where a root bot without a sandbox
runs commands as ``nobody``, that user's group may pass through it (mode 0710), or
no command could reach its workspace.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import os
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from core.tools.cgroups import ROOT, CommandGroups, find
from core.tools.command import RunCommand
from core.tools.file_modes import close_root
from core.tools.sandbox import DEFAULT_ENV, Probe, Sandbox, probe

log = logging.getLogger(__name__)

NOBODY = (65534, 65534)
"""The uid and gid root's fallback runs commands as."""
PR_SET_DUMPABLE = 4
"""prctl(2) option: whether the process may be dumped, and its /proc files read by its user."""


@dataclass(frozen=True)
class Confinement:
    """How commands run: the ``run_command`` tool, whether every command asks first, and,
    when the sandbox does not work, why (``problem``; None when it works), and when
    commands cannot be capped, why (``caps_problem``; None when each gets a cgroup)."""

    run_command: RunCommand
    every_command_asks: bool
    problem: str | None = None
    caps_problem: str | None = None

    @property
    def workspace_group(self) -> int | None:
        """The gid that must pass through the workspace root: the user commands run as,
        without a sandbox (None: the bot's own, or a sandbox's, need nothing)."""
        run_as = self.run_command.run_as if self.run_command.sandbox is None else None
        return run_as[1] if run_as is not None else None


def confine(
    bwrap: str, env: Mapping[str, str] | None = None, cgroup_root: Path = ROOT
) -> Confinement:
    """Probe the sandbox of ``bwrap`` (a path, or a name looked up on ``PATH``) and where
    commands get their cgroups (under ``cgroup_root``); fall back as the module
    docstring says when either does not work. Each is probed once per process
    (:func:`probed`, :func:`command_groups`). ``env``: variables a command sees besides
    the sandbox's own ``PATH``, ``LANG`` and ``HOME`` (the settings' ``command_env``)."""
    sandbox, result = probed(bwrap)
    found = command_groups(cgroup_root)
    groups = found if isinstance(found, CommandGroups) else None
    caps_problem = found if isinstance(found, str) else None
    if groups is not None:
        groups.sweep()  # empty groups a bot that died left behind
    if sandbox is not None and result.ok:
        if env:
            sandbox = Sandbox(
                sandbox.bwrap,
                network_helper=sandbox.network_helper,
                env={**DEFAULT_ENV, **env},
            )
        return Confinement(
            run_command=RunCommand(sandbox=sandbox, groups=groups),
            every_command_asks=groups is None,
            caps_problem=caps_problem,
        )
    problem = "; ".join(result.problems)
    if os.geteuid() == 0:
        run_command = RunCommand(run_as=NOBODY, groups=groups)
    else:
        _not_dumpable()
        run_command = RunCommand(groups=groups)
    return Confinement(
        run_command=run_command,
        every_command_asks=True,
        problem=problem,
        caps_problem=caps_problem,
    )


@functools.cache
def command_groups(cgroup_root: Path = ROOT) -> CommandGroups | str:
    """Where commands get their cgroups under ``cgroup_root``, or why nowhere (once per
    root and process: :func:`core.tools.cgroups.find`)."""
    return find(cgroup_root)


def close_workspaces(root: Path, confinement: Confinement) -> None:
    """Close the workspace root (see the module docstring); logged when it cannot be."""
    try:
        close_root(root, confinement.workspace_group)
    except OSError as exc:
        log.warning("cannot make the workspace root reachable by the bot alone: %s", exc.strerror)


@functools.cache
def probed(bwrap: str) -> tuple[Sandbox | None, Probe]:
    """The sandbox of ``bwrap`` and what probing it found (once per binary and process)."""
    found = shutil.which(bwrap)
    if found is None:
        return None, Probe(ok=False, problems=(f"bubblewrap ({bwrap}) is not installed",))
    sandbox = Sandbox(found, network_helper=shutil.which("slirp4netns"))
    with tempfile.TemporaryDirectory(prefix="threadbot-probe-") as scratch:
        return sandbox, probe(sandbox, Path(scratch))


def caps_said(problem: str) -> str:
    """What the bot says at start when commands cannot get a cgroup of their own."""
    return (
        f"threadbot: commands cannot be capped here ({problem}): a command could use all "
        "the memory and processes of the host, so every command asks a person first. Run "
        "the bot as root, or give it a cgroup v2 group with the memory and pids "
        "controllers (see the README's Sandbox section)."
    )


def fallback_said(problem: str) -> str:
    """What the bot says at start when the sandbox does not work."""
    who = "as nobody" if os.geteuid() == 0 else "as this user, the bot not dumpable"
    return (
        f"threadbot: the command sandbox does not work here ({problem}): commands run "
        f"{who}, and every command asks a person first. Install bubblewrap "
        "(apt install bubblewrap slirp4netns); in a container, allow user namespaces "
        "(see the README's Sandbox section)."
    )


def _not_dumpable() -> None:
    """``prctl(PR_SET_DUMPABLE, 0)`` on this process; logged when it cannot be set."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl failed")
    except (OSError, AttributeError) as exc:
        log.warning("could not mark the bot not dumpable: %s", exc)
