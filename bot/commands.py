"""What each ``threadbot`` command does once its arguments are parsed (see :mod:`bot.cli`).

Imported only after ``argparse`` has parsed the command line, so ``threadbot
--help`` answers without importing the platform SDKs, the model client or the
database layer.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import logging
import os
import sys
import tomllib
from collections.abc import Sequence
from pathlib import Path

from alembic.util.exc import CommandError
from pydantic import ValidationError
from sqlalchemy.exc import SQLAlchemyError

from adapters.console import ConsoleError
from bot.engines import default_toolbox
from bot.errors import OpsUnavailable, RayUnreachable, StartFailed, TracesUnavailable
from bot.layer_tables import place_problem
from bot.layers import UnknownWorkflows
from bot.logs import configure as configure_logs
from bot.platforms import platform_adapters
from bot.serve import run_console, run_platforms
from bot.settings import Settings
from bot.settings_errors import explain
from bot.workflow_commands import check_files, show_workflow, workflow_errors_said
from conversations.store import migrate
from conversations.store.sql import create_engine
from conversations.store.sql.failures import database_said, sqlite_file
from core.faults import Faults
from core.secrets import Redactor
from core.workflows.loading import WorkflowErrors

log = logging.getLogger(__name__)


def run(args: argparse.Namespace) -> int:
    """Run the parsed command; returns the exit code (see :mod:`bot.cli`)."""
    unknown = Settings.unknown_variables(os.environ)
    if unknown:
        print(
            f"threadbot: unknown settings: {', '.join(unknown)} (see the README)", file=sys.stderr
        )
        return 2
    settings = _settings(workflows=args.command != "workflows")
    if settings is None:
        return 2
    if isinstance(sys.stdin, io.TextIOWrapper):
        sys.stdin.reconfigure(errors="replace")  # bytes that are not UTF-8 become U+FFFD
    redactor = Redactor(settings.secrets())
    configure_logs(settings.log_level, settings.log_format, redactor)
    for renamed in settings.renamed():  # an old name still read, once at start
        log.warning("settings: %s", renamed)
    if args.command == "db":
        return asyncio.run(_upgrade(settings))
    if args.command == "doctor":
        from bot.doctor import doctor

        return asyncio.run(doctor(settings))
    if args.command == "tokens":
        from bot.tokens import print_new_key, rekey

        if args.tokens_command == "new-key":
            return print_new_key()
        return asyncio.run(rekey(settings))
    if args.command == "schedules":
        from bot.schedules import report
        from core.context import now

        print("\n".join(report(settings.schedules, now())))
        return 0
    if args.command == "usage":
        from bot.usage_report import usage

        return asyncio.run(usage(settings, args.by, args.since, args.json))
    if args.command == "audit":
        from bot.audit_report import audit

        return asyncio.run(
            audit(
                settings,
                conversation=args.conversation,
                channel=args.channel,
                since=args.since,
                json_out=args.json,
            )
        )
    if args.command == "policy":
        from bot.policy_commands import list_rules, revoke_rule

        if args.policy_command == "revoke":
            return asyncio.run(revoke_rule(settings, args.id, args.operator, os.environ))
        place = place_problem(args.platform or "", args.team, args.channel)
        if place is not None:
            print(f"threadbot policy list: {place}", file=sys.stderr)
            return 2
        listing = list_rules(
            settings,
            platform=args.platform,
            team=args.team,
            channel=args.channel,
            every=args.all,
            json_out=args.json,
        )
        return asyncio.run(listing)
    if args.command == "fork":
        from bot.forking import fork_conversation

        return asyncio.run(
            fork_conversation(settings, args.conversation, args.at, args.operator, os.environ)
        )
    if args.command == "operator":
        from bot.policy_commands import hash_token

        return hash_token(os.environ)
    if args.command == "workflows":
        if args.workflows_command == "check":
            return check_files(args.files)
        return show_workflow(settings, args.name, mermaid=args.mermaid)
    if args.command == "settings":
        problem = place_problem(args.platform, args.team, args.channel)
        if problem is not None:
            print(f"threadbot settings explain: {problem}", file=sys.stderr)
            return 2
        from bot.policy_commands import rules_here

        layers = settings.layers(known_tools={t.spec.name for t in default_toolbox()})
        effective = layers.at(args.platform, args.team, args.channel)
        remembered = asyncio.run(rules_here(settings, args.platform, args.team, args.channel))
        print(f"settings for {args.platform} {args.team or '-'} {args.channel or '-'}")
        print("\n".join([*effective.explain(), *remembered, *runner_explained(settings)]))
        return 0
    try:
        adapters = platform_adapters(settings) if args.command == "run" else []
        if adapters:
            return asyncio.run(run_platforms(settings, adapters, redactor=redactor))
        return asyncio.run(run_console(settings))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        raise  # its reader left: bot.cli ends quietly
    except WorkflowErrors as exc:
        print(workflow_errors_said(exc), file=sys.stderr)
        return 2
    except UnknownWorkflows as exc:
        print(_bad_settings(exc.lines), file=sys.stderr)
        return 2
    except (OSError, SQLAlchemyError) as exc:
        print(f"threadbot: {redactor.redact(_said(settings, exc))}", file=sys.stderr)
        return 2
    except (
        ConsoleError,
        StartFailed,
        OpsUnavailable,
        TracesUnavailable,
        RayUnreachable,
        ValueError,
        CommandError,
    ) as exc:
        print(f"threadbot: {redactor.redact(str(exc))}", file=sys.stderr)
        return 2


async def _upgrade(settings: Settings) -> int:
    if settings.database_url == "memory://":
        print("threadbot: memory:// has no schema to upgrade (it keeps nothing)", file=sys.stderr)
        return 2
    try:
        engine = create_engine(settings.database_url)
    except OSError as exc:
        print(f"threadbot: cannot upgrade the database: {_said(settings, exc)}", file=sys.stderr)
        return 2
    try:
        await migrate.upgrade(engine, faults=Faults(settings.fault))
        revision = await migrate.current_revision(engine)
    except (CommandError, SQLAlchemyError, OSError) as exc:
        print(f"threadbot: cannot upgrade the database: {_said(settings, exc)}", file=sys.stderr)
        return 2
    finally:
        await engine.dispose()
    print(f"database at revision {revision}")
    return 0


def _said(settings: Settings, error: BaseException) -> str:
    """A failure of the database, or of a file or folder, in one line of words."""
    if isinstance(error, SQLAlchemyError) or (
        isinstance(error, OSError) and _of_database(settings, error)
    ):
        return database_said(settings.database_url, error)
    if isinstance(error, OSError) and error.filename:
        return f"{error.filename}: {(error.strerror or str(error)).lower()}"
    return str(error) or type(error).__name__


def _of_database(settings: Settings, error: OSError) -> bool:
    """Whether ``error`` is about the SQLite database's file or one of its folders."""
    file = sqlite_file(settings.database_url)
    if file is None or not error.filename:
        return False
    named = Path(os.fsdecode(error.filename))
    return named == file or named in file.parents


