"""Tokens sealed at rest: what the store holds of an install's tokens is Fernet ciphertext.

A :class:`Sealer` holds the keys of ``THREADBOT_TOKEN_KEYS``, newest first. It seals with
the first and opens with any of them, which is ``cryptography``'s ``MultiFernet``
(https://cryptography.io/en/latest/fernet/#cryptography.fernet.MultiFernet): Fernet is
AES-128-CBC with an HMAC-SHA256 over the whole token, so a sealed token is neither read
nor altered without a key (https://cryptography.io/en/latest/fernet/).

Key rotation (README, "Slack"): put a new key first and keep the old ones after it (every
token still opens, new ones are sealed with the new key); run ``threadbot tokens rekey``,
which reseals every stored token with the first key (``MultiFernet.rotate``) in one
transaction; then drop the old keys. A token sealed with a key no longer listed raises
:class:`conversations.errors.Unsealable`.
"""

from __future__ import annotations

from collections.abc import Sequence

from cryptography.fernet import Fernet, InvalidToken, MultiFernet

from conversations.errors import Unsealable


def new_key() -> str:
    """A fresh key: 32 random bytes, URL-safe base64 (44 characters)."""
    return Fernet.generate_key().decode("ascii")


def key_problem(key: str) -> str | None:
    """Why ``key`` is no Fernet key (None when it is one); never says the key."""
    try:
        Fernet(key.encode("ascii"))
    except (ValueError, UnicodeEncodeError):
        return "not a Fernet key (32 bytes in URL-safe base64: 44 characters ending in '=')"
    return None


def keys_problem(keys: Sequence[str]) -> str | None:
    """Why ``keys`` cannot seal (none, or one that is no Fernet key, by its place); None
    when they can."""
    if not keys:
        return "no key"
    for index, key in enumerate(keys, start=1):
        problem = key_problem(key)
        if problem is not None:
            return f"key {index}: {problem}"
    return None


class Sealer:
    """Seals and opens tokens with ``keys`` (newest first: the first seals, any opens).

    Raises ``ValueError`` for no key or a key that is no Fernet key (the message names its
    place, never the key).
    """

    def __init__(self, keys: Sequence[str]) -> None:
        problem = keys_problem(keys)
        if problem is not None:
            raise ValueError(problem)
        self._fernet = MultiFernet([Fernet(key.encode("ascii")) for key in keys])

    def seal(self, plain: str) -> str:
        """``plain`` sealed with the first key (a different text each time)."""
        return self._fernet.encrypt(plain.encode("utf-8")).decode("ascii")

    def open(self, sealed: str) -> str:
        """The token ``sealed`` holds; raises :class:`Unsealable` when no key opens it."""
        try:
            return self._fernet.decrypt(sealed.encode("ascii")).decode("utf-8")
        except (InvalidToken, UnicodeError) as exc:
            raise Unsealable("a stored token opens with none of THREADBOT_TOKEN_KEYS") from exc

    def reseal(self, sealed: str) -> str:
        """``sealed`` sealed again with the first key; raises :class:`Unsealable`."""
        try:
            return self._fernet.rotate(sealed.encode("ascii")).decode("ascii")
        except (InvalidToken, UnicodeError) as exc:
            raise Unsealable("a stored token opens with none of THREADBOT_TOKEN_KEYS") from exc
