"""A cgroup of its own for each command: its memory and processes capped together.

A per-process limit (``RLIMIT_DATA``) lets eight processes of 90 MB reach 720 MB under
a 100 MB cap, and nothing per process caps how many a command forks. A cgroup counts
every process a command starts, whatever it forks, in whatever namespace
(cgroups(7): https://man7.org/linux/man-pages/man7/cgroups.7.html). The mechanism is
chosen at start (:func:`find`), in this order:

- **cgroup v2** (https://docs.kernel.org/admin-guide/cgroup-v2.html): a group the bot
  may create children in, with the ``memory`` and ``pids`` controllers enabled for
  them: the bot's own cgroup (where it is the namespace's root), else its parent (a
  systemd unit with ``Delegate=memory pids`` and ``DelegateSubgroup=``). The limits
  are ``memory.max`` (``memory.swap.max`` 0) and ``pids.max``; a hit cap shows in
  ``memory.events`` (``oom_kill``) and ``pids.events`` (``max``).
- **cgroup v1**: the ``memory`` and ``pids`` hierarchies, writable (a root bot), with
  the groups under the bot's own group in each
  (https://docs.kernel.org/admin-guide/cgroup-v1/memory.html, ``pids.html``): the
  limits are ``memory.limit_in_bytes`` (and ``memory.memsw.limit_in_bytes`` where swap
  is accounted) and ``pids.max``; a hit cap shows in ``memory.oom_control``
  (``oom_kill``; ``memory.failcnt`` on kernels without it) and ``pids.events``.
- **none**: :func:`find` says why, ``threadbot doctor`` shows ✗ and every command
  asks a person first.

The memory cap counts what a command's processes use together (the page cache and a
tmpfs it writes included); past it the kernel kills one of them (the OOM killer),
no allocation fails. The process cap counts threads too (``pids``). A group is named
``threadbot-<12 hex digits>``, random, so a left-over one is found again by its name
(:func:`find_group`) and never confused with another.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from core.context import now

log = logging.getLogger(__name__)

ROOT = Path("/sys/fs/cgroup")
"""Where the cgroup file systems are mounted (v2 here or at ``unified/``, v1 per controller)."""
PREFIX = "threadbot-"
"""The start of every command group's name."""
NEEDED = ("memory", "pids")
"""The controllers a command group needs."""
STALE_AFTER = 60.0
"""Seconds after which an empty command group is a left-over (:meth:`CommandGroups.sweep`)."""


@dataclass(frozen=True)
class Group:
    """One command's cgroup: ``name``, its folder in each hierarchy (v2: one; v1: the
    memory and the pids one) and the cgroup ``version`` of those folders."""

    name: str
    dirs: tuple[Path, ...]
    version: Literal[1, 2]

    @property
    def procs(self) -> tuple[Path, ...]:
        """The ``cgroup.procs`` files a process joins the group by writing its pid to."""
        return tuple(folder / "cgroup.procs" for folder in self.dirs)

    def members(self) -> set[int]:
        """Pids of the processes in the group now (as this process's PID namespace sees
        them); an empty set once it is gone."""
        found: set[int] = set()
        for path in self.procs:
            with contextlib.suppress(OSError):
                found |= {int(line) for line in path.read_text().split()}
        return found

    def kill(self) -> None:
        """SIGKILL every process in the group once (v2: ``cgroup.kill``, atomic).

        Elsewhere each pid is pinned with a pidfd and checked to be still in this
        group before the signal, so a pid reused meanwhile is never signalled. Call it
        until :meth:`members` is empty: a process may fork meanwhile.
        """
        if self.version == 2:
            with contextlib.suppress(OSError):
                (self.dirs[0] / "cgroup.kill").write_text("1")
        for pid in self.members():
            _kill_member(pid, self.name)

    def hits(self, *, memory_mb: int | None, processes: int | None) -> list[str]:
        """The caps this group hit, as a tool result says them (read from the kernel's own
        counters; call before :meth:`remove`)."""
        said = []
        if memory_mb is not None and self._oom_kills() > 0:
            said.append(f"a process was killed at its memory cap of {memory_mb} MB")
        if processes is not None and self._counter("pids.events", "max") > 0:
            said.append(f"a process could not start at its cap of {processes} processes")
        return said

    def remove(self) -> bool:
        """Remove the group's folders (once no process is left in it); True when all went."""
        gone = True
        for folder in self.dirs:
            try:
                folder.rmdir()
            except FileNotFoundError:
                pass
            except OSError as exc:
                log.warning("cannot remove the command cgroup %s: %s", self.name, exc.strerror)
                gone = False
        return gone

    def _oom_kills(self) -> int:
        if self.version == 2:
            return self._counter("memory.events", "oom_kill")
        kills = self._counter("memory.oom_control", "oom_kill", missing=-1)
        if kills >= 0:
            return kills
        return self._counter("memory.failcnt", None)  # kernels before 4.13

    def _counter(self, file: str, key: str | None, *, missing: int = 0) -> int:
        """A counter of a flat-keyed file (``key N`` lines), or a single-value file."""
        for folder in self.dirs:
            try:
                text = (folder / file).read_text()
            except OSError:
                continue
            if key is None:
                return int(text.split()[0])
            for line in text.splitlines():
                parts = line.split()
                if len(parts) == 2 and parts[0] == key:
                    return int(parts[1])
        return missing


