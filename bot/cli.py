"""threadbot: run an LLM agent from team chat.

``threadbot run`` starts every adapter that has credentials (Slack with
``SLACK_BOT_TOKEN``, Discord with ``DISCORD_TOKEN``), and the console when none
has. Exit codes: 0 on a clean
end (SIGTERM or Ctrl-C included: a graceful shutdown), 1 when a supervised
background task gave up, 2 on a usage or settings error, 130 after a second Ctrl-C.
``threadbot doctor`` checks the installation (:mod:`bot.doctor`): 0 when everything
needed works, 1 when a check failed, 2 on a usage or settings error.
``threadbot schedules`` lists the scheduled runs and their next times (:mod:`bot.schedules`).
``threadbot tokens new-key`` prints a key to seal the installs' tokens with, and
``threadbot tokens rekey`` seals them again with the newest key (:mod:`bot.tokens`).
``threadbot usage`` prints the tokens and cost of the model calls in the store
(:mod:`bot.usage_report`); ``threadbot audit`` every decision and refused attempt, oldest
first, reading the database without writing (:mod:`bot.audit_report`). ``threadbot
policy list`` and ``threadbot policy revoke ID --operator NAME`` list and revoke the
approvals remembered for a run or a channel, and ``threadbot operator hash`` prints an
operator token's hash (:mod:`bot.policy_commands`). ``threadbot fork CONVERSATION --at SEQ
--operator NAME`` forks a conversation at an entry of its journal (:mod:`bot.forking`).
``threadbot workflows check FILE...`` checks workflow files and ``threadbot workflows show
NAME`` prints one (:mod:`bot.workflow_commands`): 0, or 2 for a file that does not load or
an unknown name. ``threadbot db``, ``threadbot settings``, ``threadbot workflows``, ``threadbot
tokens``, ``threadbot policy`` or ``threadbot operator`` without a subcommand lists its
subcommands (exit 2). Output cut short by a closed pipe (``threadbot doctor | head -1``)
ends quietly with 141, the shell's code for a process ended by SIGPIPE
(https://docs.python.org/3/library/signal.html#note-on-sigpipe).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from bot.version import installed_version

BROKEN_PIPE = 141
"""The exit code after a reader closed the pipe early: 128 + SIGPIPE, as a shell says."""


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's own, lining up the helps past the longest subcommand's name with its
    indent (argparse counts the name alone, so ``workflows`` got a line of its own)."""

    def add_argument(self, action: argparse.Action) -> None:
        super().add_argument(action)
        subactions = getattr(action, "_get_subactions", None)
        if action.help is argparse.SUPPRESS or subactions is None:
            return
        names = [len(self._format_action_invocation(each)) for each in subactions()]
        indent = self._current_indent + self._indent_increment
        self._action_max_length = max(self._action_max_length, max(names, default=0) + indent)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="threadbot",
        formatter_class=_HelpFormatter,
        description="Run an LLM agent from team chat: plan, approve, work, ask, stop, in a thread.",
        epilog="`threadbot COMMAND --help` tells more of each command.",
    )
    parser.add_argument("--version", action="version", version=f"threadbot {installed_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    commands.add_parser("run", help="start every configured adapter (the console if none)")
    commands.add_parser("console", help="chat with the bot in this terminal")
    db = commands.add_parser("db", help="database maintenance")
    db.set_defaults(group=db)
    db_commands = db.add_subparsers(dest="db_command", metavar="SUBCOMMAND")
    db_commands.add_parser("upgrade", help="create or upgrade the schema to the newest revision")
    commands.add_parser(
        "doctor",
        help="check the sandbox, the database, the credentials and the workspace root",
    )
    settings = commands.add_parser("settings", help="what the settings are, and why")
    settings.set_defaults(group=settings)
    settings_commands = settings.add_subparsers(dest="settings_command", metavar="SUBCOMMAND")
    explain = settings_commands.add_parser(
        "explain", help="the effective settings of a channel, each with the layer it came from"
    )
    explain.add_argument("--platform", choices=("slack", "discord", "console"), required=True)
    explain.add_argument("--team", default="", help="Slack team id or Discord guild id")
    explain.add_argument("--channel", default="", help="Slack or Discord channel id")
    workflows = commands.add_parser("workflows", help="check workflow files, show a workflow")
    workflows.set_defaults(group=workflows)
    workflows_commands = workflows.add_subparsers(dest="workflows_command", metavar="SUBCOMMAND")
    check = workflows_commands.add_parser(
        "check",
        help="check workflow files without starting the bot",
        description=(
            "Load the shipped workflows and FILE... as the bot loads its workflows_folder, "
            "and start nothing: each problem is printed as FILE:LINE: REASON (exit 2), else "
            "FILE: ok (workflow NAME, N states) (exit 0). A sub-workflow may be a shipped "
            "one or another FILE. Tool names are always checked, against the bot's own "
            "tools (the control tools and the workspace tools), which need no settings."
        ),
    )
    check.add_argument("files", nargs="+", type=Path, metavar="FILE", help="a workflow file")
    show = workflows_commands.add_parser(
        "show",
        help="a workflow's states and transitions, as text or a Mermaid diagram",
        description=(
            "Print a workflow (a shipped one, or one of the workflows_folder setting's): "
            "each state with its kind, what it does and its transitions, then the "
            "conditions a guard may name; with --mermaid, a Mermaid stateDiagram-v2."
        ),
    )
    show.add_argument("name", metavar="NAME", help="default, chat, validate-fix, or your own")
    show.add_argument(
        "--mermaid", action="store_true", help="print a Mermaid stateDiagram-v2 instead"
    )
    tokens = commands.add_parser("tokens", help="the key that seals the installs' tokens")
    tokens.set_defaults(group=tokens)
    tokens_commands = tokens.add_subparsers(dest="tokens_command", metavar="SUBCOMMAND")
    tokens_commands.add_parser("new-key", help="print a new key for THREADBOT_TOKEN_KEYS")
    tokens_commands.add_parser(
        "rekey",
        help="seal every stored token again with the first key of THREADBOT_TOKEN_KEYS",
    )
    policy = commands.add_parser(
        "policy", help="approvals remembered for a run or a channel: list, revoke"
    )
    policy.set_defaults(group=policy)
    policy_commands = policy.add_subparsers(dest="policy_command", metavar="SUBCOMMAND")
    listed = policy_commands.add_parser(
        "list",
        help="the remembered approvals in force, with who added each and when",
        description=(
            "Print the rules left by approvals for a run or always in a channel, in force "
            "(with --all, the revoked ones and those of ended runs too), each with its id, "
            "scope, channel, what it covers, who added it and when."
        ),
    )
    listed.add_argument("--platform", choices=("slack", "discord", "console"))
    listed.add_argument("--team", default="", help="Slack team id or Discord guild id")
    listed.add_argument("--channel", default="", help="Slack or Discord channel id")
    listed.add_argument(
        "--all", action="store_true", help="the revoked rules and those of ended runs too"
    )
    listed.add_argument("--json", action="store_true", help="one JSON object instead of lines")
    revoke = policy_commands.add_parser(
        "revoke",
        help="revoke a remembered approval at once, as a named operator",
        description=(
            "Revoke rule ID as the operator NAME ([operators.NAME] in the settings): the "
            "token is read from THREADBOT_OPERATOR_TOKEN, or asked at the terminal, never "
            "given as an argument. The next call it covered asks again, in running "
            "conversations too; the rule is kept with who revoked it and when. Exit 2 when "
            "refused or there is no such rule."
        ),
    )
    revoke.add_argument("id", type=_rule_id, metavar="ID", help="the rule's id (policy list)")
    revoke.add_argument("--operator", required=True, metavar="NAME", help="who revokes it")
    fork = commands.add_parser(
        "fork",
        help="start a new thread from a point of a conversation's journal, as an operator",
        description=(
            "Fork CONVERSATION at entry SEQ of its journal as the operator NAME "
            "([operators.NAME] in the settings; the token from THREADBOT_OPERATOR_TOKEN, or "
            "asked at the terminal): a new conversation in a new thread of the same channel "
            "holds the journal up to that entry and goes on from there, in a fresh "
            "workspace; the original is untouched. A running bot starts the thread. Exit 2 "
            "when refused, or for an unknown conversation or entry."
        ),
    )
    fork.add_argument("conversation", metavar="CONVERSATION", help="the conversation's id")
    fork.add_argument("--at", type=int, required=True, metavar="SEQ", help="the journal entry")
    fork.add_argument("--operator", required=True, metavar="NAME", help="who forks it")
    operator = commands.add_parser("operator", help="operators' tokens")
    operator.set_defaults(group=operator)
    operator_commands = operator.add_subparsers(dest="operator_command", metavar="SUBCOMMAND")
    operator_commands.add_parser(
        "hash",
        help="print the token_sha256 of a token (THREADBOT_OPERATOR_TOKEN, or asked)",
    )
    commands.add_parser("schedules", help="the scheduled runs and the next times of each")
    usage = commands.add_parser("usage", help="tokens and cost of the model calls, grouped")
    usage.add_argument(
        "--by",
        choices=("conversation", "channel", "day", "model", "role"),
        default="conversation",
    )
    usage.add_argument(
        "--since", type=_since, help="from this day (UTC) or ISO time on, e.g. 2026-12-01"
    )
    usage.add_argument("--json", action="store_true", help="one JSON object instead of a table")
    audit = commands.add_parser(
        "audit",
        help="who decided what, when and how, refused attempts included (reads only)",
        description=(
            "Print every decision and every refused attempt in the store, oldest first: "
            "when, the conversation, the channel, the request and its plan version, who "
            "(a platform user id), how (reaction, button, reply, command, native_stop), "
            "what came of it and why. Opens the database read-only."
        ),
    )
    audit.add_argument("--conversation", metavar="ID", help="only this conversation's")
    audit.add_argument("--channel", metavar="ID", help="only this channel's (its platform id)")
    audit.add_argument(
        "--since",
        type=_since,
        metavar="DATE",
        help="from this day (UTC) or ISO time on, e.g. 2026-12-01",
    )
    audit.add_argument("--json", action="store_true", help="a JSON list instead of lines")
    return parser


def _since(text: str) -> object:
    """``--since``, parsed by :func:`bot.usage_report.since_argument` (imported late)."""
    from bot.usage_report import since_argument

    return since_argument(text)


def _rule_id(text: str) -> int:
    """``policy revoke``'s ID: a whole number from 1 to 2**63 - 1 (the largest a row id
    of either database holds). Raises ``argparse.ArgumentTypeError`` otherwise."""
    try:
        number = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a rule id (a number)") from None
    if not 1 <= number < 2**63:
        raise argparse.ArgumentTypeError(f"there is no rule {text}: ids run from 1")
    return number


def _subcommand_missing(args: argparse.Namespace) -> bool:
    """Print the help of a command of subcommands (``threadbot db``, ``settings``,
    ``workflows``, ``tokens``, ``policy``, ``operator``) when it was given without one."""
    group: argparse.ArgumentParser | None = getattr(args, "group", None)
    if group is None or getattr(args, f"{args.command}_command") is not None:
        return False
    print(group.format_help(), end="", file=sys.stderr)
    return True


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``threadbot`` console script.

    Only :mod:`argparse` is needed to answer ``--help``, ``--version`` or a usage error
    (exit 2); the rest is imported once a command is to run (:mod:`bot.commands`).
    """
    args = _parser().parse_args(argv)
    if _subcommand_missing(args):
        return 2
    from bot.commands import run

    try:
        code = run(args)
        sys.stdout.flush()  # a closed pipe shows here, not at exit
    except BrokenPipeError:
        _quiet_stdout()
        return BROKEN_PIPE
    return code


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's last flush does not fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


if __name__ == "__main__":
    sys.exit(main())
