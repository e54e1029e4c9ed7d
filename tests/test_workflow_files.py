"""Workflow files (issue 29): ``threadbot workflows check`` refuses each kind of invalid
file with its file, line and reason, and passes a valid one (a sub-workflow, a guard);
``threadbot workflows show`` prints a workflow as text and as a Mermaid diagram; a bot
whose ``workflows_folder`` holds a bad file does not start (exit 2).

The kinds of invalid file run :func:`bot.workflow_commands.check_files` in the test's
process (what the command runs, read from what it prints); the command itself runs as
a process for a valid file, a bad one, ``show`` and a bot's start.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.app import build
from bot.settings import Settings
from bot.workflow_commands import bot_tools, check_files, show_workflow
from core.workflows.checks import GROUPS, Known
from core.workflows.loading import (
    Source,
    WorkflowErrors,
    load,
    shipped_library,
    shipped_sources,
)
from core.workflows.render import describe, mermaid
from tests.cli_harness import threadbot

VALID = '''\
# Plan, approve, change; test until it passes (3 rounds); then the shipped validate-fix.
[workflow]
name = "review"
description = "Plan, approve, change, test until it passes, validate."
start = "planning"
error = "failed"

[workflow.context]
strategy = "task_list"

[states.planning]
kind = "agent"
role = "planner"
tools = ["read_only", "propose_plan", "ask_user", "finish"]
instructions = """
Propose a plan. A file you may be asked about looks like this:
[states.planning.on]
finished = "elsewhere"
"""

[states.planning.on]
plan_proposed = "approval"
finished = "answered"

[states.approval]
kind = "human"
ask = "plan"

[states.approval.on]
approved = "executing"
rejected = "planning"

[states.executing]
kind = "agent"
tools = ["all"]
mutating = true

[states.executing.on]
finished = { if = "changed_files", then = "testing", else = "answered" }

[states.testing]
kind = "action"
command = "make test"
max_visits = 3

[states.testing.on]
passed = "validate"
failed = "fixing"
cap = "failed"

[states.fixing]
kind = "agent"
tools = ["all"]
mutating = true

[states.fixing.on]
finished = "testing"

[states.validate]
kind = "workflow"
workflow = "validate-fix"

[states.validate.on]
passed = "answered"
still_failing = "failed"
not_run = "answered"

[states.answered]
kind = "end"

[states.answered.on]
new_message = "planning"

[states.failed]
kind = "end"
status = "failed"
message = "It did not work out."
'''
"""A valid workflow file: a guard, a capped loop, a shipped sub-workflow, an error state,
and instructions that quote TOML (text, not tables)."""


def line(text: str, needle: str) -> int:
    """The line (from 1) of the one line of ``text`` that holds ``needle``."""
    found = [n for n, each in enumerate(text.splitlines(), start=1) if needle in each]
    assert len(found) == 1, (needle, found)
    return found[0]


def edited(*changes: tuple[str, str]) -> str:
    """:data:`VALID` with each ``(old, new)`` made, ``old`` found once."""
    text = VALID
    for old, new in changes:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    return text


def checked(capsys: pytest.CaptureFixture[str], *paths: Path) -> tuple[int, list[str], list[str]]:
    """``threadbot workflows check PATHS``: the exit code, stdout's and stderr's lines."""
    code = check_files(paths)
    out, err = capsys.readouterr()
    return code, out.splitlines(), err.splitlines()


TOOLS = ", ".join(sorted(bot_tools() | GROUPS))

CASES: list[tuple[str, str, list[tuple[str, str]]]] = [
    (
        "TOML that does not parse",
        edited(('start = "planning"', "start = planning")),
        [("start = planning", "TOML does not parse: Invalid value (at line 5, column 9)")],
    ),
    (
        "a transition to an unknown state",
        edited(('rejected = "planning"', 'rejected = "planing"')),
        [('rejected = "planing"', "unknown state 'planing'")],
    ),
    (
        "a transition to an unknown state, in an inline table",
        edited(
            (
                '[states.planning.on]\nplan_proposed = "approval"\nfinished = "answered"\n',
                'on = { plan_proposed = "approval", finished = "answerd" }\n',
            )
        ),
        [("on = { plan_proposed", "unknown state 'answerd'")],
    ),
    (
        "an unreachable state",
        VALID + '\n[states.orphan]\nkind = "end"\n',
        [("[states.orphan]", "state 'orphan' cannot be reached from the start")],
    ),
    (
        "a missing transition",
        edited(('rejected = "planning"\n', "")),
        [("[states.approval]", "missing transition for outcome 'rejected'")],
    ),
    (
        "a loop without a cap",
        edited(("max_visits = 3\n", ""), ('cap = "failed"\n', "")),
        [
            (
                "[states.testing]",
                "state 'testing' is in a loop without a cap (give a state of the loop "
                "max_visits and a cap transition)",
            ),
            (
                "[states.fixing]",
                "state 'fixing' is in a loop without a cap (give a state of the loop "
                "max_visits and a cap transition)",
            ),
        ],
    ),
    (
        "an unknown role",
        edited(('role = "planner"', 'role = "reviewer"')),
        [
            (
                'role = "reviewer"',
                "states.planning.role: unknown role 'reviewer'; "
                "known: 'planner', 'executor' or 'expert'",
            )
        ],
    ),
    (
        "an unknown tool",
        edited(('"ask_user", "finish"]', '"ask_user", "finish", "deploy"]')),
        [('"deploy"]', f"unknown tool 'deploy'; known: {TOOLS}")],
    ),
    (
        "an unknown context strategy of a state",
        edited(('role = "planner"\n', 'role = "planner"\ncontext = "summary"\n')),
        [
            (
                'context = "summary"',
                "unknown context strategy 'summary'; known: flat, task_list, task_tree, none",
            )
        ],
    ),
    (
        "an unknown context strategy of the workflow",
        edited(('strategy = "task_list"', 'strategy = "summary"')),
        [
            (
                'strategy = "summary"',
                "unknown context strategy 'summary'; known: flat, task_list, task_tree, none",
            )
        ],
    ),
    (
        "an unknown condition",
        edited(('if = "changed_files"', 'if = "tests_pass"')),
        [
            (
                'if = "tests_pass"',
                "unknown condition 'tests_pass'; known: asked_people, changed_files",
            )
        ],
    ),
    (
        "an unknown sub-workflow",
        edited(('workflow = "validate-fix"', 'workflow = "validate"')),
        [
            (
                'workflow = "validate"',
                "unknown workflow 'validate'; known: chat, default, review, validate-fix",
            )
        ],
    ),
    (
        "a state that changes things reachable without a person's approval",
        edited(('finished = "answered"\n', 'finished = "cleanup"\n'))
        + '\n[states.cleanup]\nkind = "action"\ncommand = "rm -rf build"\n\n'
        '[states.cleanup.on]\npassed = "answered"\nfailed = "answered"\n',
        [
            (
                "[states.cleanup]",
                "state 'cleanup' changes things but can be reached without a person's "
                "approval (put a human step that approves a plan before it)",
            )
        ],
    ),
    (
        "changes after a plan is rejected",
        edited(('rejected = "planning"', 'rejected = "fixing"')),
        [
            (
                "[states.testing]",
                "state 'testing' changes things but can be reached without a person's "
                "approval (put a human step that approves a plan before it)",
            ),
            (
                "mutating = true\n\n[states.fixing.on]",
                "state 'fixing' changes things but can be reached without a person's "
                "approval (put a human step that approves a plan before it)",
            ),
        ],
    ),
    (
        "a cap on a sub-workflow state",
        edited(
            ('workflow = "validate-fix"\n', 'workflow = "validate-fix"\nmax_visits = 2\n'),
            ('not_run = "answered"\n', 'not_run = "answered"\ncap = "failed"\n'),
        ),
        [
            (
                "max_visits = 2",
                "a sub-workflow state has no max_visits (its states take its place): give it "
                "to another state of the loop, or to one inside the sub-workflow",
            )
        ],
    ),
    (
        "a workflow's name with odd characters",
        edited(('name = "review"', 'name = "Review it!"')),
        [
            (
                'name = "Review it!"',
                "workflow.name: a workflow's name is lowercase letters, digits, - and _ "
                "(at most 63), starting with a letter or a digit",
            )
        ],
    ),
    (
        "a state's name with odd characters",
        edited(('not_run = "answered"', 'not_run = "not `run`"'))
        + '\n[states."not `run`"]\nkind = "end"\n',
        [
            (
                '[states."not `run`"]',
                "state 'not `run`': a state's name holds letters, digits, - and _ only "
                "(at most 63), starting with a letter or a digit",
            )
        ],
    ),
    (
        "a choice whose options are twice there, an outcome's name or a number",
        edited(
            ('rejected = "planning"', 'rejected = "choosing"'),
        )
        + '\n[states.choosing]\nkind = "human"\nask = "choose"\nprompt = "How?"\n'
        'options = ["again", "Again", "timeout", "2"]\n'
        'on = { again = "planning", Again = "planning", timeout = "answered", 2 = "answered" }\n',
        [
            (
                'options = ["again"',
                "option 'Again' is there twice (an answer names it in any case)",
            ),
            (
                'options = ["again"',
                "option 'timeout' is the name of an outcome of its own: call it otherwise",
            ),
            ('options = ["again"', "option '2' is a number: an answer's number picks an option"),
        ],
    ),
    (
        "a choice of ten options",
        edited(
            ('rejected = "planning"', 'rejected = "choosing"'),
        )
        + '\n[states.choosing]\nkind = "human"\nask = "choose"\nprompt = "Which?"\n'
        "options = [" + ", ".join(f'"o{n}"' for n in range(10)) + "]\n"
        "on = { " + ", ".join(f'o{n} = "planning"' for n in range(10)) + " }\n",
        [
            (
                'options = ["o0"',
                "a choice has at most 9 options (a number reaction each, 1️⃣-9️⃣)",
            ),
        ],
    ),
    (
        "an action that calls the model's own tool",
        edited(('command = "make test"', 'tool = "finish"\nargs = { answer = "done" }')),
        [
            (
                'tool = "finish"',
                "'finish' is the model's own tool, not an action's (a human step asks the "
                "people, an end answers)",
            )
        ],
    ),
    (
        "a key no state has",
        edited(('command = "make test"\n', 'command = "make test"\nretries = 2\n')),
        [
            (
                "retries = 2",
                "states.testing.retries: 'retries' is not a key a workflow file has here",
            )
        ],
    ),
]


@pytest.mark.parametrize(("text", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_workflows_check_refuses_each_kind_of_invalid_file_with_its_line_and_reason(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    text: str,
    expected: list[tuple[str, str]],
) -> None:
    path = tmp_path / "review.toml"
    path.write_text(text)
    code, out, err = checked(capsys, path)
    assert code == 2
    assert out == []
    wanted = []
    for needle, reason in expected:
        if "\n" in needle:  # a line after a given one: the first of them
            at = text.index(needle)
            number = text.count("\n", 0, at) + 1
        else:
            number = line(text, needle)
        wanted.append(f"{path}:{number}: {reason}")
    assert err == wanted


def test_a_name_two_files_give_is_refused_in_the_second(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second, third = (tmp_path / name for name in ("a.toml", "b.toml", "c.toml"))
    first.write_text(VALID)
    second.write_text(VALID)
    third.write_text(edited(('name = "review"', 'name = "default"')))
    code, out, err = checked(capsys, first, second, third)
    assert (code, out) == (2, [])
    at = line(VALID, 'name = "review"')
    assert err == [
        f"{second}:{at}: workflow name 'review' is taken (by {first})",
        f"{third}:{at}: workflow name 'default' is taken (by shipped:default)",
    ]


def test_a_file_that_cannot_be_read_is_named_with_the_others_problems(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(edited(('rejected = "planning"', 'rejected = "planing"')))
    code, _out, err = checked(capsys, tmp_path / "missing.toml", bad)
    assert code == 2
    assert err == [
        f"{tmp_path / 'missing.toml'}: cannot read: no such file or directory",
        f"{bad}:{line(VALID, 'rejected = ')}: unknown state 'planing'",
    ]


def test_a_workflow_that_runs_itself_is_refused_at_its_sub_workflow_state(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def runs(name: str, other: str) -> Path:
        path = tmp_path / f"{name}.toml"
        path.write_text(
            f'[workflow]\nname = "{name}"\nstart = "run"\n\n[states.run]\nkind = "workflow"\n'
            f'workflow = "{other}"\n\n[states.run.on]\ndone = "done"\n\n'
            '[states.done]\nkind = "end"\n'
        )
        return path

    one, two = runs("one", "two"), runs("two", "one")
    code, _out, err = checked(capsys, one, two)
    assert code == 2
    assert err == [
        f"{one}:7: workflow one -> two -> one runs itself",
        f"{two}:7: workflow two -> one -> two runs itself",
    ]


def test_a_valid_file_with_a_sub_workflow_and_a_guard_passes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "review.toml"
    path.write_text(VALID)
    assert checked(capsys, path) == (0, [f"{path}: ok (workflow review, 8 states)"], [])


def test_the_command_exits_2_with_the_problems_or_0_with_each_file_ok(tmp_path: Path) -> None:
    (tmp_path / "review.toml").write_text(VALID)
    (tmp_path / "bad.toml").write_text(
        edited(('name = "review"', 'name = "bad"'), ('if = "changed_files"', 'if = "tests_pass"'))
    )
    good = threadbot(tmp_path, "workflows", "check", "review.toml")
    assert (good.returncode, good.stdout, good.stderr) == (
        0,
        "review.toml: ok (workflow review, 8 states)\n",
        "",
    )
    bad = threadbot(tmp_path, "workflows", "check", "review.toml", "bad.toml")
    assert (bad.returncode, bad.stdout) == (2, "")
    at = line(VALID, 'if = "changed_files"')
    assert bad.stderr == (
        f"bad.toml:{at}: unknown condition 'tests_pass'; known: asked_people, changed_files\n"
    )


VALIDATE_FIX_MERMAID = """\
stateDiagram-v2
    approval: human
    check: action
    fix: agent
    passed: end
    still_failing: end
    not_run: end
    [*] --> approval
    approval --> check: approved
    approval --> not_run: rejected
    check --> passed: passed
    check --> fix: failed
    fix --> check: finished
    fix --> still_failing: cap
    passed --> [*]
    still_failing --> [*]
    not_run --> [*]