@dataclass(frozen=True)
class CommandGroups:
    """Where command groups are made: ``parents`` (v2: one folder; v1: the memory and the
    pids one) of cgroup ``version``."""

    version: Literal[1, 2]
    parents: tuple[Path, ...]

    def said(self) -> str:
        """The mechanism in words, for ``threadbot doctor``."""
        if self.version == 2:
            return f"a cgroup v2 group of its own under {self.parents[0]}"
        return "a group of its own in the cgroup v1 memory and pids hierarchies " + (
            f"(under {self.parents[0]} and {self.parents[1]})"
        )

    def create(self, *, memory_mb: int | None, processes: int | None) -> Group:
        """A new, empty group with these caps (None: uncapped). Raises :class:`OSError`
        when it cannot be made or capped (a half-made group is removed)."""
        name = PREFIX + secrets.token_hex(6)
        group = Group(name, tuple(parent / name for parent in self.parents), self.version)
        for folder in group.dirs:
            folder.mkdir()
        try:
            self._cap(group, memory_mb, processes)
        except OSError:
            group.remove()
            raise
        return group

    def sweep(self, *, older_than: float = STALE_AFTER) -> int:
        """Remove the command groups here that are empty and were made more than
        ``older_than`` seconds ago: left by a bot that died before it removed them (a
        live command's group holds its shim from a moment after it is made). How many
        went (blocking; never raises)."""
        removed: set[str] = set()
        deadline = now().timestamp() - older_than  # the files' times are the wall clock's
        for parent in self.parents:
            with contextlib.suppress(OSError), os.scandir(parent) as entries:
                for entry in entries:
                    if not (entry.name.startswith(PREFIX) and entry.is_dir(follow_symlinks=False)):
                        continue
                    with contextlib.suppress(OSError):
                        made = entry.stat(follow_symlinks=False)
                        procs = Path(entry.path, "cgroup.procs").read_text()
                        if max(made.st_mtime, made.st_ctime) < deadline and not procs.strip():
                            os.rmdir(entry.path)
                            removed.add(entry.name)
        return len(removed)

    def _cap(self, group: Group, memory_mb: int | None, processes: int | None) -> None:
        memory, pids = (group.dirs[0], group.dirs[0]) if self.version == 2 else group.dirs
        if memory_mb is not None:
            limit = str(memory_mb * 1024 * 1024)
            if self.version == 2:
                (memory / "memory.max").write_text(limit)
                _write_if_there(memory / "memory.swap.max", "0")
            else:
                (memory / "memory.limit_in_bytes").write_text(limit)
                _write_if_there(memory / "memory.memsw.limit_in_bytes", limit)
        if processes is not None:
            (pids / "pids.max").write_text(str(processes))


