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

from core.tools.command import RunCommand
from core.tools.sandbox import DEFAULT_ENV, Probe, Sandbox, probe

log = logging.getLogger(__name__)

NOBODY = (65534, 65534)
"""The uid and gid root's fallback runs commands as."""
PR_SET_DUMPABLE = 4
"""prctl(2) option: whether the process may be dumped, and its /proc files read by its user."""


@dataclass(frozen=True)
class Confinement:
    """How commands run: the ``run_command`` tool, whether every command asks first, and,
    when the sandbox does not work, why (None when it works)."""

    run_command: RunCommand
    every_command_asks: bool
    problem: str | None = None


def confine(bwrap: str, env: Mapping[str, str] | None = None) -> Confinement:
    """Probe the sandbox of ``bwrap`` (a path, or a name looked up on ``PATH``); fall back
    as the module docstring says when it does not work. The probe runs once per
    binary in a process (:func:`probed`). ``env``: variables a command sees besides
    the sandbox's own ``PATH``, ``LANG`` and ``HOME`` (the settings' ``command_env``)."""
    sandbox, result = probed(bwrap)
    if sandbox is not None and result.ok:
        if env:
            sandbox = Sandbox(
                sandbox.bwrap,
                network_helper=sandbox.network_helper,
                env={**DEFAULT_ENV, **env},
            )
        return Confinement(run_command=RunCommand(sandbox=sandbox), every_command_asks=False)
    problem = "; ".join(result.problems)
    if os.geteuid() == 0:
        return Confinement(
            run_command=RunCommand(run_as=NOBODY), every_command_asks=True, problem=problem
        )
    _not_dumpable()
    return Confinement(run_command=RunCommand(), every_command_asks=True, problem=problem)


@functools.cache
def probed(bwrap: str) -> tuple[Sandbox | None, Probe]:
    """The sandbox of ``bwrap`` and what probing it found (once per binary and process)."""
    found = shutil.which(bwrap)
    if found is None:
        return None, Probe(ok=False, problems=(f"bubblewrap ({bwrap}) is not installed",))
    sandbox = Sandbox(found, network_helper=shutil.which("slirp4netns"))
    with tempfile.TemporaryDirectory(prefix="threadbot-probe-") as scratch:
        return sandbox, probe(sandbox, Path(scratch))


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