"""


def test_show_prints_validate_fix_as_mermaid_and_default_as_text(tmp_path: Path) -> None:
    drawn = threadbot(tmp_path, "workflows", "show", "validate-fix", "--mermaid")
    assert (drawn.returncode, drawn.stdout, drawn.stderr) == (0, VALIDATE_FIX_MERMAID, "")

    told = threadbot(tmp_path, "workflows", "show", "default")
    assert told.returncode == 0, told.stderr
    assert told.stdout.startswith(
        "workflow default: Plan, have a person approve the plan, carry it out, answer.\n"
        "starts at: planning\n"
    )
    for block in (
        "planning (agent): Understand the request and propose a plan; ask when something is "
        "unclear.\n  role: planner\n  tools: read_only, propose_plan, ask_user, finish\n",
        "  plan_proposed -> approval\n  finished -> answered\n",
        "approval (human): The plan waits for a person to approve or reject it.\n"
        "  asks: plan (a person approves the plan the model proposes)\n",
        "  approved -> executing\n  rejected -> planning\n",
        "executing (agent): Carry out the approved plan with the tools, reporting progress.\n",
        "  mutating: yes (the plan is approved)\n  finished -> answered\n",
        "answered (end): The answer is in the thread; a new message starts over at planning.\n"
        "  status: done\n  new_message -> planning\n",
        "conditions a guard may name:\n"
        "  asked_people: the run asked the people a question since the request\n"
        "  changed_files: a tool call that changes things succeeded since the request\n",
    ):
        assert block in told.stdout


def test_a_folder_s_workflow_is_shown_with_its_sub_workflow_inlined_its_guard_and_error() -> None:
    workflow = load([*shipped_sources(), Source("review.toml", VALID)])["review"]
    text = describe(workflow)
    assert "  finished -> if changed_files then testing else answered\n" in text
    assert "error state: failed (where a state's error has no transition of its own)\n" in text
    assert (
        "testing (action)\n  command: make test\n  max_visits: 3 (entered once more: cap)\n"
        "  passed -> validate/approval\n  failed -> fixing\n  cap -> failed\n"
    ) in text
    assert "validate/check (action): Run the check command.\n" in text
    assert "  passed -> answered\n  failed -> validate/fix\n" in text
    assert "  finished -> validate/check\n  cap -> failed\n" in text
    assert (
        mermaid(workflow)
        == """\
