"""Splitting a long answer into chat-sized chunks without losing text or breaking code."""

from __future__ import annotations

import random
import re

import pytest

from conversations.textsplit import split_text

FENCE = re.compile(r"^ {0,3}(`{3,})([^`\n]*)$", re.MULTILINE)


def fence_lines(chunk: str) -> list[str]:
    return [m.group(0).strip() for m in FENCE.finditer(chunk)]


def assert_balanced(chunk: str) -> None:
    """Fence lines pair up: an opener (maybe with info), then a bare closer."""
    lines = fence_lines(chunk)
    assert len(lines) % 2 == 0, chunk
    assert all(closer.strip("`") == "" for closer in lines[1::2]), lines


def reassemble(original: str, chunks: list[str]) -> None:
    """Each chunk, minus a fence the splitter added at either end, is the next piece
    of ``original``; only whitespace lies between pieces."""
    pos = 0
    for chunk in chunks:
        variants = [chunk]
        head = re.match(r"`{3,}[^`\n]*\n", chunk)
        tail = re.search(r"\n`{3,}$", chunk)
        if head:
            variants.append(chunk[head.end() :])
        if tail:
            variants.append(chunk[: tail.start()])
        if head and tail:
            variants.append(chunk[head.end() : tail.start()])
        for variant in variants:
            found = original.find(variant, pos)
            if found >= 0 and not original[pos:found].strip():
                pos = found + len(variant)
                break
        else:
            raise AssertionError(f"chunk does not continue the text at {pos}: {chunk[:80]!r}")
    assert not original[pos:].strip(), "text was lost at the end"


def prose(rng: random.Random, words: int) -> str:
    vocabulary = "the login test fails when a session is shared across workers so we".split()
    return " ".join(rng.choice(vocabulary) for _ in range(words))


def long_answer(size: int, seed: int = 7) -> str:
    """Paragraphs, lists and code blocks (some longer than a chunk), at least ``size`` chars."""
    rng = random.Random(seed)
    parts: list[str] = []
    languages = ["python", "bash", "", "diff"]
    n = 0
    while sum(len(p) + 2 for p in parts) < size:
        n += 1
        if n % 3 == 0:
            lines = size // 100 if n == 6 else rng.randint(3, 30)
            body = "\n".join(
                f"    line_{i} = compute({i}, {prose(rng, 3)!r})" for i in range(lines)
            )
            parts.append(f"```{languages[n % len(languages)]}\n{body}\n```")
        elif n % 3 == 1:
            parts.append("\n".join(f"- {prose(rng, 8)}" for _ in range(rng.randint(2, 6))))
        else:
            parts.append(prose(rng, rng.randint(20, 120)))
    return "\n\n".join(parts) + "\n\nThe end."


@pytest.mark.parametrize(("size", "limit"), [(20_000, 3_900), (5_000, 2_000)])
def test_a_long_answer_with_code_blocks_splits_into_balanced_chunks(size: int, limit: int) -> None:
    text = long_answer(size)
    assert size <= len(text) < size * 1.5
    assert len(FENCE.findall(text)) >= 6

    chunks = split_text(text, limit)

    assert len(chunks) >= size // limit
    for chunk in chunks:
        assert 0 < len(chunk) <= limit
        assert_balanced(chunk)
    reassemble(text, chunks)
    assert any(c.startswith("```") for c in chunks[1:]), "a block was cut and reopened"
    assert chunks[-1].endswith("The end.")


def test_a_code_block_cut_in_two_is_closed_and_reopened_with_its_language() -> None:
    code = "\n".join(f"    print({i})" for i in range(40))
    text = f"Here is the fix:\n\n```python\n{code}\n```\n\nRun it twice."

    chunks = split_text(text, 200)

    assert len(chunks) > 2
    assert chunks[0].endswith("\n```")
    for chunk in chunks[1:-1]:
        assert chunk.startswith("```python\n    print(")
        assert chunk.endswith("\n```")
    assert all(len(c) <= 200 for c in chunks)
    reassemble(text, chunks)
    # indentation survives at the start of a reopened block
    assert all(
        line.startswith("    ") for c in chunks[1:-1] for line in c.splitlines()[1:-1] if line
    )


def test_paragraph_boundaries_win_over_lines_and_words() -> None:
    first = "word " * 12 + "end of one."
    second = "line a\nline b\nline c " + "more " * 10
    text = f"{first}\n\n{second}"

    chunks = split_text(text, len(first) + 10)

    assert chunks[0] == first
    assert chunks[1].startswith("line a")


def test_line_then_word_boundaries_when_there_is_no_paragraph() -> None:
    lines = "\n".join(f"line number {i:02d}" for i in range(10))
    chunks = split_text(lines, 45)
    assert all(c.startswith("line number") and c.endswith(tuple("0123456789")) for c in chunks)
    reassemble(lines, chunks)

    words = " ".join(f"w{i}" for i in range(40))
    chunks = split_text(words, 30)
    assert all(not c.startswith(" ") and not c.endswith(" ") for c in chunks)
    assert " ".join(chunks) == words


def test_text_without_whitespace_is_cut_hard() -> None:
    text = "x" * 95
    assert split_text(text, 20) == ["x" * 20] * 4 + ["x" * 15]


def test_short_and_empty_text() -> None:
    assert split_text("hello", 20) == ["hello"]
    assert split_text("", 20) == []
    exact = "y" * 20
    assert split_text(exact, 20) == [exact]


def test_a_limit_below_twenty_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 20"):
        split_text("anything", 19)


def test_a_long_info_string_is_dropped_when_reopening_would_not_fit() -> None:
    text = "```typescript-react\n" + "\n".join(["code"] * 30) + "\n```"

    chunks = split_text(text, 40)

    assert all(len(c) <= 40 for c in chunks)
    assert chunks[0].startswith("```typescript-react\n")
    assert all(c.startswith("```\ncode") for c in chunks[1:])
    for chunk in chunks:
        assert_balanced(chunk)
    reassemble(text, chunks)


def test_an_unclosed_code_block_is_not_closed_at_the_very_end() -> None:
    text = "intro\n\n```\n" + "\n".join(f"row {i}" for i in range(30))

    chunks = split_text(text, 60)

    assert all(len(c) <= 60 for c in chunks)
    assert chunks[-1].startswith("```\n")
    assert not chunks[-1].endswith("```")
    reassemble(text, chunks)


def test_never_splits_to_leave_an_empty_code_block() -> None:
    text = "p " * 30 + "\n```\n" + "x = 1\n" * 10 + "```"

    chunks = split_text(text, 50)

    assert all(not c.endswith("```\n```") and not c.startswith("```\n```") for c in chunks)
    reassemble(text, chunks)
