"""``threadbot fork``, and the forker the inspector's "fork here" uses too.

``threadbot fork CONVERSATION --at SEQ --operator NAME`` forks a conversation at entry
SEQ of its journal as the operator NAME (docs/architecture.md, "Rewind and fork"): the
token from ``THREADBOT_OPERATOR_TOKEN`` or asked at the terminal, checked as
``threadbot policy revoke`` checks it (:mod:`bot.operators`). The fork is written to
the database in one transaction, and a running bot (any instance on that database)
posts its thread's first message within its outbox poll and goes on from there; with
no bot running, the fork waits in the store until one starts. Exit 0, printing a
sentence and then, on the last line alone, the new conversation's id (for scripts);
2, saying why, for a refused operator, an unknown conversation, an entry that is no
point to fork at, or a database that cannot be used (``memory://``, not at the newest
schema). A refusal of a known conversation is recorded in the audit trail (a refused
token's too, as ``operator:<NAME>``, or ``operator:?`` for a name no operator could
have).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping

from bot.doctor import database_checks
from bot.operators import OperatorRefused, authenticated, recorded_name, token_given
from bot.settings import Settings
from conversations.events import PlatformRef
from conversations.forks import Forker, ForkRefused, ForkStore
from conversations.render import render_event
from conversations.store.backends import is_memory
from conversations.store.sql import SqlStore, create_engine


def forker_for(settings: Settings, store: ForkStore) -> Forker:
    """The :class:`conversations.forks.Forker` of ``store`` under the settings: forks'
    workspaces under ``workspace_root`` (absolute: the settings make it so, for the hub
    and a fork alike); the model told of a clone where the channel's layered settings
    name a ``git_repo``."""
    layers = settings.layers()

    def cloned(place: PlatformRef) -> bool:
        return bool(layers.at(place.platform, place.workspace, place.home)["git_repo"])

    return Forker(store=store, workspace_root=settings.workspace_root, cloned=cloned)


async def _database_problem(settings: Settings) -> str | None:
    """Why the settings' database cannot hold a fork, or None."""
    if is_memory(settings.database_url):
        return (
            "memory:// keeps no conversations past the process: set "
            "THREADBOT_DATABASE_URL to the bot's database"
        )
    (check,) = await database_checks(settings.database_url)
    return check.said if check.mark != "ok" else None


async def fork_conversation(
    settings: Settings, conversation_id: str, at: int, operator: str, environ: Mapping[str, str]
) -> int:
    """Fork ``conversation_id`` at entry ``at`` as ``operator`` (see the module docstring);
    the exit code."""
    said = "threadbot fork"
    refused: str | None = None
    try:
        authenticated(settings.operators, operator, token_given(environ))
    except OperatorRefused as exc:
        refused = str(exc)
    problem = await _database_problem(settings)
    if problem is not None:
        print(f"{said}: {refused or problem}", file=sys.stderr)
        return 2
    store = SqlStore(engine=create_engine(settings.database_url), render=render_event)
    try:
        forker = forker_for(settings, store)
        if refused is not None:
            name = recorded_name(operator)  # the given text never lands in the trail
            why = refused if name == operator else refused.replace(repr(operator), name)
            await forker.refuse(conversation_id, at, operator=name, means="command", why=why)
            print(f"{said}: {refused}", file=sys.stderr)
            return 2
        made = await forker.fork(conversation_id, at, operator=operator, means="command")
    except ForkRefused as exc:
        print(f"{said}: {exc}", file=sys.stderr)
        return 2
    finally:
        await store.close()
    cancelled = f"; {made.cancelled} open call(s) cancelled" if made.cancelled else ""
    print(
        f"forked conversation {conversation_id} at entry {at} into a new conversation"
        f"{cancelled}: a running bot starts its thread and goes on. Its id:"
    )
    print(made.conversation_id)
    return 0
