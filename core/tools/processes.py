"""Process groups of commands: naming one so that it can be found again, and killing it.

A command runs in a process group of its own (its shell leads it) and, where the
bot may make one, in a cgroup of its own (:mod:`core.tools.cgroups`). A crash of
the bot can leave some of it running; the run resumes later and must kill it before
it goes on, or a mutating command would keep changing the workspace under a call
the model is told has an unknown outcome. The cgroup holds every process of the
command, its leader gone or not: it is found by its random name and emptied and
removed whole. Without one, the process group is killed, and since a process group
id is reused once the group is gone, the group is named by three facts, all checked
before a kill (Linux ``/proc``, proc(5):
https://man7.org/linux/man-pages/man5/proc_pid_stat.5.html):

- the group id (the leader's pid),
- the leader's start time (field 22 of ``/proc/<pid>/stat``, clock ticks since boot),
- the boot id (``/proc/sys/kernel/random/boot_id``), so a group of an earlier boot,
  or of another host, is never taken for this one.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
from pathlib import Path

from core.tools.cgroups import ROOT, find_group
from core.vocabulary.tool_records import CommandProcess

log = logging.getLogger(__name__)

_BOOT_ID = "/proc/sys/kernel/random/boot_id"


def boot_id() -> str:
    """This boot's id (a UUID), or ``""`` where ``/proc`` does not say."""
    try:
        with open(_BOOT_ID, encoding="ascii") as f:
            return f.read().strip()
    except OSError:
        return ""


def start_time(pid: int) -> int | None:
    """When process ``pid`` started, in clock ticks since boot; None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            fields = f.read().rpartition(")")[2].split()
    except OSError:
        return None
    return int(fields[19])  # field 22 of proc(5); fields here start at field 3


def describe(pid: int, cgroup: str | None = None) -> CommandProcess | None:
    """The three facts that name the group ``pid`` leads, with the name of its ``cgroup``,
    or None if they cannot be read."""
    started = start_time(pid)
    boot = boot_id()
    if started is None or not boot:
        return None
    return CommandProcess(group=pid, started=started, boot_id=boot, cgroup=cgroup)


def signal_group(pgid: int, sig: signal.Signals) -> None:
    """Send ``sig`` to process group ``pgid``; a group already gone is fine."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def group_alive(pgid: int) -> bool:
    """True while process group ``pgid`` has a member that is not a zombie (reads /proc)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with os.scandir("/proc") as entries:
        for entry in entries:
            if not entry.name.isdigit():
                continue
            try:
                with open(os.path.join(entry.path, "stat"), encoding="utf-8") as f:
                    fields = f.read().rpartition(")")[2].split()
            except OSError:
                continue  # exited while we looked
            if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
                return True
    return False


def kill_left_behind(
    process: CommandProcess, *, patience: float = 5.0, cgroup_root: Path = ROOT
) -> bool:
    """Kill what is left of the command ``process`` names; True if something was killed.

    Nothing is killed when the boot id differs (another boot or host). Its cgroup, when
    it had one and it is still there (under ``cgroup_root``), is emptied and removed,
    its leader gone or not. Its process group is killed only while its leader lives
    and started when recorded (else the id may be another group's now). Waits up to
    ``patience`` seconds for them to be gone. Blocking: call it in a thread.
    """
    if process.boot_id != boot_id():
        return False
    deadline = time.monotonic() + patience
    killed = False
    group = find_group(process.cgroup, cgroup_root) if process.cgroup else None
    if group is not None:
        log.warning("killing the command cgroup %s left running by an earlier process", group.name)
        killed = True
        group.kill()
        while group.members() and time.monotonic() < deadline:
            group.kill()  # again: it may have forked meanwhile
            time.sleep(0.01)
        group.remove()
    if start_time(process.group) != process.started:
        return killed
    log.warning("killing process group %s left running by an earlier process", process.group)
    signal_group(process.group, signal.SIGKILL)
    while group_alive(process.group) and time.monotonic() < deadline:
        signal_group(process.group, signal.SIGKILL)  # again: it may have forked meanwhile
        time.sleep(0.01)
    return True
