"""threadbot: run an LLM agent from team chat (commands: run, console, db upgrade).

``threadbot run`` starts every adapter that has credentials (Slack with
``SLACK_BOT_TOKEN``, Discord with ``DISCORD_TOKEN``), and the console when none
has. Exit codes: 0 on a clean
end, 2 on a usage or settings error, 130 after Ctrl-C in the console.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import logging
import os
import sys

from alembic.util.exc import CommandError
from pydantic import ValidationError
from sqlalchemy.exc import SQLAlchemyError

from adapters.console import ConsoleError
from adapters.discord.runner import DiscordStartError
from bot.app import platform_adapters, run_console, run_platforms
from bot.settings import Settings
from conversations import migrate
from conversations.store.store import create_engine


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="threadbot", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("run", help="start every configured adapter (the console if none)")
    commands.add_parser("console", help="chat with the bot in this terminal")
    db = commands.add_parser("db", help="database maintenance")
    db_commands = db.add_subparsers(dest="db_command", required=True)
    db_commands.add_parser("upgrade", help="create or upgrade the schema to the newest revision")
    return parser


async def _upgrade(settings: Settings) -> int:
    engine = create_engine(settings.database_url)
    try:
        await migrate.upgrade(engine)
        revision = await migrate.current_revision(engine)
    except (CommandError, SQLAlchemyError) as exc:
        print(f"threadbot: cannot upgrade the database: {exc}", file=sys.stderr)
        return 2
    finally:
        await engine.dispose()
    print(f"database at revision {revision}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``threadbot`` console script."""
    args = _parser().parse_args(argv)
    unknown = Settings.unknown_variables(os.environ)
    if unknown:
        print(
            f"threadbot: unknown settings: {', '.join(unknown)} (see the README)", file=sys.stderr
        )
        return 2
    try:
        settings = Settings()
    except ValidationError as exc:
        print(f"threadbot: bad settings:\n{exc}", file=sys.stderr)
        return 2
    except ValueError as exc:  # a TOML file that does not parse, a missing THREADBOT_CONFIG
        print(f"threadbot: bad settings: {exc}", file=sys.stderr)
        return 2
    if isinstance(sys.stdin, io.TextIOWrapper):
        sys.stdin.reconfigure(errors="replace")  # bytes that are not UTF-8 become U+FFFD
    logging.basicConfig(
        level=settings.log_level.upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if args.command == "db":
        return asyncio.run(_upgrade(settings))
    try:
        adapters = platform_adapters(settings) if args.command == "run" else []
        if adapters:
            return asyncio.run(run_platforms(settings, adapters))
        return asyncio.run(run_console(settings))
    except KeyboardInterrupt:
        return 130
    except (
        ConsoleError,
        DiscordStartError,
        OSError,
        ValueError,
        CommandError,
        SQLAlchemyError,
    ) as exc:
        print(f"threadbot: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
