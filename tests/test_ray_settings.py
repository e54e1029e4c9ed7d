"""``runner = "ray"``: its settings are checked before anything starts (exit 2, saying why).

Ray runs commit to the store from the actors' processes and hosts, so they need
PostgreSQL (docs/architecture.md, "Runners"); Ray itself comes with the ``ray`` extra.
``threadbot settings explain`` shows where the runs go. No cluster is needed here.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from bot.settings import Settings
from tests.cli_harness import clean_env, threadbot

POSTGRES = "postgresql+asyncpg://bot:hunter2@db.internal:5432/threadbot"


@pytest.mark.parametrize(
    ("url", "said"),
    [
        (None, "needs PostgreSQL, not SQLite"),  # the default database
        ("sqlite+aiosqlite:///threadbot.db", "needs PostgreSQL, not SQLite"),
        ("memory://", "needs PostgreSQL, not memory://"),
    ],
)
def test_ray_runs_on_another_database_stop_the_bot_with_exit_2(
    tmp_path: Path, url: str | None, said: str
) -> None:
    env = {"THREADBOT_RUNNER": "ray"} | ({"THREADBOT_DATABASE_URL": url} if url else {})
    result = threadbot(tmp_path, "run", stdin="hi\n", env=env)
    assert result.returncode == 2, result.stderr
    assert f"runner = 'ray' (THREADBOT_RUNNER) {said}" in result.stderr
    assert "set database_url to postgresql+asyncpg://" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / ".threadbot").exists()  # nothing was started


def test_ray_runs_without_ray_installed_name_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("asyncpg")
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails
    with pytest.raises(ValidationError) as refused:
        Settings(runner="ray", database_url=POSTGRES)
    said = str(refused.value)
    assert "needs Ray, which is not installed: pip install 'threadbot[ray]'" in said
    assert "hunter2" not in said


@pytest.mark.parametrize(
    ("variable", "value", "said"),
    [
        ("THREADBOT_RUNNER", "kubernetes", "must be one of 'local' or 'ray'"),
        ("THREADBOT_RAY_ACTORS", "0", "must be at least 1"),
        ("THREADBOT_RAY_ACTORS", "100000", "must be at most 1000"),
    ],
)
def test_a_runner_or_an_actor_count_out_of_range_is_refused(
    tmp_path: Path, variable: str, value: str, said: str
) -> None:
    result = threadbot(tmp_path, "run", stdin="hi\n", env={variable: value})
    assert result.returncode == 2, result.stderr
    assert f"{variable} ('{value}'): {said}" in result.stderr


def test_ray_on_postgresql_is_accepted_and_local_is_the_default() -> None:
    pytest.importorskip("ray")
    pytest.importorskip("asyncpg")
    assert Settings(database_url="memory://").runner == "local"
    ray = Settings(runner="ray", database_url=POSTGRES)
    assert (ray.runner, ray.ray_address, ray.ray_actors) == ("ray", None, 2)


def test_settings_explain_shows_where_the_runs_go(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    local = threadbot(tmp_path, "settings", "explain", "--platform", "console")
    assert local.returncode == 0, local.stderr
    assert "runner = 'local'  (defaults)" in local.stdout.splitlines()
    assert "ray_actors" not in local.stdout

    (tmp_path / "threadbot.toml").write_text("ray_actors = 4\n")
    env = {
        "THREADBOT_RUNNER": "ray",
        "THREADBOT_DATABASE_URL": POSTGRES,
        "THREADBOT_RAY_ADDRESS": "ray-head.internal:6379",
    }
    ray = threadbot(tmp_path, "settings", "explain", "--platform", "console", env=env)
    assert ray.returncode == 0, ray.stderr
    lines = ray.stdout.splitlines()
    first = lines.index("runner = 'ray'  (bot settings (THREADBOT_RUNNER))")
    assert lines[first + 1 : first + 3] == [
        "ray_address = 'ray-head.internal:6379'  (bot settings (THREADBOT_RAY_ADDRESS))",
        "ray_actors = 4  (bot settings (threadbot.toml))",
    ]
    assert "hunter2" not in ray.stdout


def test_a_ray_cluster_that_does_not_answer_stops_the_bot_with_exit_2(
    tmp_path: Path, postgres_url: str
) -> None:
    pytest.importorskip("ray")
    env = {
        "THREADBOT_RUNNER": "ray",
        "THREADBOT_DATABASE_URL": postgres_url,
        "THREADBOT_RAY_ADDRESS": "127.0.0.1:9",  # the discard port: nothing answers there
    }
    result = threadbot(tmp_path, "run", stdin="hi\n", env=env)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        "threadbot: the Ray cluster at 127.0.0.1:9 does not answer: connection refused "
        "(nothing listens there) (start it, or set THREADBOT_RAY_ADDRESS to its head's "
        "host:port)"
    )


def test_ray_address_auto_with_no_cluster_on_the_machine_stops_the_bot_with_exit_2(
    tmp_path: Path, postgres_url: str
) -> None:
    """``auto`` connects to any Ray cluster whose processes run on the machine (Ray scans
    /proc for a raylet), and this session's own cluster may be up: the bot runs in a PID
    namespace of its own (util-linux ``unshare``), where it sees no other process."""
    pytest.importorskip("ray")
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip(
            "util-linux's unshare is not installed: no machine without Ray's processes to show"
        )
    alone = [unshare, "--user", "--map-root-user", "--pid", "--fork", "--mount-proc"]
    env = clean_env() | {
        "THREADBOT_RUNNER": "ray",
        "THREADBOT_DATABASE_URL": postgres_url,
        "THREADBOT_RAY_ADDRESS": "auto",
        "RAY_TMPDIR": str(tmp_path / "ray"),  # where `auto` looks first: no cluster there
    }
    result = subprocess.run(
        [*alone, sys.executable, "-m", "bot", "run"],
        input="hi\n",
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=60,
    )
    if result.returncode != 2 and "unshare:" in result.stderr:
        pytest.skip(f"this machine allows no PID namespace: {result.stderr.strip()}")
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        "threadbot: the Ray cluster at auto does not answer: no Ray cluster runs on this "
        "machine (Ray: could not find one) (start it, or set THREADBOT_RAY_ADDRESS to its "
        "head's host:port)"
    )
