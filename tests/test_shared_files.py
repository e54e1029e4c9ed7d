"""Files shared in a thread, as the model reads them (issue 16, core's side).

The hub hands the engine fetched files (:class:`core.vocabulary.inputs.SharedFile`); the engine
reads them into content blocks once (:class:`core.files.FileReader`): an image is an
image block (its type read from its bytes, within the Messages API's limits), a text
file is inlined up to the limit, anything else is saved into the conversation's
workspace with a note saying where. The journal keeps the blocks, so the history sends
the same bytes after a reload.
"""

from __future__ import annotations

import base64
import json
import os
import struct
from pathlib import Path

import pytest

from conversations.events import PlatformRef
from conversations.render import render_event
from conversations.store.memory import MemoryStore
from core.files import FileReader
from core.files.blocks import MAX_IMAGES
from core.files.images import ImageInfo, image_info
from core.files.kinds import as_text, looks_like_text
from core.files.saving import SHARED_DIR, safe_name, save_shared
from core.models.scripted import ScriptedCall, ScriptedModel, ScriptedTurn
from core.run.engine import Engine
from core.run.history import build_messages
from core.tools.base import Toolbox
from core.tools.control import control_tools
from core.vocabulary import lifecycle
from core.vocabulary.entries import JournalRecord, UserText
from core.vocabulary.inputs import SharedFile, ThreadMessage
from core.vocabulary.people import Person
from core.vocabulary.snapshot import ConversationSnapshot
from tests.fakes.files import png

ALICE = Person(id="U0ALICE001", name="alice")
LOG = "2 failed, 10 passed\nFAILED tests/test_login.py::test_session\n"


def snapshot(workspace: Path, journal: tuple[JournalRecord, ...] = ()) -> ConversationSnapshot:
    return ConversationSnapshot(
        id="c1",
        requester=ALICE,
        status=lifecycle.RUNNING,
        position="planning",
        plan_version=0,
        workspace=str(workspace),
        journal=journal,
        tool_calls={},
        requests=(),
    )


def shared(name: str, data: bytes, media_type: str = "application/octet-stream") -> SharedFile:
    return SharedFile(name=name, media_type=media_type, size=len(data), data=data)


async def read(tmp_path: Path, *files: SharedFile, limit: int = 50_000) -> list[dict]:
    message = ThreadMessage(text="look at these", author=ALICE, files=files)
    done = await FileReader().read(snapshot(tmp_path / "ws"), message, text_limit=limit)
    assert done.files == ()
    return list(done.blocks)


# --- what a file is ---------------------------------------------------------------------


def riff(body: bytes) -> bytes:
    """A WebP file around ``body`` (the chunks), its RIFF size right."""
    return b"RIFF" + (len(body) + 4).to_bytes(4, "little") + b"WEBP" + body


def test_an_images_format_and_size_are_read_from_its_header() -> None:
    gif = b"GIF89a" + struct.pack("<HH", 320, 200) + b"\x00" * 8 + b"\x3b"
    sof = b"\xff\xc0" + struct.pack(">HBHH", 17, 8, 480, 640) + b"\x03" + b"\x00" * 9
    jpeg = b"\xff\xd8" + b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00" + b"\x00" * 9 + sof
    jpeg += b"\xff\xd9"
    vp8x = b"VP8X" + b"\x0a\x00\x00\x00" + b"\x00" * 4
    vp8x = riff(vp8x + (1919).to_bytes(3, "little") + (1079).to_bytes(3, "little"))
    bits = (99) | (49 << 14)
    vp8l = riff(b"VP8L\x00\x00\x00\x00\x2f" + bits.to_bytes(4, "little"))
    vp8 = riff(b"VP8 \x00\x00\x00\x00\x00\x00\x00\x9d\x01\x2a" + struct.pack("<HH", 800, 600))

    assert image_info(png(3, 2)) == ImageInfo("image/png", 3, 2)
    assert image_info(gif) == ImageInfo("image/gif", 320, 200)
    assert image_info(jpeg) == ImageInfo("image/jpeg", 640, 480)
    assert image_info(vp8x) == ImageInfo("image/webp", 1920, 1080)
    assert image_info(vp8l) == ImageInfo("image/webp", 100, 50)
    assert image_info(vp8) == ImageInfo("image/webp", 800, 600)
    assert image_info(png(3, 2)[:20]) is None  # cut short
    assert image_info(b"\xff\xd8\xff\xe0\x00\x10JFIF") is None  # no frame header
    assert image_info(b"%PDF-1.7") is None
    assert image_info(b"") is None


