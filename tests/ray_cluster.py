"""One local Ray cluster per test session, for the Ray runner's tests (``tests/test_ray_*.py``).

``ray.init(num_cpus=2, include_dashboard=False)`` with a small object store, its
temporary folder inside the session's (or, where that path is too long for Ray's unix
sockets, which must fit in 107 characters with the session folder Ray makes there, a
short one under the system's), started once by the session fixture ``ray_cluster``
(``tests/conftest.py``; it takes about 10-30 s) and shut down at the session's end.
The actors' processes inherit this process's environment at start, so ``PYTHONPATH``
is set to this checkout first: they import the code under test, not an installed
threadbot. With pytest-xdist the Ray tests run in one worker (their ``xdist_group``
and ``--dist loadgroup``), so one session starts a cluster.

Without Ray installed the tests skip with the reason (fail under ``CI=true``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OBJECT_STORE_BYTES = 100 * 1024 * 1024
"""The object store's size: runs pass small items; Ray asks for at least 75 MiB."""
SOCKET_ROOM = 107 - len("/session_2026-12-06_10-58-33_678123_1234567/sockets/plasma_store")
"""The longest temporary folder Ray's socket paths still fit under (Linux: 107 bytes)."""


@dataclass(frozen=True)
class RayCluster:
    """The session's local cluster: ``address``, the GCS address another process
    connects to (``ray.init(address=...)``, ``THREADBOT_RAY_ADDRESS``); ``folder``, its
    temporary folder."""

    address: str
    folder: Path


def missing() -> str | None:
    """Why the Ray tests cannot run here, or None."""
    try:
        import ray  # noqa: F401
    except ImportError as exc:
        return f"Ray is not installed ({exc}): pip install 'threadbot[ray]'"
    return None


@contextmanager
def local_cluster(session_tmp: Path) -> Iterator[RayCluster]:
    """Start the local cluster (see the module docstring); shut it down after."""
    import ray

    folder = session_tmp / "ray"
    made_short = len(str(folder)) > SOCKET_ROOM
    if made_short:
        folder = Path(tempfile.mkdtemp(prefix="tb-ray-"))
    folder.mkdir(exist_ok=True)
    before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), before) if p)
    try:
        context = ray.init(
            num_cpus=2,
            include_dashboard=False,
            object_store_memory=OBJECT_STORE_BYTES,
            _temp_dir=str(folder),
            logging_level="WARNING",
            log_to_driver=False,
        )
    finally:
        if before is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = before
    try:
        yield RayCluster(address=context.address_info["gcs_address"], folder=folder)
    finally:
        ray.shutdown()
        if made_short:
            shutil.rmtree(folder, ignore_errors=True)
