"""What an image file is, read from its first bytes: its format and its size in pixels.

The Messages API takes PNG, JPEG, GIF and WebP images and checks that the bytes are of
the declared ``media_type`` (https://docs.anthropic.com/en/docs/build-with-claude/vision).
So the type sent is the one read here from the bytes, never the platform's word, and an
image whose header cannot be read is not sent as an image at all: a request the API
refuses would be refused again on every later turn of the conversation.

Only headers and structure are read (no decoding, no library): PNG's ``IHDR``, GIF's
logical screen, the WebP ``VP8`` / ``VP8L`` / ``VP8X`` chunks and the JPEG
start-of-frame marker, and whether the file is whole (:func:`_whole`).
Pure functions; none raises.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass


@dataclass(frozen=True)
class ImageInfo:
    """An image's ``media_type`` (``image/png``, ``image/jpeg``, ``image/gif`` or
    ``image/webp``) and its ``width`` and ``height`` in pixels."""

    media_type: str
    width: int
    height: int


def image_info(data: bytes) -> ImageInfo | None:
    """The format and pixel size of ``data``; None when it is none of the four formats
    the API takes, its header is cut short or malformed, or the file is not whole
    (:func:`_whole`: a truncated or overwritten upload would be refused by the API on
    every later turn)."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        info = _png(data)
    elif data.startswith((b"GIF87a", b"GIF89a")):
        info = _gif(data)
    elif data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        info = _webp(data)
    elif data.startswith(b"\xff\xd8"):
        info = _jpeg(data)
    else:
        return None
    return info if info is not None and _whole(info.media_type, data) else None


def _whole(media_type: str, data: bytes) -> bool:
    """Whether ``data`` is a whole file of its format, as far as its structure tells
    without decoding: every PNG chunk with its CRC, ending in ``IEND``
    (https://www.w3.org/TR/png/#5Chunk-layout); a GIF ending in its trailer ``0x3B``; a
    JPEG with its end-of-image marker ``FFD9`` (ITU T.81, B.2.1); a WebP whose RIFF
    size is its length (https://developers.google.com/speed/webp/docs/riff_container)."""
    match media_type:
        case "image/png":
            return _png_chunks_whole(data)
        case "image/gif":
            return data.rstrip(b"\x00").endswith(b"\x3b")
        case "image/jpeg":
            return data.rfind(b"\xff\xd9") > 2
        case _:
            return int.from_bytes(data[4:8], "little") + 8 == len(data)


def _png_chunks_whole(data: bytes) -> bool:
    at = 8
    while at + 12 <= len(data):
        (length,) = struct.unpack(">I", data[at : at + 4])
        end = at + 12 + length
        if end > len(data):
            return False
        kind_and_body = data[at + 4 : at + 8 + length]
        if zlib.crc32(kind_and_body) != struct.unpack(">I", data[end - 4 : end])[0]:
            return False
        if data[at + 4 : at + 8] == b"IEND":
            return True
        at = end
    return False


def _sized(media_type: str, width: int, height: int) -> ImageInfo | None:
    return ImageInfo(media_type, width, height) if width > 0 and height > 0 else None


def _png(data: bytes) -> ImageInfo | None:
    """The ``IHDR`` chunk comes first: length, type, then width and height (big-endian)
    (https://www.w3.org/TR/png/#11IHDR)."""
    if len(data) < 24 or data[12:16] != b"IHDR":
        return None
    width, height = struct.unpack(">II", data[16:24])
    return _sized("image/png", width, height)


def _gif(data: bytes) -> ImageInfo | None:
    """The logical screen's width and height follow the signature (little-endian)
    (https://www.w3.org/Graphics/GIF/spec-gif89a.txt, section 18)."""
    if len(data) < 10:
        return None
    width, height = struct.unpack("<HH", data[6:10])
    return _sized("image/gif", width, height)


def _webp(data: bytes) -> ImageInfo | None:
    """The first chunk tells the size: ``VP8`` (lossy) in its frame header, ``VP8L``
    (lossless) in 14-bit fields, ``VP8X`` (extended) as 24-bit canvas sizes minus one
    (https://developers.google.com/speed/webp/docs/riff_container)."""
    chunk = data[12:16]
    if chunk == b"VP8 " and len(data) >= 30 and data[23:26] == b"\x9d\x01\x2a":
        width, height = struct.unpack("<HH", data[26:30])
        return _sized("image/webp", width & 0x3FFF, height & 0x3FFF)
    if chunk == b"VP8L" and len(data) >= 25 and data[20] == 0x2F:
        bits = int.from_bytes(data[21:25], "little")
        return _sized("image/webp", (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1)
    if chunk == b"VP8X" and len(data) >= 30:
        width = int.from_bytes(data[24:27], "little") + 1
        height = int.from_bytes(data[27:30], "little") + 1
        return _sized("image/webp", width, height)
    return None


_NO_LENGTH = frozenset({0x01, *range(0xD0, 0xDA)})
"""Markers without a length field: TEM, RST0-7, SOI, EOI."""
_NOT_FRAMES = frozenset({0xC4, 0xC8, 0xCC})
"""DHT, JPG and DAC: numbered among the SOF markers but no frame header."""


def _jpeg(data: bytes) -> ImageInfo | None:
    """Walk the markers to the first start of frame (``SOF0`` to ``SOF15``): its
    height and width follow the sample precision (big-endian)
    (ITU T.81, https://www.w3.org/Graphics/JPEG/itu-t81.pdf, B.2.2)."""
    at = 2
    while at + 4 <= len(data):
        if data[at] != 0xFF:
            return None
        marker = data[at + 1]
        if marker == 0xFF:  # fill byte
            at += 1
            continue
        if marker in _NO_LENGTH:
            at += 2
            continue
        (length,) = struct.unpack(">H", data[at + 2 : at + 4])
        if 0xC0 <= marker <= 0xCF and marker not in _NOT_FRAMES:
            if at + 9 > len(data):
                return None
            height, width = struct.unpack(">HH", data[at + 5 : at + 9])
            return _sized("image/jpeg", width, height)
        if length < 2:
            return None
        at += 2 + length
    return None
