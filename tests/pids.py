"""A lease or slot holder of this host whose process is gone, for good.

:func:`gone_holder` names a pid one past the highest the kernel gives out (proc(5),
``/proc/sys/kernel/pid_max``), so no process can have it. An ended process's pid would
not do: on a busy host the pids wrap around and a process started later takes it.
"""

from __future__ import annotations

import socket
from pathlib import Path

from conversations.store.owners import holder_gone


def gone_holder() -> str:
    """A ``host:pid`` of this host with no process (:func:`holder_gone`)."""
    highest = int(Path("/proc/sys/kernel/pid_max").read_text())
    holder = f"{socket.gethostname()}:{highest + 1}"
    assert holder_gone(holder)
    return holder
