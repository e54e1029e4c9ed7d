"""``threadbot tokens``: the key that seals the installs' tokens, and its rotation.

The Slack installs' tokens are sealed in the database with the keys of
``THREADBOT_TOKEN_KEYS``, newest first (:mod:`conversations.sealing`):

- ``threadbot tokens new-key`` prints a new key (Fernet: 32 random bytes, URL-safe
  base64), to put first in ``THREADBOT_TOKEN_KEYS``;
- ``threadbot tokens rekey`` seals every stored token again with the first key
  (``MultiFernet.rotate``: https://cryptography.io/en/latest/fernet/#cryptography.fernet.MultiFernet.rotate),
  every row in one transaction, and says how many installs it resealed. A token that
  none of the keys opens leaves every row as it was (exit 1): put back the key it was
  sealed with. Running instances need no restart: they hold the tokens opened, and a
  new key in their settings only matters to their next seal.

Rotation, step by step (README, "Slack"): ``new-key``; give every instance
``THREADBOT_TOKEN_KEYS=NEW,OLD`` and restart them; ``rekey`` once; then drop ``OLD``
from every instance's settings. Exit codes: 0 done, 1 a token no key opens, 2 bad
settings or a database that is missing or not at the newest schema (``threadbot db
upgrade`` first).
"""

from __future__ import annotations

import sys

from bot.doctor import database_checks
from bot.settings import Settings
from conversations.errors import Unsealable
from conversations.render import render_event
from conversations.sealing import Sealer, new_key
from conversations.store.backends import is_memory
from conversations.store.sql import SqlStore, create_engine


def print_new_key() -> int:
    """Print a new key; 0."""
    print(new_key())
    return 0


async def rekey(settings: Settings) -> int:
    """Seal every stored token again with the first key of ``THREADBOT_TOKEN_KEYS``; the
    exit code (see the module docstring)."""
    keys = settings.sealing_keys()
    if not keys:
        print(
            "threadbot: THREADBOT_TOKEN_KEYS is not set: nothing to seal with "
            "(threadbot tokens new-key makes a key)",
            file=sys.stderr,
        )
        return 2
    if is_memory(settings.database_url):
        print("threadbot: memory:// keeps no tokens (it keeps nothing)", file=sys.stderr)
        return 2
    (check,) = await database_checks(settings.database_url)
    if check.mark != "ok":
        print(f"threadbot: {check.said}", file=sys.stderr)
        return 2
    sealer = Sealer(keys)
    store = SqlStore(engine=create_engine(settings.database_url), render=render_event)
    try:
        count = await store.installations.reseal(sealer.reseal)
    except Unsealable as exc:
        print(f"threadbot tokens rekey: {exc}; nothing was changed", file=sys.stderr)
        return 1
    finally:
        await store.close()
    installs = "1 install" if count == 1 else f"{count} installs"
    print(f"resealed the tokens of {installs} with the first key of THREADBOT_TOKEN_KEYS")
    return 0
