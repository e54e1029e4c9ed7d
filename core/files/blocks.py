"""The content blocks a shared file becomes, and the image limits of the Messages API.

Limits (https://docs.anthropic.com/en/docs/build-with-claude/vision, "Before you
upload"; the request size limit: https://docs.anthropic.com/en/api/overview):

- an image is at most 5 MB: counted here on its base64 data, the stricter reading
  (the API's refusal names 5,242,880 bytes), so an image file of up to 3.75 MB is shown;
- at most 8000x8000 px; in a request with more than 20 images, at most 2000x2000 px;
- a request is at most 32 MB.

Every request carries the whole history, so these are kept per conversation: at most
:data:`MAX_IMAGES` images and :data:`MAX_IMAGE_DATA` of image data are shown in one
conversation (never more than 20 images in a request, so the 8000 px rule is the one
that applies, and room is left for the text). An image past a limit is saved into the
workspace instead, with a note saying why (:mod:`core.files.saving`). Pure functions.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from core.files.images import ImageInfo
from core.vocabulary.entries import JournalRecord, UserText

MAX_IMAGE_BYTES = 5 * 1024 * 1024
"""Base64 characters of one image at most (the API's 5 MB per image)."""
MAX_IMAGE_SIDE = 8000
"""Pixels of an image's width or height at most."""
MAX_IMAGES = 20
"""Images shown in one conversation at most (past 20 in a request, the API takes only
images of up to 2000x2000 px)."""
MAX_IMAGE_DATA = 20 * 1024 * 1024
"""Base64 characters of all the images of one conversation at most (a request is at
most 32 MB, and carries them all)."""

Block = dict[str, Any]


def text_block(text: str) -> Block:
    """A Messages API text block."""
    return {"type": "text", "text": text}


def image_block(info: ImageInfo, data: bytes) -> Block:
    """A Messages API image block with a base64 source of ``data``, typed as read from
    its bytes (``info.media_type``)."""
    encoded = base64.b64encode(data).decode("ascii")
    return {
        "type": "image",
        "source": {"type": "base64", "media_type": info.media_type, "data": encoded},
    }


def encoded_length(data: bytes) -> int:
    """Characters of the base64 form of ``data``."""
    return 4 * ((len(data) + 2) // 3)


@dataclass
class ImageBudget:
    """The images a conversation already shows the model: how many, and their base64
    characters; :meth:`refusal` tells whether one more fits."""

    count: int = 0
    data: int = 0

    @classmethod
    def of(cls, journal: Iterable[JournalRecord]) -> ImageBudget:
        """What the journal's shared files already show."""
        budget = cls()
        for record in journal:
            if isinstance(record.entry, UserText):
                for block in record.entry.files:
                    if block.get("type") == "image":
                        budget.count += 1
                        budget.data += len(str(block.get("source", {}).get("data", "")))
        return budget

    def refusal(self, info: ImageInfo, data: bytes) -> str | None:
        """Why the image ``data`` (read as ``info``) cannot be shown, or None when it fits."""
        size = encoded_length(data)
        if info.width > MAX_IMAGE_SIDE or info.height > MAX_IMAGE_SIDE:
            return (
                f"{info.width}x{info.height} px is more than the "
                f"{MAX_IMAGE_SIDE}x{MAX_IMAGE_SIDE} px the model takes"
            )
        if size > MAX_IMAGE_BYTES:
            return "it is over the model's 5 MB limit for an image"
        if self.count >= MAX_IMAGES:
            return f"this conversation already shows the model {MAX_IMAGES} images, the most it can"
        if self.data + size > MAX_IMAGE_DATA:
            return "this conversation's images would pass the 20 MB it can show the model"
        return None

    def take(self, data: bytes) -> None:
        """Count the image ``data`` as shown."""
        self.count += 1
        self.data += encoded_length(data)


def inline_text(label: str, name: str, text: str) -> str:
    """A text file inlined: the label, then its content between ``<file>`` tags."""
    attribute = name.replace('"', "'")
    return f'[{label}]\n<file name="{attribute}">\n{text}\n</file>'


def saved_note(label: str, why: str | None, path: str | None, failure: str | None) -> str:
    """The note for a file saved into the workspace (``path``), or that could not be
    (``failure``); ``why`` it was not shown inline, if it could have been."""
    said = f"{label}; {why}" if why else label
    if path is not None:
        return f"[{said}; saved in your workspace as {path}]"
    return f"[{said}; it could not be saved in your workspace: {failure}]"
