"""The built-in demo, one step per process (issue 10, acceptance 2).

A new user tries ``threadbot run`` with no API key: mentions the bot, quits;
approves the plan in a second process; answers the question in a third. Each
process goes on from the database, and the demo model's tool ids come from the
history, so the third process runs its tools (no record of an earlier process
is taken for theirs) and answers from their results: the file it names is in
the workspace, as big as it says. When a tool does not run, it says so.
"""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

from tests import forkserver

ROOT = Path(__file__).resolve().parents[1]


def _run(folder: Path, stdin: str) -> subprocess.CompletedProcess[str]:
    """``threadbot run`` (the console, the demo model) with piped input, in ``folder``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "THREADBOT_"))}
    result = forkserver.run(
        [sys.executable, "-m", "bot", "run"],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=folder,
        env=env | {"PYTHONPATH": str(ROOT)},
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "built-in demo model" in result.stdout
    return result


def _query(folder: Path, statement: str) -> list[tuple[object, ...]]:
    with sqlite3.connect(folder / ".threadbot" / "threadbot.db") as db:
        return db.execute(statement).fetchall()


def _workspace(folder: Path) -> Path:
    ((conversation_id,),) = _query(folder, "select id from conversations")
    return folder / ".threadbot" / "workspaces" / str(conversation_id)


def test_mention_approve_and_answer_in_three_processes(tmp_path: Path) -> None:
    mention = _run(tmp_path, "summarise the release notes\n")
    assert "[2] ↳1 threadbot: 📋 Plan (v1)" in mention.stdout

    approve = _run(tmp_path, "+✅ 2\n")
    assert "❓ Should the summary be short or detailed?" in approve.stdout
    assert not (_workspace(tmp_path) / "summary.md").exists()

    answer = _run(tmp_path, ">1 short\n")
    (done,) = re.findall(r"✅ (Done\. [^\n]*)", answer.stdout)
    named = re.search(r"I wrote (\d+) bytes to (\S+) in", done)
    assert named, done
    written = _workspace(tmp_path) / named[2]
    assert named[2] == "summary.md" and written.is_file()
    assert len(written.read_bytes()) == int(named[1])
    assert f"`wc -c` counts {named[1]} summary.md" in done
    text = written.read_text()
    assert "summarise the release notes" in text and "short" in text

    calls = _query(tmp_path, "select tool_use_id, name, state from tool_calls")
    assert [name for _, name, _ in calls].count("write_file") == 1
    assert {state for _, _, state in calls} == {"done"}
    results = _query(
        tmp_path,
        "select json_extract(body, '$.tool_use_id') from journal where kind = 'tool_result'",
    )
    assert sorted(r for (r,) in results) == sorted(i for i, _, _ in calls)  # one result each


def test_the_demo_does_not_claim_a_file_it_could_not_write(tmp_path: Path) -> None:
    (tmp_path / "threadbot.toml").write_text(
        '[[policy.rules]]\ntool = "write_file"\ndecision = "deny"\n'
    )

    result = _run(tmp_path, "summarise the release notes\n+✅ 2\n>1 short\n")

    (answer,) = re.findall(r"✅ ([^\n]*)", result.stdout.split("short\n", 1)[1])
    assert answer.startswith("I could not write summary.md:"), answer
    assert "Done" not in answer
    assert not (_workspace(tmp_path) / "summary.md").exists()


def test_a_removed_console_state_file_is_said_and_the_next_message_is_not_lost(
    tmp_path: Path,
) -> None:
    _run(tmp_path, "summarise the release notes\n")
    (tmp_path / ".threadbot" / "console.jsonl").unlink()  # the database stays

    again = _run(tmp_path, "tidy up the changelog\n")

    assert (
        "threadbot: the console's state file .threadbot/console.jsonl was missing, but the "
        "database .threadbot/threadbot.db was not: messages are numbered from [1] again"
    ) in again.stdout
    assert "[1] you: tidy up the changelog" in again.stdout
    assert "[2] ↳1 threadbot: 📋 Plan (v1)" in again.stdout  # taken, not dropped as seen
    assert len(_query(tmp_path, "select id from conversations")) == 2


def test_a_stopped_demo_started_again_plans_again_and_runs_no_refused_tool(
    tmp_path: Path,
) -> None:
    stopped = _run(tmp_path, "summarise the release notes\n+✅ 2\n/stop 1\n/as bob\n>1 go on\n")
    assert "❓ Should the summary be short or detailed?" in stopped.stdout
    assert "⏹ Stopped by you." in stopped.stdout
    assert "Only the requester or an approver can restart this, bob." in stopped.stdout
    assert _query(tmp_path, "select lifecycle from conversations") == [("cancelled",)]

    again = _run(tmp_path, ">1 go on\n")
    (plan,) = re.findall(r"\[(\d+)\] ↳1 threadbot: 📋 Plan \(v2\)", again.stdout)
    assert "1. Look at the workspace for: go on" in again.stdout
    assert _query(tmp_path, "select lifecycle, position from conversations") == [
        ("waiting", "approval")
    ]

    done = _run(tmp_path, f"+✅ {plan}\n>1 short\n")
    assert "✅ Done. I wrote" in done.stdout
    for result in (stopped, again, done):
        assert "was not run" not in result.stdout and "not available" not in result.stdout
    refused = _query(tmp_path, "select count(*) from tool_calls where state = 'denied'")
    assert refused == [(0,)]
