"""The sandbox's own /etc files: one directory shared by a user's bot processes, so a bot
killed before its exit handlers ran leaves nothing new behind (core/tools/sandbox_etc.py);
a directory someone else could have written is never taken."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from core.tools.sandbox import HOSTS, Sandbox
from core.tools.sandbox_etc import shared_etc

FILES = {"passwd": "threadbot:x:1:1::/home/threadbot:/bin/sh\n", "hosts": HOSTS}


def test_two_sandboxes_of_one_user_share_their_etc_and_its_files_are_whole() -> None:
    first, second = Sandbox("bwrap", run_as=(65534, 65534)), Sandbox("bwrap", run_as=(65534, 65534))
    assert first._etc == second._etc
    assert first._etc.name.startswith(f"threadbot-sandbox-{os.geteuid()}-")
    assert (first._etc / "passwd").read_text().startswith("threadbot:x:65534:65534:")
    assert (first._etc / "hosts").read_text() == HOSTS
    assert oct(first._etc.stat().st_mode & 0o777) == "0o755"
    assert {p.name for p in first._etc.iterdir()} == {"passwd", "group", "resolv.conf", "hosts"}
    other = Sandbox("bwrap", run_as=(12345, 12345))  # other files: another directory
    assert other._etc != first._etc


def test_a_killed_process_leaves_no_directory_behind(tmp_path: Path) -> None:
    """A process killed (no exit handler runs) leaves only the shared directory behind.
    It runs with a temporary folder of its own: the machine's holds what other tests,
    run beside this one, make and remove."""
    code = (
        "import os; from core.tools.sandbox import Sandbox; "
        "Sandbox('bwrap', run_as=(65534, 65534)); os._exit(9)"  # no exit handler runs
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent), "TMPDIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", code], env=env, check=False, timeout=60)
    assert done.returncode == 9
    left = [p.name for p in tmp_path.glob("threadbot-sandbox-*")]
    assert len(left) == 1 and left[0].startswith(f"threadbot-sandbox-{os.geteuid()}-"), left


@pytest.mark.parametrize("made", ["writable by all", "a link", "another user's"])
def test_a_directory_someone_else_could_write_is_not_taken(tmp_path: Path, made: str) -> None:
    files = {**FILES, "group": f"{made}\n"}  # a digest of its own: a path no other test uses
    taken = shared_etc(files)  # where it would go
    taken.rmdir()
    if made == "writable by all":
        taken.mkdir()
        taken.chmod(0o777)
    elif made == "a link":
        taken.symlink_to(tmp_path)
    else:
        if os.geteuid() != 0:
            pytest.skip("giving a directory to another user needs root")
        taken.mkdir(mode=0o755)
        os.chown(taken, 65534, 65534)
    try:
        own = shared_etc(files)
        assert own != taken and own.name.startswith("threadbot-sandbox-")
        assert own.stat().st_uid == os.geteuid()
    finally:
        if taken.is_symlink():
            taken.unlink()
        else:
            taken.rmdir()
