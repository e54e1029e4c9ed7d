"""``threadbot`` as a person runs it: a real process in a folder of the test's own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests import forkserver

ROOT = Path(__file__).resolve().parents[1]


def clean_env() -> dict[str, str]:
    """This environment without the caller's ``ANTHROPIC_*`` and ``THREADBOT_*`` settings,
    with the checkout on ``PYTHONPATH``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "THREADBOT_"))}
    env["PYTHONPATH"] = str(ROOT)
    return env


def threadbot(
    cwd: Path, *command: str, stdin: str = "", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``threadbot COMMAND...`` run to its end in ``cwd`` (60 s at most), its output kept."""
    return forkserver.run(
        [sys.executable, "-m", "bot", *command],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=cwd,
        env=clean_env() | (env or {}),
        timeout=60,
    )
