"""A module for ``tests/test_forkserver.py`` to run as ``python -m tests.fork_probe``.

It prints, as one JSON line, what a process started by ``python -m`` knows about itself,
reads its standard input to the end, and exits with the code its first argument gives
(``raise``: an uncaught error). A thread that ends only after the module has, and an
``atexit`` hook, each write a line: an interpreter's own exit waits for the one and then
runs the other."""

from __future__ import annotations

import atexit
import json
import os
import sys
import threading

print(
    json.dumps(
        {
            "pid": os.getpid(),
            "name": __name__,
            "argv": sys.argv,
            "cwd": os.getcwd(),
            "path0": sys.path[0],
            "variable": os.environ.get("FORK_PROBE"),
            "preloaded": "bot.cli" in sys.modules,
            "names": sorted(globals()),  # the module's own, nothing of a fork server's
            "stdin": sys.stdin.read(),
        }
    ),
    flush=True,
)
atexit.register(lambda: print("atexit ran", flush=True))
module_done = threading.Event()
threading.Thread(target=lambda: (module_done.wait(), print("thread ended", flush=True))).start()
module_done.set()
if sys.argv[1:] == ["raise"]:
    raise RuntimeError("the probe fails")
sys.exit(int(sys.argv[1]) if sys.argv[1:] else 0)
