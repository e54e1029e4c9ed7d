"""The fork server (``tests/forkserver.py``) starts what ``python -m`` would: the same
module as ``__main__``, arguments, folder, environment, streams and exit, and a real
process that a test signals, kills and waits for."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests import forkserver
from tests.cli_harness import clean_env

PROBE = [sys.executable, "-m", "tests.fork_probe"]


def facts(output: str) -> dict:
    first, *rest = output.splitlines()
    return json.loads(first) | {"then": rest}


def probe(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, dict, str]:
    done = forkserver.run(
        [*PROBE, *args],
        input="what the test typed\n",
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=clean_env() | {"FORK_PROBE": "given"} | (env or {}),
        timeout=60,
    )
    return done.returncode, facts(done.stdout), done.stderr


def test_a_forked_child_is_the_module_as_main_in_its_own_folder_environment_and_streams(
    tmp_path: Path,
) -> None:
    if os.environ.get("THREADBOT_TEST_FORK") == "0":
        pytest.skip("THREADBOT_TEST_FORK=0: every process starts fresh")
    code, forked, _ = probe(tmp_path, "3")
    assert code == 3
    assert forked["preloaded"]  # forked from the server, which has imported the bot
    assert forked["name"] == "__main__"
    assert forked["argv"] == [str(Path(forkserver.ROOT, "tests", "fork_probe.py")), "3"]
    assert forked["cwd"] == forked["path0"] == str(tmp_path)
    assert forked["variable"] == "given"
    assert forked["stdin"] == "what the test typed\n"
    # The interpreter's own exit: non-daemon threads joined, then atexit hooks.
    assert forked["then"] == ["thread ended", "atexit ran"]


def test_a_child_whose_python_variables_differ_starts_fresh_and_knows_the_same(
    tmp_path: Path,
) -> None:
    _, forked, _ = probe(tmp_path, "3")
    code, fresh, _ = probe(tmp_path, "3", env={"PYTHONWARNINGS": "default"})
    assert code == 3
    assert not fresh["preloaded"]
    assert {**fresh, "pid": 0, "preloaded": True} == {**forked, "pid": 0}


def test_an_uncaught_error_exits_1_with_its_traceback(tmp_path: Path) -> None:
    code, _, stderr = probe(tmp_path, "raise")
    assert code == 1
    assert "Traceback" in stderr and "RuntimeError: the probe fails" in stderr


def test_the_pid_is_the_childs_and_a_kill_is_its_exit_status(tmp_path: Path) -> None:
    process = forkserver.Popen(
        PROBE,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=tmp_path,
        env=clean_env(),
        text=True,
    )
    assert process.poll() is None  # it waits for the end of its input
    process.kill()
    assert process.wait(timeout=60) == -signal.SIGKILL
    assert process.stdout is not None and process.stdout.read() == ""

    process = forkserver.Popen(
        PROBE, stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=tmp_path, env=clean_env()
    )
    out, _ = process.communicate(b"", timeout=60)
    assert json.loads(out.splitlines()[0])["pid"] == process.pid
    assert process.returncode == 0


def test_a_folder_that_does_not_exist_is_the_error_popen_raises(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        forkserver.run([*PROBE], cwd=tmp_path / "missing", env=clean_env(), timeout=60)


async def test_as_an_asyncio_process_its_lines_arrive_and_its_exit_or_kill_is_awaited(
    tmp_path: Path,
) -> None:
    process = await forkserver.create_subprocess_exec(
        *PROBE, "4", stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, cwd=tmp_path, env=clean_env()
    )
    assert process.stdout is not None
    assert json.loads(await process.stdout.readline())["pid"] == process.pid
    assert await process.wait() == 4 == process.returncode

    process = await forkserver.create_subprocess_exec(
        *PROBE, stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=tmp_path, env=clean_env()
    )
    assert process.returncode is None
    first, second = asyncio.create_task(process.wait()), asyncio.create_task(process.wait())
    await asyncio.sleep(0)  # both wait now
    first.cancel()  # one waiter cancelled: the other still learns the exit
    process.send_signal(signal.SIGTERM)
    assert await second == -signal.SIGTERM == await process.wait()
    assert first.cancelled()