stateDiagram-v2
    planning: agent
    approval: human
    executing: agent
    testing: action
    fixing: agent
    state "validate/approval" as validate_approval
    validate_approval: human
    state "validate/check" as validate_check
    validate_check: action
    state "validate/fix" as validate_fix
    validate_fix: agent
    answered: end
    failed: end
    [*] --> planning
    planning --> approval: plan_proposed
    planning --> answered: finished
    approval --> executing: approved
    approval --> planning: rejected
    state executing_finished <<choice>>
    executing --> executing_finished: finished
    executing_finished --> testing: if changed_files
    executing_finished --> answered: else
    testing --> validate_approval: passed
    testing --> fixing: failed
    testing --> failed: cap
    fixing --> testing: finished
    validate_approval --> validate_check: approved
    validate_approval --> answered: rejected
    validate_check --> answered: passed
    validate_check --> validate_fix: failed
    validate_fix --> validate_check: finished
    validate_fix --> failed: cap
    answered --> planning: new_message
    answered --> [*]
    failed --> [*]
    note left of failed : error from any state that names none leads here
"""
    )


def test_show_of_a_name_there_is_not_lists_the_known_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "flows").mkdir()
    (tmp_path / "flows" / "review.toml").write_text(VALID)
    settings = Settings(workflows_folder=tmp_path / "flows")
    assert show_workflow(settings, "nightly") == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (
        "threadbot workflows show: no workflow called 'nightly'; "
        "known: default, chat, validate-fix, review\n"
    )
    assert show_workflow(settings, "review") == 0
    assert capsys.readouterr().out.startswith("workflow review: Plan, approve, change")


def test_the_shipped_workflows_load_with_the_bot_s_tools() -> None:
    checked = load(shipped_sources(), known=Known(tools=bot_tools()))
    assert checked.names == shipped_library().names == ("default", "chat", "validate-fix")


def test_a_bot_whose_workflows_folder_holds_a_bad_file_does_not_start(tmp_path: Path) -> None:
    folder = tmp_path / "flows"
    folder.mkdir()
    (folder / "good.toml").write_text(edited(('name = "review"', 'name = "good"')))
    (folder / "review.toml").write_text(edited(('role = "planner"', 'role = "reviewer"')))
    started = threadbot(
        tmp_path, "console", env={"THREADBOT_WORKFLOWS_FOLDER": "flows"}, stdin="hello\n"
    )
    assert started.returncode == 2
    at = line(VALID, 'role = "planner"')
    assert started.stderr == (
        "threadbot: bad workflow files:\n"
        f"  flows/review.toml:{at}: states.planning.role: unknown role 'reviewer'; "
        "known: 'planner', 'executor' or 'expert'\n"
    )
    assert not (tmp_path / ".threadbot" / "threadbot.db").exists()


async def test_build_refuses_a_folder_that_does_not_load(
    settings: Settings, tmp_path: Path
) -> None:
    folder = tmp_path / "flows"
    folder.mkdir()
    (folder / "review.toml").write_text(edited(('rejected = "planning"', 'rejected = "planing"')))
    with pytest.raises(WorkflowErrors) as raised:
        await build(settings.model_copy(update={"workflows_folder": folder}))
    assert [str(e) for e in raised.value.errors] == [
        f"{folder / 'review.toml'}:{line(VALID, 'rejected = ')}: unknown state 'planing'"
    ]


def test_mermaid_draws_a_name_that_is_not_an_id_under_one_and_escapes_labels() -> None:
    text = """\
