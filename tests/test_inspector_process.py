"""The run inspector of a real ``threadbot console`` process (``make run`` without a
platform token): with ``THREADBOT_INSPECTOR=true`` and an operator, the banner says its
address, an operator signs in there and reads the pages while the console runs; the
process ends cleanly with its input. Without an operator, it refuses to start (exit 2).
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
from pathlib import Path

import aiohttp

from bot.operators import token_sha256
from tests.cli_harness import clean_env, threadbot
from tests.conftest import wait_for
from tests.inspector_harness import OPERATOR, TOKEN

ADDRESS = re.compile(r"run inspector on (http://\S+)/inspector/")


def inspector_env(tmp_path: Path) -> dict[str, str]:
    return {
        "THREADBOT_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'bot.db'}",
        "THREADBOT_WORKSPACE_ROOT": str(tmp_path / "workspaces"),
        "THREADBOT_CONSOLE_STATE": str(tmp_path / "console.jsonl"),
        "THREADBOT_INSPECTOR": "true",
        "THREADBOT_OPS_PORT": "0",
        "THREADBOT_OPERATORS": json.dumps({OPERATOR: {"token_sha256": token_sha256(TOKEN)}}),
    }


async def test_the_console_serves_the_inspector_while_it_runs(tmp_path: Path) -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        "console",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=tmp_path,
        env=clean_env() | inspector_env(tmp_path),
    )
    assert process.stdout is not None and process.stdin is not None
    said: list[str] = []

    async def read() -> None:
        assert process.stdout is not None
        async for line in process.stdout:
            said.append(line.decode())

    reading = asyncio.create_task(read())
    try:
        await wait_for(lambda: any(ADDRESS.search(line) for line in said))
        [address] = [m.group(1) for line in said if (m := ADDRESS.search(line))]
        jar = aiohttp.CookieJar(unsafe=True)
        async with aiohttp.ClientSession(cookie_jar=jar) as http:
            async with http.get(f"{address}/inspector/usage") as before:
                assert before.status == 401
            form = {"operator": OPERATOR, "token": TOKEN}
            async with http.post(f"{address}/inspector/sign-in", data=form) as signed_in:
                assert signed_in.status == 200  # followed to the page asked for
                assert str(signed_in.url).endswith("/inspector/")
            async with http.get(f"{address}/inspector/usage.json?by=day") as usage:
                assert usage.status == 200
                assert (await usage.json())["lines"] == []
    finally:
        process.stdin.close()
        code = await asyncio.wait_for(process.wait(), 60)
        await reading
    assert code == 0, "".join(said)


def test_without_an_operator_the_inspector_is_a_settings_error(tmp_path: Path) -> None:
    env = inspector_env(tmp_path) | {"THREADBOT_OPERATORS": "{}"}
    done = threadbot(tmp_path, "console", env=env)
    assert done.returncode == 2
    assert "no operator may sign in" in done.stderr
