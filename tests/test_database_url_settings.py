"""THREADBOT_DATABASE_URL: SQLite through aiosqlite or PostgreSQL through asyncpg, else a
settings error (exit 2) that says what to use or which extra to install (issue 26)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from bot.settings import Settings
from tests.cli_harness import ROOT, threadbot


@pytest.mark.parametrize(
    "url",
    [
        "memory://",
        "sqlite+aiosqlite:///threadbot.db",
        "postgresql+asyncpg://bot:secret@db.internal:5432/threadbot",
    ],
)
def test_sqlite_and_postgresql_through_their_async_drivers_are_accepted(url: str) -> None:
    pytest.importorskip("asyncpg")
    assert Settings(database_url=url).database_url == url


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("mysql+aiomysql://bot@db/threadbot", "in SQLite or PostgreSQL, not mysql"),
        ("sqlite:///x.db", "use an async driver, e.g. sqlite+aiosqlite:///"),
        ("postgresql://bot@db/threadbot", "use an async driver, e.g. postgresql+asyncpg://"),
        ("postgresql+psycopg://bot@db/threadbot", "through asyncpg, not psycopg"),
        ("postgresql+psycopg://bot@db/threadbot", "pip install 'threadbot[postgres]'"),
        ("not a url", "not a database URL"),
    ],
)
def test_another_database_or_driver_is_refused_saying_what_to_use(url: str, said: str) -> None:
    with pytest.raises(ValidationError) as refused:
        Settings(database_url=url)
    assert said in str(refused.value)


def test_postgresql_without_asyncpg_names_the_extra_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "asyncpg", None)  # `import asyncpg` fails
    with pytest.raises(ValidationError) as refused:
        Settings(database_url="postgresql+asyncpg://bot@db/threadbot")
    said = str(refused.value)
    assert "its driver is not installed (asyncpg)" in said
    assert "pip install 'threadbot[postgres]'" in said


def test_the_bot_without_asyncpg_stops_with_exit_2_naming_the_extra(tmp_path: Path) -> None:
    blocked = tmp_path / "blocked" / "asyncpg"
    blocked.mkdir(parents=True)
    (blocked / "__init__.py").write_text("raise ImportError('not here', name='asyncpg')\n")
    env = {
        "PYTHONPATH": f"{blocked.parent}:{ROOT}",
        "THREADBOT_DATABASE_URL": "postgresql+asyncpg://bot:hunter2@db.internal/threadbot",
    }
    result = threadbot(tmp_path, "run", stdin="hi\n", env=env)
    assert result.returncode == 2, result.stderr
    assert "THREADBOT_DATABASE_URL ('postgresql+asyncpg://bot:***@db.internal/" in result.stderr
    assert "pip install 'threadbot[postgres]'" in result.stderr
    assert "hunter2" not in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("lease_ttl", float("inf")),
        ("lease_ttl", 1e12),
        ("lease_ttl", 0.001),
        ("wakeup_poll", 1e-9),
        ("wakeup_poll", 0),
        ("wakeup_poll", 1e12),
    ],
)
def test_a_lease_or_a_poll_that_would_break_the_instances_is_refused(
    setting: str, value: float
) -> None:
    """A lease of a millisecond is taken over from its live holder at once, one of
    years overflows the time it lapses at, a poll of a nanosecond spins a core."""
    with pytest.raises(ValidationError) as refused:
        Settings(**{setting: value})
    assert setting in str(refused.value)