def _settings(*, workflows: bool = True) -> Settings | None:
    """The settings, or None after telling on stderr what is wrong with them; with
    ``workflows``, the workflow files too (the shipped ones and the ``workflows_folder``'s)
    and the workflows the settings name."""
    try:
        toml_file = Settings.toml_file()
        settings = Settings()
        tools = {t.spec.name for t in default_toolbox()}
        library = settings.workflow_library(tools) if workflows else None
        settings.layers(
            known_tools=tools, known_workflows=None if library is None else library.names
        )
    except ValidationError as exc:
        lines = explain(exc, fields=Settings.model_fields, environ=os.environ, toml_file=toml_file)
        print(_bad_settings(lines), file=sys.stderr)
        return None
    except WorkflowErrors as exc:
        print(workflow_errors_said(exc), file=sys.stderr)
        return None
    except UnknownWorkflows as exc:
        print(_bad_settings(exc.lines), file=sys.stderr)
        return None
    except ValueError as exc:  # a TOML file that does not parse, a missing THREADBOT_CONFIG
        from_file = isinstance(exc, tomllib.TOMLDecodeError | UnicodeDecodeError)
        where = (
            f"{toml_file}: " if from_file or ".policy" in str(exc) or "policy" in str(exc) else ""
        )
        print(f"threadbot: bad settings:\n  {where}{exc}", file=sys.stderr)
        return None
    return settings


WHOLE_BOT_LIMITS = (
    "max_runs",
    "cluster_max_runs",
    "model_calls_at_once",
    "commands_at_once",
    "priority_aging",
    "queued_after",
    "queued_edit_every",
)
"""The limits of the whole bot (never a layer's) that ``settings explain`` shows
(docs/architecture.md, "Limits and priorities")."""


def runner_explained(settings: Settings) -> list[str]:
    """Where the runs are carried out and how many at once (the whole bot's settings, never a
    layer's), one line each as ``settings explain`` shows a setting: ``name = value  (where
    it was set)``; an unset limit shows as ``(none: no limit)``."""
    shown = {
        "runner": repr(settings.runner),
        "ray_address": repr(settings.ray_address)
        if settings.ray_address is not None
        else "(none: a local cluster this process starts)",
        "ray_actors": repr(settings.ray_actors),
    }
    if settings.runner != "ray":
        shown = {"runner": shown["runner"]}
    for name in WHOLE_BOT_LIMITS:
        value = getattr(settings, name)
        shown[name] = "(none: no limit)" if value is None else repr(value)
    lines = []
    for name, value in shown.items():
        variable = f"THREADBOT_{name.upper()}"
        if variable in os.environ:
            where = f"bot settings ({variable})"
        elif name in settings.model_fields_set:
            where = f"bot settings ({Settings.toml_file().name})"
        else:
            where = "defaults"
        lines.append(f"{name} = {value}  ({where})")
    return lines


def _bad_settings(lines: Sequence[str]) -> str:
    """``threadbot: bad settings:`` and ``lines``, each on its own indented line."""
    return "\n".join(["threadbot: bad settings:", *(f"  {line}" for line in lines)])
