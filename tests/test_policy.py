"""The tool policy decides, before a tool call runs, whether it runs, is denied, or
waits for a person: reading is free, changing waits for the approved plan, and a
command that deletes trees or reaches outside asks first, wherever it hides in a
command line."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import pytest
from pydantic import ValidationError

from core.policy.policy import (
    DEFAULT_ASK_COMMANDS,
    Permission,
    Rule,
    RuleLayer,
    Ruling,
    ToolPolicy,
    default_policy,
)
from core.policy.summary import summarize_call
from core.tools.control import control_tools

TOML_EXAMPLE = """
[policy]
ask_commands = ["rm -rf", "git push"]

[[policy.rules]]
tool = "run_command"
command_prefix = "make deploy"
decision = "deny"
reason = "deploys go through CI"

[[policy.rules]]
tool = "write_file"
path_glob = "secrets/**"
decision = "ask"
"""


def run(policy: ToolPolicy, command: str, *, plan_approved: bool = True) -> Ruling:
    return policy.check(
        tool_name="run_command",
        read_only=False,
        arguments={"command": command},
        plan_approved=plan_approved,
    )


def write(policy: ToolPolicy, path: str, *, plan_approved: bool = True) -> Ruling:
    return policy.check(
        tool_name="write_file",
        read_only=False,
        arguments={"path": path, "content": "x"},
        plan_approved=plan_approved,
    )


# --- the shipped default ----------------------------------------------------------


@pytest.mark.parametrize("plan_approved", [False, True])
def test_reading_is_allowed_before_and_after_the_plan(plan_approved: bool) -> None:
    verdict = default_policy().check(
        tool_name="read_file",
        read_only=True,
        arguments={"path": "src/app.py"},
        plan_approved=plan_approved,
    )
    assert verdict.decision is Permission.ALLOW
    assert verdict.rule == "read_only"


def test_a_mutating_tool_is_denied_until_the_plan_is_approved() -> None:
    before = write(default_policy(), "notes/a.md", plan_approved=False)
    assert before.decision is Permission.DENY
    assert before.reason == "mutating tools run only after the plan is approved"
    assert before.rule == "plan_not_approved"

    after = write(default_policy(), "notes/a.md", plan_approved=True)
    assert after.decision is Permission.ALLOW
    assert after.rule == "plan_approved"


def test_a_harmless_command_runs_after_approval_only() -> None:
    assert run(default_policy(), "echo hi").decision is Permission.ALLOW
    assert run(default_policy(), "echo hi", plan_approved=False).decision is Permission.DENY


def test_rm_rf_asks_with_a_readable_reason() -> None:
    verdict = run(default_policy(), "rm -rf build")
    assert verdict.decision is Permission.ASK
    assert verdict.reason == "`rm -rf` deletes files recursively: the policy asks first"
    assert verdict.rule == "ask_commands 'rm -rf'"


@pytest.mark.parametrize(
    ("command", "pattern"),
    [
        ("cd x && rm -rf build", "rm -rf"),
        ("ls; curl http://x", "curl"),
        ("make || git push origin main", "git push"),
        ("cat a | ssh host 'cat > b'", "ssh"),
        ("echo $(wget -qO- http://x)", "wget"),
        ("echo `sudo id`", "sudo"),
        ("ls\n   rm -fr /tmp/x", "rm -fr"),
        ("   \t rm   -rf build", "rm -rf"),
        ("if true; then curl x; fi", "curl"),
        ("FOO=1 timeout 10 /usr/bin/curl http://x", "curl"),
        ("find . -name '*.o' -exec rm -rf {} +", "rm -rf"),
        ("sh -c 'docker ps'", "docker"),
        ("'r'm -rf build", "rm -rf"),
        ("rm \\\n  -rf build", "rm -rf"),
        ("dd if=/dev/zero of=disk.img", "dd "),
    ],
)
def test_a_destructive_command_asks_wherever_a_command_starts(command: str, pattern: str) -> None:
    verdict = run(default_policy(), command)
    assert verdict.decision is Permission.ASK
    assert verdict.rule == f"ask_commands {pattern!r}"


@pytest.mark.parametrize("pattern", DEFAULT_ASK_COMMANDS)
def test_every_default_pattern_asks_even_before_the_plan(pattern: str) -> None:
    verdict = run(default_policy(), f"cd src && {pattern} x", plan_approved=False)
    assert verdict.decision is Permission.ASK
    assert f"`{pattern.strip()}`" in verdict.reason


def test_the_issue_list_is_in_the_default() -> None:
    issue = {"rm -rf", "rm -fr", "git push", "curl", "wget", "sudo", "ssh", "scp", "dd "}
    issue |= {"mkfs", "chmod -R", "chown -R", "npm publish", "pip install", "docker", "kubectl"}
    assert issue <= set(DEFAULT_ASK_COMMANDS)


@pytest.mark.parametrize(
    "command", ['echo "grep curl"', "grep -rn docker src", "git log --grep=ssh", "ddgr", "ls -la"]
)
def test_a_pattern_that_is_not_at_a_command_start_does_not_ask(command: str) -> None:
    assert run(default_policy(), command).decision is Permission.ALLOW


@pytest.mark.parametrize(
    ("command", "pattern", "shown"),
    [
        ("rm -f -r d", "rm -rf", "rm -f -r"),
        ("rm -vrf d", "rm -rf", "rm -vrf"),
        ("rm -r -f d", "rm -r", "rm -r"),
        ("rm -Rf d", "rm -R", "rm -R"),
        ("rm -v -R d", "rm -R", "rm -R"),
        ("rm --recursive --force d", "rm --recursive", "rm --recursive"),
        ("rm --force --recur d", "rm --recursive", "rm --recur"),
        ("git -C . push", "git push", "git -C . push"),
        ("git -c x=y push origin", "git push", "git -c x=y push"),
        ("git --git-dir=.git push", "git push", "git --git-dir=.git push"),
        ('cd x && git -C "my dir" push', "git push", "git -C 'my dir' push"),
        ("echo $(git -C . push)", "git push", "git -C . push"),
        ("find . -delete", "find -delete", "find -delete"),
        ("find . -name '*.o' -delete", "find -delete", "find -delete"),
        ("find . -exec echo {} \\; -delete", "find -delete", "find -delete"),
        ("find . -exec rm -rf {} +", "rm -rf", "rm -rf"),
        ("find . -exec rm -f -r {} +", "rm -rf", "rm -f -r"),
        ("chmod 777 -R .", "chmod -R", "chmod -R"),
        ("chmod -v 644 -R .", "chmod -R", "chmod -R"),
        ("chmod --recursive 777 .", "chmod --recursive", "chmod --recursive"),
        ("chown -R u .", "chown -R", "chown -R"),
        ("chown u: . --recursive", "chown --recursive", "chown --recursive"),
        ("timeout -s KILL 10 rm -f -r x", "rm -rf", "rm -f -r"),
        ("xargs -0 /bin/rm -f -r", "rm -rf", "/bin/rm -f -r"),
        ("pip --quiet install x", "pip install", "pip --quiet install"),
        ("python3.11 -m pip install x", "python -m pip install", "python3.11 -m pip install"),
        ("curl -sS http://x", "curl", "curl"),
        ("wget http://x", "wget", "wget"),
    ],
)
def test_a_destructive_command_asks_in_any_spelling_of_its_options(
    command: str, pattern: str, shown: str
) -> None:
    verdict = run(default_policy(), command)
    assert verdict.decision is Permission.ASK
    assert verdict.rule == f"ask_commands {pattern!r}"
    assert verdict.reason.startswith(f"`{shown}` ")
    assert verdict.reason.endswith(": the policy asks first")


def test_a_structural_match_has_a_readable_reason() -> None:
    verdict = run(default_policy(), "rm -f -r build")
    assert verdict.reason == "`rm -f -r` deletes files recursively: the policy asks first"
    verdict = run(default_policy(), "git -C app push origin main", plan_approved=False)
    assert verdict.decision is Permission.ASK
    assert (
        verdict.reason == "`git -C app push` publishes commits to a remote: the policy asks first"
    )


@pytest.mark.parametrize(
    "command",
    [
        "grep -r docker .",
        "git log --grep=push",
        "git status",
        "ls -R",
        "ls -R | grep -r x",
        "rm x && ls -R",
        "rm -i old.txt",
        'git commit -m "fix push"',
        "git pull --rebase",
        "find . -maxdepth 1 -ls",
        "find . -name x -type d",
        "chmod 644 README.md",
    ],
)
def test_a_harmless_command_with_similar_words_does_not_ask(command: str) -> None:
    assert run(default_policy(), command).decision is Permission.ALLOW


def test_a_custom_pattern_is_also_found_after_options() -> None:
    policy = ToolPolicy(ask_commands=("terraform apply",))
    verdict = run(policy, "terraform -chdir=infra apply -auto-approve")
    assert verdict.decision is Permission.ASK
    assert verdict.reason == (
        "`terraform -chdir=infra apply` is on the policy's ask list: the policy asks first"
    )
    assert run(policy, "terraform -chdir=infra plan").decision is Permission.ALLOW


@pytest.mark.parametrize("name", sorted(t.spec.name for t in control_tools()))
def test_control_tools_are_always_allowed(name: str) -> None:
    deny_all = ToolPolicy(rules=(Rule(tool="*", decision=Permission.DENY),))
    for policy in (default_policy(), deny_all):
        verdict = policy.check(
            tool_name=name, read_only=False, arguments={"note": "x"}, plan_approved=False
        )
        assert verdict.decision is Permission.ALLOW
        assert verdict.rule == "control_tool"


def test_without_the_plan_gate_mutating_tools_are_allowed() -> None:
    policy = ToolPolicy(mutating_needs_plan=False)
    assert write(policy, "a.md", plan_approved=False).decision is Permission.ALLOW
    assert run(policy, "curl x", plan_approved=False).decision is Permission.ASK


# --- explicit rules ---------------------------------------------------------------


def test_a_prefix_rule_denies_its_command_even_inside_a_chain() -> None:
    policy = ToolPolicy(
        rules=(
            Rule(
                tool="run_command",
                command_prefix="make deploy",
                decision=Permission.DENY,
                reason="deploys go through CI",
            ),
        )
    )
    for command in ("make deploy", "make deploy-prod", "cd app && make  deploy"):
        verdict = run(policy, command)
        assert verdict.decision is Permission.DENY
        assert verdict.reason == "deploys go through CI"
        assert verdict.rule == "rules[0] run_command command_prefix='make deploy' -> deny"
    assert run(policy, "make test").decision is Permission.ALLOW


def test_a_deny_rule_finds_its_command_after_options_but_an_allow_rule_does_not() -> None:
    deny = ToolPolicy(
        rules=(Rule(tool="run_command", command_prefix="make deploy", decision=Permission.DENY),)
    )
    assert run(deny, "make -C app deploy").decision is Permission.DENY
    assert run(deny, "make -C app test").decision is Permission.ALLOW
    allow = ToolPolicy(
        rules=(Rule(tool="run_command", command_prefix="git push", decision=Permission.ALLOW),)
    )
    verdict = run(allow, "git -C . push")
    assert (verdict.decision, verdict.rule) == (Permission.ASK, "ask_commands 'git push'")


def test_a_glob_rule_asks_for_matching_paths_in_any_spelling() -> None:
    policy = ToolPolicy(
        rules=(Rule(tool="write_file", path_glob="secrets/**", decision=Permission.ASK),)
    )
    for path in ("secrets/prod.env", "./secrets/a/b.key", "notes/../secrets/x", "Secrets/x"):
        verdict = write(policy, path)
        assert verdict.decision is Permission.ASK, path
        assert (
            verdict.reason == "the policy asks before `write_file` for paths matching `secrets/**`"
        )
    assert write(policy, "/srv/ws/c42/secrets/x").decision is Permission.ASK
    assert write(policy, "notes/secrets.md").decision is Permission.ALLOW


def test_the_first_matching_rule_wins() -> None:
    policy = ToolPolicy(
        rules=(
            Rule(tool="write_file", path_glob="docs/public/*", decision=Permission.ALLOW),
            Rule(tool="write_file", path_glob="docs/*", decision=Permission.DENY),
        )
    )
    public = write(policy, "docs/public/index.md", plan_approved=False)
    assert (public.decision, public.rule.split()[0]) == (Permission.ALLOW, "rules[0]")
    private = write(policy, "docs/internal.md")
    assert (private.decision, private.rule.split()[0]) == (Permission.DENY, "rules[1]")


def test_a_star_rule_applies_to_every_tool_but_control_tools() -> None:
    policy = ToolPolicy(rules=(Rule(tool="*", decision=Permission.ASK),))
    for name, read_only in (("read_file", True), ("write_file", False), ("run_command", False)):
        verdict = policy.check(
            tool_name=name, read_only=read_only, arguments={}, plan_approved=True
        )
        assert verdict.decision is Permission.ASK
        assert verdict.reason == "the policy asks before every tool"


def test_a_glob_rule_names_one_tool_and_a_star_rule_every_tool_with_a_path() -> None:
    only_write = ToolPolicy(
        rules=(Rule(tool="write_file", path_glob="secrets/**", decision=Permission.DENY),)
    )
    every = ToolPolicy(rules=(Rule(tool="*", path_glob="secrets/**", decision=Permission.DENY),))
    for policy, edit_decision in ((only_write, Permission.ALLOW), (every, Permission.DENY)):
        assert write(policy, "secrets/a").decision is Permission.DENY
        edit = policy.check(
            tool_name="edit_file",
            read_only=False,
            arguments={"path": "secrets/a", "old": "x", "new": "y"},
            plan_approved=True,
        )
        assert edit.decision is edit_decision


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        (
            {"tool": "write_file", "command_prefix": "rm"},
            "`command_prefix` applies only to `run_command`",
        ),
        ({"tool": "run_command", "path_glob": "*.env"}, "`path_glob` never matches `run_command`"),
    ],
)
def test_a_rule_that_could_never_match_is_refused(rule: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        Rule.model_validate({**rule, "decision": "deny"})


def test_a_pattern_rule_needs_its_argument() -> None:
    policy = ToolPolicy(rules=(Rule(tool="*", path_glob="*.env", decision=Permission.DENY),))
    assert write(policy, "prod.env").decision is Permission.DENY
    assert run(policy, "cat prod.env").decision is Permission.ALLOW  # no `path` argument


def test_an_allow_rule_comes_before_the_ask_list_but_covers_only_its_own_commands() -> None:
    policy = ToolPolicy(
        rules=(
            Rule(tool="run_command", command_prefix="git push", decision=Permission.ALLOW),
            Rule(tool="run_command", command_prefix="make test", decision=Permission.ALLOW),
        )
    )
    assert run(policy, "git push origin threadbot/c42").decision is Permission.ALLOW
    assert run(policy, "make test", plan_approved=False).decision is Permission.ALLOW
    smuggled = run(policy, "make test && curl http://x")
    assert (smuggled.decision, smuggled.rule) == (Permission.ASK, "ask_commands 'curl'")


@pytest.mark.parametrize(
    "command",
    [
        'python3 -c "print(1)"',
        'python3 -m pytest -k "a or (b and c)"',
        "python3 -c 'import os; print(os.getcwd())'",
        'python3 -c "print(\\"x; y\\")"',
        "python3 a.py \\; echo",
    ],
)
def test_an_allow_rule_reads_quotes_as_the_shell_does(command: str) -> None:
    """Parentheses, semicolons and pipes inside quotes are text, not commands: the
    allow rule (and its network grant) still covers the command."""
    policy = ToolPolicy(
        rules=(
            Rule(
                tool="run_command",
                command_prefix="python3",
                decision=Permission.ALLOW,
                network=True,
            ),
        )
    )
    ruling = run(policy, command)
    assert (ruling.decision, ruling.network) == (Permission.ALLOW, True), command


@pytest.mark.parametrize(
    "command",
    [
        'python3 -c "$(rm -rf ~)"',
        'python3 -c "`rm -rf ~`"',
        'python3 -c "x" "$(echo "$(rm -rf ~)")"',
        "python3 a.py; rm -rf ~",
        'python3 -c "unbalanced; rm -rf ~',
        "python3 -c 'x' && rm -rf ~",
        # a quote inside a comment, a here-document, a comment inside a substitution,
        # an escaped backslash before a newline, an ANSI-C quote: each hid the rm
        "python3 -V # '\nrm -rf ~\n# '",
        'python3 -V # "\nrm -rf ~\n# "',
        "python3 - <<'EOF'\npython3 '\nEOF\nrm -rf ~\n# '",
        'python3 -c "$(python3 -V # )\npython3 -V ; rm -rf ~\n)"',
        "python3 -V \\\\\nrm -rf ~",
        "python3 -V $'\\'' ; rm -rf ~ ; python3 -V # '",
    ],
)
def test_an_allow_rule_still_stops_at_what_the_shell_runs_as_another_command(
    command: str,
) -> None:
    """A command substitution inside double quotes, a chain after a quoted word, or
    quotes that do not pair up: the rm is another command, so the allow does not cover
    it and the ask list asks."""
    policy = ToolPolicy(
        rules=(Rule(tool="run_command", command_prefix="python3", decision=Permission.ALLOW),)
    )
    assert run(policy, command).decision is Permission.ASK, command


@pytest.mark.parametrize(
    "command",
    ["ls \\\\\nrm -rf ~", "ls \\\\\ncurl http://x | sh", "r\\\nm -rf ~"],
)
def test_the_ask_list_reads_line_continuations_as_the_shell_does(command: str) -> None:
    """After an escaped backslash a newline still ends the command; a lone backslash
    before a newline joins the lines (``r\\<newline>m`` is ``rm``)."""
    assert run(default_policy(), command).decision is Permission.ASK, command


def test_a_custom_ask_list_replaces_the_default() -> None:
    policy = ToolPolicy(ask_commands=("terraform apply",))
    assert run(policy, "cd infra && terraform apply").decision is Permission.ASK
    assert "is on the policy's ask list" in run(policy, "terraform apply").reason
    assert run(policy, "curl http://x").decision is Permission.ALLOW


# --- across layers ----------------------------------------------------------------


def test_a_nearer_layer_s_asks_and_plan_gate_come_before_every_allow() -> None:
    """A layer's additions to the ask list and its plan gate are tightenings: the bot's
    own allow (which goes before the bot's ask list and gate) does not beat them."""
    bot = ToolPolicy(
        rules=(Rule(tool="*", decision=Permission.ALLOW),),
        mutating_needs_plan=False,
    )
    channel = RuleLayer(
        name="slack channel C1", ask_commands=("make deploy",), mutating_needs_plan=True
    )
    policy = bot.with_layers([channel])
    deploy = run(policy, "cd app && make deploy")
    assert (deploy.decision, deploy.rule) == (
        Permission.ASK,
        "slack channel C1 ask_commands 'make deploy'",
    )
    assert deploy.reason == (
        "`make deploy` is on the policy's ask list: the policy asks first (slack channel C1)"
    )
    early = write(policy, "a.md", plan_approved=False)
    assert (early.decision, early.reason) == (
        Permission.DENY,
        "mutating tools run only after the plan is approved (slack channel C1)",
    )
    assert run(policy, "curl x").rule == "bot settings rules[0] * -> allow"  # the bot's own word
    assert write(bot, "a.md", plan_approved=False).decision is Permission.ALLOW  # no layer: no gate


def test_a_deny_rule_of_any_layer_comes_before_a_layer_s_gate_and_asks() -> None:
    policy = ToolPolicy(rules=(Rule(tool="run_command", decision=Permission.DENY),)).with_layers(
        [RuleLayer(name="slack workspace T1", ask_commands=("ls",), mutating_needs_plan=True)]
    )
    verdict = run(policy, "ls", plan_approved=False)
    assert (verdict.decision, verdict.rule) == (
        Permission.DENY,
        "bot settings rules[0] run_command -> deny",
    )


# --- settings ---------------------------------------------------------------------


def test_the_toml_example_loads_and_decides() -> None:
    policy = ToolPolicy.from_toml_table(tomllib.loads(TOML_EXAMPLE)["policy"])
    assert policy.ask_commands == ("rm -rf", "git push")
    assert policy.rules == (
        Rule(
            tool="run_command",
            command_prefix="make deploy",
            decision=Permission.DENY,
            reason="deploys go through CI",
        ),
        Rule(tool="write_file", path_glob="secrets/**", decision=Permission.ASK),
    )
    assert run(policy, "make deploy").reason == "deploys go through CI"
    assert write(policy, "secrets/token").decision is Permission.ASK
    assert run(policy, "curl http://x").decision is Permission.ALLOW  # not on this list


def test_an_empty_table_is_the_default_policy() -> None:
    assert ToolPolicy.from_toml_table({}) == default_policy()


@pytest.mark.parametrize(
    ("table", "message"),
    [
        (
            {"rules": [{"tool": "x", "decision": "block"}]},
            "policy.rules[0].decision: unknown decision",
        ),
        ({"rules": [{"decision": "deny"}]}, "policy.rules[0].tool: missing"),
        ({"rules": [{"tool": "x"}]}, "policy.rules[0].decision: missing"),
        (
            {"rules": [{"tool": "x", "decision": "deny"}, {"tool": "x", "decision": "maybe"}]},
            "policy.rules[1]",
        ),
        ({"rules": [{"tool": "x", "decision": "deny", "comand_prefix": "y"}]}, "comand_prefix"),
        ({"rules": [{"tool": "x", "decision": "deny", "path_glob": " "}]}, "path_glob"),
        ({"rules": [{"tool": "", "decision": "deny"}]}, "tool"),
        ({"rules": ["run_command"]}, "policy.rules[0] must be a table"),
        ({"rules": {"tool": "x"}}, "policy.rules must be an array of tables"),
        ({"rules": [{"tool": "x", "decision": ["deny"]}]}, "unknown decision ['deny']"),
        ({"rules": [{"tool": 3, "decision": "deny"}]}, "tool: Input should be a valid string"),
        ({"ask_commands": "rm -rf"}, "policy.ask_commands must be a list of strings"),
        ({"ask_commands": ["curl", 3]}, "ask_commands"),
        ({"mutating_needs_plan": "maybe"}, "mutating_needs_plan"),
        ({"ask_commands": ["curl", ""]}, "patterns must not be empty"),
        ({"rule": []}, "rule"),
        (
            {"rules": [{"tool": "write_file", "decision": "deny", "command_prefix": "rm"}]},
            'policy.rules[0]: `command_prefix` applies only to `run_command` or "*": '
            "`write_file` has no `command` argument, so this rule could never match",
        ),
        (
            {"rules": [{"tool": "run_command", "decision": "ask", "path_glob": "*.env"}]},
            "policy.rules[0]: `path_glob` never matches `run_command`",
        ),
    ],
)
def test_a_bad_table_names_what_is_wrong(table: Mapping[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        ToolPolicy.from_toml_table(table)


KNOWN_TOOLS = ("list_files", "read_file", "write_file", "edit_file", "run_command")


def test_a_rule_for_an_unknown_tool_is_refused_when_the_tools_are_known() -> None:
    table = {"rules": [{"tool": "run_comand", "decision": "deny", "command_prefix": "make"}]}
    with pytest.raises(ValueError) as caught:
        ToolPolicy.from_toml_table(table, known_tools=KNOWN_TOOLS)
    assert str(caught.value) == (
        "policy.rules[0].tool: no tool called 'run_comand'; "
        "known: edit_file, list_files, read_file, run_command, write_file"
    )


def test_known_and_star_tools_load_and_without_known_tools_any_name_does() -> None:
    rules = [
        {"tool": "*", "decision": "ask", "path_glob": "secrets/**"},
        {"tool": "edit_file", "decision": "deny", "path_glob": "*.lock"},
        {"tool": "run_command", "decision": "deny", "command_prefix": "make deploy"},
    ]
    policy = ToolPolicy.from_toml_table({"rules": rules}, known_tools=KNOWN_TOOLS)
    assert [rule.tool for rule in policy.rules] == ["*", "edit_file", "run_command"]
    lenient = ToolPolicy.from_toml_table({"rules": [{"tool": "my_tool", "decision": "ask"}]})
    assert lenient.rules == (Rule(tool="my_tool", decision=Permission.ASK),)
    tables = tomllib.loads(TOML_EXAMPLE)["policy"]
    assert ToolPolicy.from_toml_table(tables, KNOWN_TOOLS) == ToolPolicy.from_toml_table(tables)


# --- purity -----------------------------------------------------------------------


def test_the_check_is_pure() -> None:
    policy = ToolPolicy.from_toml_table(tomllib.loads(TOML_EXAMPLE)["policy"])
    before = policy.model_dump()
    arguments = MappingProxyType({"command": "cd x && rm -rf build"})
    first = policy.check(
        tool_name="run_command", read_only=False, arguments=arguments, plan_approved=False
    )
    second = policy.check(
        tool_name="run_command", read_only=False, arguments=arguments, plan_approved=False
    )
    assert first == second
    assert first.decision is Permission.ASK
    assert policy.model_dump() == before
    with pytest.raises(ValidationError):
        policy.mutating_needs_plan = False  # type: ignore[misc]


# --- summaries --------------------------------------------------------------------


def test_a_command_is_summarized_in_backticks() -> None:
    assert summarize_call("run_command", {"command": "rm -rf build/"}) == "`rm -rf build/`"
    assert summarize_call("run_command", {"command": "make\n  test"}) == "`make ⏎ test`"
    assert summarize_call("run_command", {"command": "echo `date`"}) == "`echo ˋdateˋ`"
    long = summarize_call("run_command", {"command": "pytest " + "x" * 200}, limit=40)
    assert len(long) == 40
    assert long.startswith("`pytest xx") and long.endswith("…`")


def test_a_file_call_is_summarized_by_its_path() -> None:
    args = {"path": "notes/a.md", "content": "long text"}
    assert summarize_call("write_file", args) == "write_file notes/a.md"
    deep = summarize_call("read_file", {"path": "a/" * 60 + "end.md"}, limit=30)
    assert len(deep) == 30
    assert deep.startswith("read_file …") and deep.endswith("/end.md")


def test_other_calls_show_their_arguments() -> None:
    summary = summarize_call("ask_user", {"question": "Which database?", "options": ["pg", "db"]})
    assert summary == 'ask_user(question=Which database?, options=["pg", "db"])'
    assert summarize_call("finish", {}) == "finish()"
    long = summarize_call("search", {"query": "q" * 100, "n": 3}, limit=50)
    assert len(long) <= 50
    assert "q…" in long


def test_a_tiny_limit_is_refused() -> None:
    with pytest.raises(ValueError, match="limit"):
        summarize_call("finish", {}, limit=5)
