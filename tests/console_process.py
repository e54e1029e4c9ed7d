"""A bot console process on one database, for tests that kill and restart it.

:class:`Bot` runs ``python -m bot console`` on one SQLite file with a model script
file (the script goes on from the history, so a restarted process picks up where
the dead one was) and one console state, and reads the store with ``sqlite3``.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from tests import forkserver

ROOT = Path(__file__).resolve().parents[1]


class Bot:
    """Runs bot processes on one database, one model script and one console state.

    ``module``: what ``python -m`` runs (``bot``; a test's own launcher, which wraps it)."""

    module = "bot"

    def __init__(
        self, tmp_path: Path, script: list[dict], env: dict[str, str] | None = None
    ) -> None:
        self.dir = tmp_path
        self.extra_env = env or {}
        self.db = tmp_path / "threadbot.db"
        self.script = tmp_path / "script.json"
        self.script.write_text(json.dumps(script))
        self.workspaces = tmp_path / "workspaces"

    def env(self, fault: str = "") -> dict[str, str]:
        env = {
            k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "THREADBOT_"))
        }
        env.update(
            PYTHONPATH=str(ROOT),
            THREADBOT_DATABASE_URL=f"sqlite+aiosqlite:///{self.db}",
            THREADBOT_WORKSPACE_ROOT=str(self.workspaces),
            THREADBOT_CONSOLE_STATE=str(self.dir / "console.jsonl"),
            THREADBOT_MODEL_SCRIPT=str(self.script),
            THREADBOT_PROGRESS_INTERVAL="0",
            THREADBOT_RUNNING_NOTE_EVERY="0",
            THREADBOT_CONSOLE_USER="alice",
            THREADBOT_FAULT=fault,
        )
        return env | self.extra_env

    def run(self, lines: str = "", *, fault: str = "") -> subprocess.CompletedProcess[str]:
        return forkserver.run(
            [sys.executable, "-m", self.module, "console"],
            input=lines,
            capture_output=True,
            text=True,
            cwd=self.dir,
            env=self.env(fault),
            timeout=60,
        )

    def start(self, lines: str, *, wait: str = "auto") -> subprocess.Popen[str]:
        """A process whose input stays open (so it does not exit at the end of it)."""
        proc = forkserver.Popen(
            [sys.executable, "-m", self.module, "console"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=self.dir,
            env=self.env() | {"THREADBOT_CONSOLE_WAIT": wait},
        )
        assert proc.stdin is not None
        proc.stdin.write(lines)
        proc.stdin.flush()
        return proc

    def query(self, sql: str) -> list[tuple]:
        with self.connect() as db:
            return db.execute(sql).fetchall()

    def connect(self) -> sqlite3.Connection:
        """A ``sqlite3`` connection to the database (a context manager: commits at the end)."""
        return sqlite3.connect(self.db)

    def wait_until(self, sql: str, *, seconds: float = 20) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                if self.db.exists() and self.query(sql):
                    return
            except sqlite3.OperationalError:
                pass  # the schema is still being created
            time.sleep(0.05)
        raise AssertionError(f"never true: {sql}")

    def workspace(self) -> Path:
        (conversation_id,) = self.query("select id from conversations")[0]
        return self.workspaces / conversation_id


def plan(*steps: str) -> dict:
    return {"calls": [{"name": "propose_plan", "input": {"steps": list(steps)}}]}


def command(cmd: str) -> dict:
    return {"name": "run_command", "input": {"command": cmd}}


def finish(answer: str) -> dict:
    return {"calls": [{"name": "finish", "input": {"answer": answer}}]}
