"""``threadbot doctor`` with ``runner = "ray"`` checks the command sandbox on each Ray node.

The real command, as an operator runs it (:func:`tests.test_doctor.run_doctor`),
pointed at the session's local cluster by its address (``tests/ray_cluster.py``) and
at PostgreSQL: the sandbox checks run again as a Ray task pinned to each node, each
line naming the node.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.ray_cluster import RayCluster
from tests.test_doctor import run_doctor

pytestmark = pytest.mark.xdist_group("ray")


@pytest.mark.usefixtures("working_bwrap")
async def test_the_sandbox_is_checked_on_each_ray_node(
    tmp_path: Path, ray_cluster: RayCluster, postgres_url: str
) -> None:
    import ray

    report = await run_doctor(
        tmp_path,
        THREADBOT_RUNNER="ray",
        THREADBOT_RAY_ADDRESS=ray_cluster.address,
        THREADBOT_DATABASE_URL=postgres_url,
    )

    assert report.code == 0, report.stdout + report.stderr
    nodes = [node for node in ray.nodes() if node["Alive"]]
    assert report.line("ray") == (
        f"✓ ray: the cluster at {ray_cluster.address} answers: {len(nodes)} node alive"
    )
    for node in nodes:
        where = f"on ray node {node['NodeManagerAddress']}"
        assert report.line(f"sandbox {where}") == (
            f"✓ sandbox {where}: bubblewrap {shutil.which('bwrap')} confines commands (own "
            "user, PID, IPC and network namespaces, its own /proc, no host /etc)"
        )
        assert report.line(f"sandbox network {where}").startswith(
            f"✓ sandbox network {where}: no connection out from inside the sandbox: "
        )
        assert report.line(f"command caps {where}").startswith(f"✓ command caps {where}: ")
    assert report.line("sandbox").startswith("✓ sandbox: bubblewrap")  # this host's, first
    assert report.lines.index(report.line("sandbox")) < report.lines.index(report.line("ray"))


async def test_a_ray_cluster_that_does_not_answer_is_a_failure(
    tmp_path: Path, postgres_url: str
) -> None:
    pytest.importorskip("ray")
    report = await run_doctor(
        tmp_path,
        THREADBOT_RUNNER="ray",
        THREADBOT_RAY_ADDRESS="127.0.0.1:9",  # the discard port: nothing answers there
        THREADBOT_DATABASE_URL=postgres_url,
    )

    assert report.code == 1, report.stdout + report.stderr
    assert report.line("ray") == (
        "✗ ray: cannot connect to the Ray cluster at 127.0.0.1:9: connection refused (nothing "
        "listens there)"
    )