def find(root: Path = ROOT, self_cgroup: str | None = None) -> CommandGroups | str:
    """Where this process may make command groups (see the module docstring), or why
    nowhere. ``self_cgroup``: the text of ``/proc/self/cgroup`` (read when None).

    Tries each place by making and removing a group there (blocking; never raises).
    """
    if self_cgroup is None:
        try:
            self_cgroup = Path("/proc/self/cgroup").read_text()
        except OSError as exc:
            return f"cannot read /proc/self/cgroup: {exc}"
    own = _own_paths(self_cgroup)
    v2 = _v2_mount(root)
    if v2 is not None:
        here = _inside(v2, own.get("", "/"))
        for candidate in (here, here.parent) if here != v2 else (here,):
            if _delegated(candidate) and _can_make(candidate):
                return CommandGroups(2, (candidate,))
    parents = []
    for controller in NEEDED:
        mount = root / controller
        if not (mount / "cgroup.procs").is_file():
            break
        here = _inside(mount, own.get(controller, "/"))
        usable = [c for c in dict.fromkeys((here, mount)) if _can_make(c)]
        if not usable:
            break
        parents.append(usable[0])
    else:
        return CommandGroups(1, (parents[0], parents[1]))
    v2_said = (
        f"cgroup v2 ({v2}) offers no memory and pids controllers to the bot's group or its parent"
        if v2 is not None
        else f"no cgroup v2 under {root}"
    )
    return (
        f"no cgroup the bot may create command groups in: {v2_said}, and no writable "
        f"cgroup v1 memory and pids hierarchies are under {root}"
    )


def find_group(name: str, root: Path = ROOT) -> Group | None:
    """The left-over group named ``name`` (a :data:`PREFIX` name) in the hierarchies under
    ``root``, or None when it is gone (blocking: walks the hierarchies)."""
    if not name.startswith(PREFIX) or "/" in name:
        return None
    v2 = _v2_mount(root)
    if v2 is not None and (found := _walk_for(v2, name)):
        return Group(name, (found,), 2)
    dirs = tuple(d for c in NEEDED if (d := _walk_for(root / c, name)) is not None)
    return Group(name, dirs, 1) if dirs else None


def _own_paths(text: str) -> dict[str, str]:
    """``/proc/self/cgroup`` as {controller: path}; the v2 line under ``""``."""
    paths: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        for controller in parts[1].split(",") if parts[1] else [""]:
            paths[controller] = parts[2]
    return paths


def _v2_mount(root: Path) -> Path | None:
    """The cgroup v2 hierarchy: ``root`` itself (unified) or ``root/unified`` (hybrid)."""
    for mount in (root, root / "unified"):
        if (mount / "cgroup.controllers").is_file():
            return mount
    return None


def _inside(mount: Path, own: str) -> Path:
    """The folder of the cgroup path ``own`` in ``mount`` (the mount's root where the
    path leaves it)."""
    here = mount.joinpath(*[part for part in own.split("/") if part not in ("", ".", "..")])
    return here if here.is_dir() else mount


def _delegated(group: Path) -> bool:
    """Whether the children of v2 ``group`` get the memory and pids controllers; enables
    them where the group offers them and has no process of its own (the kernel's rule)."""
    if _listed(group / "cgroup.subtree_control"):
        return True
    if not _listed(group / "cgroup.controllers"):
        return False
    try:
        (group / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in NEEDED))
    except OSError:
        return False
    return _listed(group / "cgroup.subtree_control")


def _listed(path: Path) -> bool:
    """Whether the controller list in ``path`` names memory and pids."""
    try:
        return set(NEEDED) <= {word.lstrip("+") for word in path.read_text().split()}
    except OSError:
        return False


def _can_make(parent: Path) -> bool:
    """Whether a group can be made (and removed) in ``parent``: tried for real."""
    trial = parent / (PREFIX + "trial-" + secrets.token_hex(4))
    try:
        trial.mkdir()
    except OSError:
        return False
    try:
        trial.rmdir()
    except OSError:
        log.warning("cannot remove the trial cgroup %s", trial.name)
    return True


def _walk_for(mount: Path, name: str) -> Path | None:
    """The folder called ``name`` somewhere under ``mount``, or None."""
    for folder, subdirs, _files in os.walk(mount):
        if name in subdirs:
            return Path(folder) / name
    return None


def _write_if_there(path: Path, value: str) -> None:
    """Write ``value`` to a control file the kernel may not have (swap accounting off)."""
    with contextlib.suppress(OSError):
        if path.exists():
            path.write_text(value)


def _kill_member(pid: int, name: str) -> None:
    """SIGKILL ``pid`` if it is still a member of the group ``name`` (checked after the
    pid is pinned by a pidfd, pidfd_open(2))."""
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        return  # gone already
    try:
        with open(f"/proc/{pid}/cgroup", encoding="utf-8") as f:
            if f"/{name}" not in f.read():
                return  # the pid is another process's now
        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
    except OSError:
        pass
    finally:
        os.close(pidfd)
