"""The shipped commands, run as a person would: a real process, piped stdin."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "THREADBOT_"))}
    env["PYTHONPATH"] = str(ROOT)
    return env


def test_piped_hello_shows_the_demo_plan_and_exits_0(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "bot", "run"],
        input="hello\n",
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=_env(tmp_path),
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "built-in demo model" in result.stdout
    assert "[1] you: hello" in result.stdout
    assert "📋 Plan (v1)" in result.stdout
    assert (tmp_path / ".threadbot" / "threadbot.db").exists()


def test_db_upgrade_creates_the_schema(tmp_path: Path) -> None:
    env = _env(tmp_path) | {"THREADBOT_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path}/x.db"}
    result = subprocess.run(
        [sys.executable, "-m", "bot", "db", "upgrade"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "database at revision 0002" in result.stdout

    import sqlite3

    with sqlite3.connect(tmp_path / "x.db") as db:
        tables = {row[0] for row in db.execute("select name from sqlite_master where type='table'")}
        mode = db.execute("pragma journal_mode").fetchone()[0]
    assert {
        "conversations",
        "deliveries",
        "journal",
        "tool_calls",
        "pending_requests",
        "outbox",
        "model_usage",
    } <= tables
    assert mode == "wal"


def test_bad_settings_are_a_clear_error(tmp_path: Path) -> None:
    env = _env(tmp_path) | {"THREADBOT_PROGRESS_MODE": "loud"}
    result = subprocess.run(
        [sys.executable, "-m", "bot", "run"],
        input="",
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=60,
    )
    assert result.returncode == 2
    assert "progress_mode" in result.stderr