[workflow]
name = "odd"
start = "ask"

[states.ask]
kind = "human"
ask = "choose"
prompt = "Which?"
options = ["yes; please", "no: thanks #1"]

[states.ask.on]
"yes; please" = "fix-it"
"no: thanks #1" = "end"

[states.fix-it]
kind = "wait"
duration = "1h"

[states.fix-it.on]
timeout = "end"

[states.end]
kind = "end"
"""
    assert (
        mermaid(load([Source("odd.toml", text)])["odd"])
        == """\
stateDiagram-v2
    ask: human
    state "fix-it" as fix_it
    fix_it: wait
    state "end" as end_2
    end_2: end
    [*] --> ask
    ask --> fix_it: yes#59; please
    ask --> end_2: no#58; thanks #35;1
    fix_it --> end_2: timeout
    end_2 --> [*]
"""
    )


def test_a_sub_workflow_leads_into_the_next_and_keeps_its_error_state() -> None:
    guarded = """\
[workflow]
name = "guarded"
start = "look"
error = "oops"

[states.look]
kind = "agent"
tools = ["read_only", "finish"]

[states.look.on]
finished = "done"

[states.oops]
kind = "end"
status = "failed"

[states.done]
kind = "end"
"""
    chain = """\
[workflow]
name = "chain"
start = "first"

[states.first]
kind = "workflow"
workflow = "validate-fix"

[states.first.on]
passed = "second"
still_failing = "failed"
not_run = "failed"

[states.second]
kind = "workflow"
workflow = "guarded"

[states.second.on]
done = "answered"
oops = "failed"

[states.answered]
kind = "end"

[states.failed]
kind = "end"
status = "failed"
"""
    sources = [*shipped_sources(), Source("guarded.toml", guarded), Source("chain.toml", chain)]
    workflow = load(sources)["chain"]
    assert workflow.start == "first/approval"
    assert list(workflow.states) == [
        "first/approval",
        "first/check",
        "first/fix",
        "second/look",
        "answered",
        "failed",
    ]
    assert workflow.states["first/check"].on == {"passed": "second/look", "failed": "first/fix"}
    assert workflow.states["first/fix"].on == {"finished": "first/check", "cap": "failed"}
    assert workflow.states["second/look"].on == {"finished": "answered", "error": "failed"}
