"""The first moments of a command: in its cgroup, bound to the bot's life, recorded first.

Every command starts as a tiny ``/bin/sh`` shim (no Python ``preexec_fn``, which is
unsafe in a process with threads: https://docs.python.org/3/library/subprocess.html,
``preexec_fn``), which:

1. for a sandboxed command, gets SIGKILL when the bot dies (``setpriv --pdeathsig
   KILL``, util-linux; the setting survives the ``exec`` of bwrap, which sets its
   own ``--die-with-parent`` only after it made its namespaces), and exits at once
   when the bot already died before that (its parent is no longer the bot: the
   classic race of ``PR_SET_PDEATHSIG``, prctl(2)). Unsandboxed, the signal would
   kill the shell alone and leave its children: a restart kills them all through the
   cgroup, or through the process group, whose leader must live for that;
2. writes its own pid into the command's cgroup (each ``cgroup.procs``), so
   everything it execs and forks is counted and capped from the first instruction;
3. waits for the bot's go (a line on its stdin, a pipe; the end of the pipe when the
   bot dies), which the bot gives once the tool call's record names the process and
   its cgroup (:class:`Hold`): a crash after that finds the group again, a crash
   before it leaves nothing running;
4. execs the command (bwrap, or ``setpriv`` to another user, or the shell), its
   stdin ``/dev/null``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil

from core.tools.cgroups import Group
from core.tools.sandbox import Launch

SHIM = """\
bot=$1; shift
[ "$PPID" = "$bot" ] || exit 125
for f; do
  shift; [ "$f" = -- ] && break
  echo $$ 2>/dev/null > "$f" || { echo "threadbot: cannot enter the command's cgroup" >&2
    exit 125; }
done
read -r _ || exit 125
exec "$@" </dev/null
"""
"""The shim's script: ``sh -c SHIM threadbot-shim BOT_PID PROCS... -- ARGV...``, its
stdin the read end of the :class:`Hold` (the command's stdin is ``/dev/null``)."""


class Hold:
    """The pipe a shim waits on before it execs the command; :meth:`release` lets it go.

    Only this process holds the write end (``os.pipe`` descriptors are not inherited),
    so the shim sees the end of the pipe when the bot dies.
    """

    def __init__(self) -> None:
        self.read_end, self._write_end = os.pipe()
        self._open = True

    def release(self) -> None:
        """Let the shim exec the command (once; later calls do nothing)."""
        if self._open:
            with contextlib.suppress(OSError):
                os.write(self._write_end, b"\n")
            self.close()

    def close(self) -> None:
        """Close the write end: a shim still waiting exits without running anything."""
        if self._open:
            self._open = False
            os.close(self._write_end)


def shimmed(launch: Launch, group: Group | None, hold: Hold, *, bound: bool) -> Launch:
    """``launch`` started through the shim: in ``group`` (None: in no cgroup), killed
    with this process when ``bound``, waiting on ``hold`` (its stdin). This process's
    copy of the read end is closed once the command is spawned
    (:meth:`Launch.spawned`)."""
    procs = [str(path) for path in group.procs] if group is not None else []
    setpriv = shutil.which("setpriv") if bound else None
    dies = [setpriv, "--pdeathsig", "KILL", "--"] if setpriv else []
    argv = [
        *dies,
        "/bin/sh",
        "-c",
        SHIM,
        "threadbot-shim",
        str(os.getpid()),
        *procs,
        "--",
        *launch.argv,
    ]
    return dataclasses.replace(
        launch, argv=argv, stdin=hold.read_end, child_fds=(*launch.child_fds, hold.read_end)
    )