def test_an_image_that_is_not_whole_is_not_taken_for_one() -> None:
    """A truncated or overwritten upload would be refused by the API on every later
    turn of the conversation: it is not sent as an image."""
    whole = png(10, 10)
    assert image_info(whole[:33] + b"junk" * 20) is None  # a real header, then junk
    assert image_info(whole[:-12]) is None  # no IEND
    broken = bytearray(whole)
    broken[40] ^= 0xFF  # a byte of IDAT changed: its CRC is wrong
    assert image_info(bytes(broken)) is None
    gif = b"GIF89a" + struct.pack("<HH", 3, 2) + b"\x00" * 8
    assert image_info(gif) is None and image_info(gif + b"\x3b") is not None
    sof = b"\xff\xc0" + struct.pack(">HBHH", 17, 8, 2, 3) + b"\x03" + b"\x00" * 9
    jpeg = b"\xff\xd8" + sof
    assert image_info(jpeg) is None and image_info(jpeg + b"\xff\xd9") is not None
    webp = riff(b"VP8L\x00\x00\x00\x00\x2f" + (1 | (1 << 14)).to_bytes(4, "little"))
    assert image_info(webp[:-1]) is None and image_info(webp) is not None


def test_text_is_told_by_its_type_or_name_and_decided_by_its_bytes() -> None:
    assert looks_like_text("notes.bin", "text/plain; charset=utf-8")
    assert looks_like_text("main.rs", "application/octet-stream")
    assert looks_like_text("Dockerfile", "")
    assert looks_like_text("data", "application/json")
    assert not looks_like_text("report.pdf", "application/pdf")
    assert as_text("\ufeffhé".encode()) == "hé"
    assert as_text(b"\xff\xfe\x00a") is None  # not UTF-8
    assert as_text(b"a\x00b") is None  # NUL: binary


# --- saving into the workspace -----------------------------------------------------------


def test_a_saved_file_keeps_to_the_workspace_and_never_overwrites(tmp_path: Path) -> None:
    assert safe_name("../../etc/passwd") == "passwd"
    assert safe_name("..\\..\\boot.ini") == "boot.ini"
    assert safe_name(".bashrc") == "bashrc"
    assert safe_name("rm -rf $(x);.sh") == "rm -rf _x_.sh"
    assert safe_name("-rf x.sh") == "rf x.sh"
    assert safe_name("...") == "file"
    assert safe_name("a" * 300 + ".log").endswith("a.log") and len(safe_name("a" * 300)) == 120

    first = save_shared(tmp_path, "../../notes.txt", b"one")
    second = save_shared(tmp_path, "notes.txt", b"two")
    outside = tmp_path.parent / "planted.txt"
    os.symlink(outside, tmp_path / SHARED_DIR / "notes-3.txt")  # a command left a link
    third = save_shared(tmp_path, "notes.txt", b"three")

    assert (first, second, third) == (
        f"{SHARED_DIR}/notes.txt",
        f"{SHARED_DIR}/notes-2.txt",
        f"{SHARED_DIR}/notes-4.txt",
    )
    assert [(tmp_path / p).read_bytes() for p in (first, second, third)] == [
        b"one",
        b"two",
        b"three",
    ]
    assert not outside.exists()


