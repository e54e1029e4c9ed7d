"""Headless Chromium for the run inspector's browser tests, driven by Playwright.

The browser is Debian's ``chromium`` (``apt install chromium``; ``.ci/run`` installs it),
launched by its path: Playwright never downloads one here
(https://playwright.dev/python/docs/api/class-browsertype#browser-type-launch,
``executable_path``). As root, Chromium needs ``--no-sandbox``. Where Playwright or the
browser is missing, the test is skipped with the reason (failed under ``CI=true``).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from typing import Any

import pytest

CANDIDATES = ("chromium", "chromium-browser")
"""The names Debian's (and Ubuntu's) Chromium is on ``PATH`` by."""


def chromium_path() -> str | None:
    """The Chromium binary: ``THREADBOT_CHROMIUM`` when set, else the first of
    :data:`CANDIDATES` on ``PATH``."""
    given = os.environ.get("THREADBOT_CHROMIUM")
    if given:
        return given
    for name in CANDIDATES:
        if found := shutil.which(name):
            return found
    return None


@pytest.fixture
async def browser() -> AsyncIterator[Any]:
    """A headless Chromium (a Playwright ``Browser``), closed after the test."""
    from tests.conftest import _missing  # conftest imports this module for the fixture

    try:
        from playwright.async_api import async_playwright
    except ImportError:
        _missing("playwright is not installed (it is in the dev extra): no browser test")
    path = chromium_path()
    if path is None:
        _missing("Chromium is not installed (apt install chromium): no browser test")
    args = ["--no-sandbox"] if os.geteuid() == 0 else []
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(executable_path=path, args=args, headless=True)
        try:
            yield launched
        finally:
            await launched.close()


async def signed_in_page(browser: Any, address: str, path: str) -> Any:
    """A new page of ``browser`` that asked the inspector at ``address`` for ``path``,
    got the 401, followed its sign-in link and signed in as the harness's operator
    (:mod:`tests.inspector_harness`); it is at ``path`` now."""
    from tests.inspector_harness import OPERATOR, TOKEN

    page = await browser.new_page(viewport={"width": 1280, "height": 900})
    response = await page.goto(address + path)
    assert response is not None and response.status == 401
    await page.click("#sign-in")
    await page.fill("input[name=operator]", OPERATOR)
    await page.fill("input[name=token]", TOKEN)
    async with page.expect_navigation():
        await page.click("form.sign-in button")
    assert page.url == address + path
    return page
