"""A repository with a check command, for the ``validate-fix`` stories.

The agent's commands run in a sandbox that sees only the conversation's workspace
(README, "Sandbox and secrets"), so the check a story runs lives in the repository
each workspace is cloned from (the ``git_repo`` setting), as a team's ``make test``
would: :func:`check_repo` makes one in the test's folder whose ``check.sh`` counts
its runs in the workspace's ``check-runs`` file, prints ``check run N`` and fails
until its ``passes_at``-th run (or always). :data:`CHECK` is the ``check_command``
that runs it.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

CHECK = "sh check.sh"
"""The ``check_command`` of the stories: the repository's ``check.sh``, in the workspace."""


def git(*args: str, cwd: Path) -> str:
    """``git args`` in ``cwd`` (no hooks); its stdout, stripped; raises on a failure."""
    done = subprocess.run(
        ["git", "-c", "core.hooksPath=/dev/null", "-c", "safe.directory=*", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def check_script(passes_at: int | None, *, output: str = "") -> str:
    """``check.sh``: counts its runs in ``check-runs``, prints ``check run N`` (and
    ``output`` after it), and passes from its ``passes_at``-th run (None: never)."""
    passing = "exit 1" if passes_at is None else f'[ "$n" -ge {passes_at} ]'
    return (
        "n=$(( $(cat check-runs 2>/dev/null || echo 0) + 1 ))\n"
        'echo "$n" > check-runs\n'
        f"{output}"
        'echo "check run $n"\n'
        f"{passing}\n"
    )


def check_repo(tmp_path: Path, passes_at: int | None, *, output: str = "") -> Path:
    """A repository under ``tmp_path`` with :func:`check_script` committed as ``check.sh``."""
    path = tmp_path / "project"
    path.mkdir()
    git("init", "-q", "-b", "main", cwd=path)
    (path / "check.sh").write_text(check_script(passes_at, output=output))
    git("add", "-A", cwd=path)
    git("-c", "user.email=op@example.com", "-c", "user.name=op", "commit", "-qm", "init", cwd=path)
    return path


def check_runs(workspace: str) -> int:
    """How many times the check ran in ``workspace`` (its ``check-runs`` file)."""
    return int((Path(workspace) / "check-runs").read_text())