def test_a_shared_folder_that_is_a_symlink_is_refused(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    workspace = tmp_path / "ws"
    workspace.mkdir()
    os.symlink(elsewhere, workspace / SHARED_DIR)

    with pytest.raises(OSError):
        save_shared(workspace, "x.txt", b"x")
    assert list(elsewhere.iterdir()) == []


# --- what the model reads ----------------------------------------------------------------


async def test_an_image_is_an_image_block_and_a_text_file_is_inlined(tmp_path: Path) -> None:
    image = png(4, 3)
    blocks = await read(
        tmp_path,
        shared("screen.jpg", image, "image/jpeg"),  # the bytes say PNG: sent as PNG
        shared("pytest.log", LOG.encode(), "text/plain"),
    )

    assert blocks == [
        {
            "type": "text",
            "text": f"[alice shared screen.jpg (image/png, {len(image)} bytes, 4x3 px)]",
        },
        {
            "type": "image",
            "source": {
                "type": "base64",
                "media_type": "image/png",
                "data": base64.b64encode(image).decode(),
            },
        },
        {
            "type": "text",
            "text": f"[alice shared pytest.log (text/plain, {len(LOG)} characters)]\n"
            f'<file name="pytest.log">\n{LOG}\n</file>',
        },
    ]
    assert not (tmp_path / "ws").exists()  # nothing to save, no workspace made


async def test_text_past_the_limit_is_saved_with_a_note_saying_where(tmp_path: Path) -> None:
    long = "x" * 120 + "\n"
    blocks = await read(
        tmp_path,
        shared("short.md", b"# hi\n"),
        shared("long.txt", long.encode(), "text/plain"),
        limit=100,
    )

    assert blocks[0]["text"].endswith('<file name="short.md">\n# hi\n\n</file>')
    assert blocks[1] == {
        "type": "text",
        "text": "[alice shared long.txt (text/plain, 121 characters); too long to show inline "
        f"(100 characters a message); saved in your workspace as {SHARED_DIR}/long.txt]",
    }
    assert (tmp_path / "ws" / SHARED_DIR / "long.txt").read_text() == long


async def test_other_kinds_are_saved_and_described_by_name_type_and_size(tmp_path: Path) -> None:
    pdf = b"%PDF-1.7\n" + b"\x00\x01" * 1000
    blocks = await read(
        tmp_path,
        shared("../report.pdf", pdf, "application/pdf"),
        shared("latin1.txt", "café".encode("latin-1"), "text/plain"),
    )

    assert [b["text"] for b in blocks] == [
        f"[alice shared ../report.pdf (application/pdf, 2.0 KB); saved in your workspace as "
        f"{SHARED_DIR}/report.pdf]",
        f"[alice shared latin1.txt (text/plain, 4 bytes); saved in your workspace as "
        f"{SHARED_DIR}/latin1.txt]",
    ]
    assert (tmp_path / "ws" / SHARED_DIR / "report.pdf").read_bytes() == pdf


async def test_an_image_past_the_api_limits_is_saved_not_sent(tmp_path: Path) -> None:
    wide = png(8001, 1)
    heavy = png(2, 2) + b"\x00" * (4 * 1024 * 1024)  # over 5 MB once base64
    blocks = await read(tmp_path, shared("wide.png", wide), shared("heavy.png", heavy))

    assert [b["type"] for b in blocks] == ["text", "text"]
    assert (
        "8001x1 px is more than the 8000x8000 px the model takes; saved in your"
        in (blocks[0]["text"])
    )
    assert (
        "it is over the model's 5 MB limit for an image; saved in your workspace as"
        in (blocks[1]["text"])
    )
    assert (tmp_path / "ws" / SHARED_DIR / "heavy.png").read_bytes() == heavy


async def test_a_conversation_shows_at_most_twenty_images(tmp_path: Path) -> None:
    image = png(2, 2)
    shown = ThreadMessage(
        text="", author=ALICE, files=tuple(shared(f"{n}.png", image) for n in range(19))
    )
    first = await FileReader().read(snapshot(tmp_path / "ws"), shown)
    entry = UserText(author=ALICE, text="", files=first.blocks)
    journal = (JournalRecord(seq=1, at="2026-01-01T00:00:00Z", entry=entry),)
    more = ThreadMessage(
        text="two more", author=ALICE, files=(shared("a.png", image), shared("b.png", image))
    )

    blocks = (await FileReader().read(snapshot(tmp_path / "ws", journal), more)).blocks

    assert [b["type"] for b in blocks] == ["text", "image", "text"]
    assert blocks[2]["text"].startswith("[alice shared b.png (image/png")
    assert (
        f"already shows the model {MAX_IMAGES} images, the most it can; saved"
        in (blocks[2]["text"])
    )


async def test_a_file_not_fetched_is_described_with_why(tmp_path: Path) -> None:
    missing = SharedFile(
        name="x.png", media_type="image/png", size=2048, problem="couldn't fetch it: HTTP 404"
    )
    assert await read(tmp_path, missing) == [
        {
            "type": "text",
            "text": "[alice shared x.png (image/png, 2.0 KB); couldn't fetch it: HTTP 404]",
        }
    ]


async def test_a_workspace_that_cannot_take_a_file_is_said(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / SHARED_DIR).write_text("a file where the folder goes")

    blocks = await read(tmp_path, shared("a.zip", b"PK\x03\x04"))

    assert blocks[0]["text"].startswith(
        "[alice shared a.zip (application/octet-stream, 4 bytes); it could not be saved in "
        "your workspace: "
    )


def test_the_history_sends_the_files_before_the_words_the_same_after_a_reload() -> None:
    files = (
        {"type": "text", "text": "[alice shared a.png (image/png, 68 bytes, 3x2 px)]"},
        {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0K"},
        },
    )
    entry = UserText(author=ALICE, text="what is wrong here?", files=files)
    alone = UserText(author=ALICE, text=" ", role="note", files=files[:1])
    journal = [
        JournalRecord(seq=1, at="2026-01-01T00:00:00Z", entry=entry),
        JournalRecord(seq=2, at="2026-01-01T00:00:01Z", entry=alone),
    ]
    stored = [JournalRecord.model_validate_json(r.model_dump_json()) for r in journal]

    messages = build_messages(journal)

    assert messages == [
        {
            "role": "user",
            "content": [*files, {"type": "text", "text": "alice: what is wrong here?"}, files[0]],
        }
    ]
    assert json.dumps(build_messages(stored)) == json.dumps(messages)


# --- through the engine ------------------------------------------------------------------


async def test_the_engine_journals_what_the_model_read_of_each_message(tmp_path: Path) -> None:
    store = MemoryStore(render=render_event)
    cid = await store.threads.open_conversation(
        delivery_key="m1",
        binding=PlatformRef(platform="console", channel="c", thread="t"),
        requester=ALICE,
        workspace_root=tmp_path,
        position="planning",
    )
    assert cid is not None
    ask = ScriptedTurn(calls=[ScriptedCall("ask_user", {"question": "Which one?"})])
    model = ScriptedModel([ask, ScriptedTurn(calls=[ScriptedCall("finish", {"answer": "Done."})])])
    engine = Engine(
        journal=store.journal,
        model=model,
        toolbox=Toolbox(control_tools()),
    )
    image = png(2, 2)

    await engine.start(
        cid, ThreadMessage(text="fix it", author=ALICE, files=(shared("a.png", image),))
    )
    answer = ThreadMessage(text="this one", author=ALICE, files=(shared("b.log", b"boom\n"),))
    await engine.reply(cid, answer)

    said = [
        r.entry for r in (await store.journal.load(cid)).journal if isinstance(r.entry, UserText)
    ]
    assert [(u.role, [b["type"] for b in u.files]) for u in said] == [
        ("request", ["text", "image"]),
        ("answer", ["text"]),
    ]
    first, second = model.requests
    assert first.messages[0]["content"][1:] == [
        *said[0].files,
        {"type": "text", "text": "alice: fix it"},
    ]  # after the step's instructions
    assert second.messages[0] == first.messages[0]
    assert said[1].files[0] in second.messages[-1]["content"]
    assert "boom" in said[1].files[0]["text"]
