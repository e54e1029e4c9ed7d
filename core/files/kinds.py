"""What kind of file a shared file is for the model: text it can read, or anything else.

Images are told by their bytes (:mod:`core.files.images`). Text is a file whose media
type is ``text/*`` or a common code or data type, or whose name ends in a common code
or text extension, and whose bytes are valid UTF-8 without NUL characters: the
platforms label code files loosely (``application/octet-stream`` for a ``.rs`` file,
``text/plain`` for a Slack snippet), so the name counts as much as the type, and the
bytes decide. Pure functions; none raises.
"""

from __future__ import annotations

import unicodedata
from pathlib import PurePosixPath

TEXT_MEDIA_TYPES = frozenset(
    {
        "application/json",
        "application/ld+json",
        "application/xml",
        "application/javascript",
        "application/x-javascript",
        "application/typescript",
        "application/x-yaml",
        "application/yaml",
        "application/toml",
        "application/x-toml",
        "application/sql",
        "application/x-sh",
        "application/x-shellscript",
        "application/x-python",
        "application/x-python-code",
        "application/x-httpd-php",
        "application/x-ruby",
        "application/x-perl",
        "application/graphql",
        "application/x-ndjson",
        "application/csv",
        "application/x-diff",
        "application/x-patch",
        "image/svg+xml",
    }
)
"""Media types other than ``text/*`` whose files are text."""

TEXT_EXTENSIONS = frozenset(
    """
    txt md markdown rst adoc org log csv tsv json jsonl ndjson yaml yml toml ini cfg conf
    env properties xml html htm css scss sass less svg sql graphql gql proto
    py pyi ipynb js mjs cjs jsx ts tsx vue svelte go rs java kt kts scala groovy gradle
    c h cc cpp cxx hpp hh m mm swift cs fs vb rb php pl pm lua r jl dart ex exs erl hrl
    hs elm clj cljs edn lisp el scm ml mli zig nim v sv vhd tf hcl nix
    sh bash zsh fish ps1 bat cmd mk cmake dockerfile makefile diff patch lock gitignore
    """.split()
)
"""Extensions (lower case, without the dot) of text and code files."""

TEXT_NAMES = frozenset({"dockerfile", "makefile", "readme", "license", "procfile", "gemfile"})
"""File names without an extension that are text."""


def looks_like_text(name: str, media_type: str) -> bool:
    """Whether a file named ``name`` of ``media_type`` should be text (its bytes still
    decide: :func:`as_text`)."""
    base = media_type.split(";", 1)[0].strip().lower()
    if base.startswith("text/") or base in TEXT_MEDIA_TYPES:
        return True
    path = PurePosixPath(name.lower())
    return path.suffix.removeprefix(".") in TEXT_EXTENSIONS or path.name in TEXT_NAMES


def as_text(data: bytes) -> str | None:
    """``data`` as text: valid UTF-8 (a leading byte-order mark dropped) with no NUL
    character; None otherwise (a binary file, another encoding)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if "\x00" in text:
        return None
    return text.removeprefix("\ufeff")


def shown_name(name: str) -> str:
    """``name`` as the model is told it: control and format characters dropped (a
    right-to-left override cannot disguise an extension), at most 200 characters,
    ``"file"`` when nothing is left."""
    kept = "".join(c for c in name if unicodedata.category(c)[0] != "C")
    return kept.strip()[:200] or "file"


def media_type_of(media_type: str) -> str:
    """The bare media type (no parameters, lower case), ``application/octet-stream``
    when empty."""
    return media_type.split(";", 1)[0].strip().lower() or "application/octet-stream"


def size_said(size: int | None) -> str:
    """A size for people and the model: ``512 bytes``, ``12.3 KB``, ``4.5 MB`` (powers
    of 1024), ``unknown size`` for None."""
    if size is None:
        return "unknown size"
    if size < 1024:
        return f"{size} bytes"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KB"
    return f"{size / (1024 * 1024):.1f} MB"
