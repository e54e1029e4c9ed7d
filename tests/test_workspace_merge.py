"""A delegation's copy brought back without a repository (core/tools/workspaces.py): the
workspace is made to hold what the copy holds, but the files people shared while the
expert worked (saved in the workspace's threadbot-shared/, not in the copy) stay."""

from __future__ import annotations

from pathlib import Path

from core.files.saving import SHARED_DIR
from core.tools.workspaces import GitWorkspaces


async def test_the_copy_comes_back_and_the_files_people_shared_meanwhile_stay(
    tmp_path: Path,
) -> None:
    workspace, fork = tmp_path / "w", tmp_path / "w-delegation-1"
    workspace.mkdir()
    (workspace / "a.txt").write_text("before\n")
    (workspace / "gone.txt").write_text("the expert removed me\n")
    (workspace / SHARED_DIR).mkdir()
    (workspace / SHARED_DIR / "old.log").write_text("shared before the fork\n")
    workspaces = GitWorkspaces()
    await workspaces.fork(workspace, fork, None)

    (fork / "a.txt").write_text("fixed by the expert\n")
    (fork / "gone.txt").unlink()
    (fork / "new.txt").write_text("made by the expert\n")
    (workspace / SHARED_DIR / "bob.log").write_text("shared while the expert worked\n")

    await workspaces.merge(workspace, fork, None, keep=(SHARED_DIR,))

    assert (workspace / "a.txt").read_text() == "fixed by the expert\n"
    assert (workspace / "new.txt").read_text() == "made by the expert\n"
    assert not (workspace / "gone.txt").exists()
    assert (workspace / SHARED_DIR / "bob.log").read_text() == "shared while the expert worked\n"
    assert (workspace / SHARED_DIR / "old.log").read_text() == "shared before the fork\n"


async def test_without_keep_the_workspace_holds_exactly_the_copy(tmp_path: Path) -> None:
    workspace, fork = tmp_path / "w", tmp_path / "w-delegation-1"
    workspace.mkdir()
    (workspace / "a.txt").write_text("a\n")
    workspaces = GitWorkspaces()
    await workspaces.fork(workspace, fork, None)
    (workspace / SHARED_DIR).mkdir()
    (workspace / SHARED_DIR / "late.log").write_text("late\n")
    await workspaces.merge(workspace, fork, None)
    assert sorted(p.name for p in workspace.iterdir()) == ["a.txt"]
