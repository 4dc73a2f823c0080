"""Playwright helpers for the browser tests: Debian's chromium (never Playwright's own download), one browser
for all of them, a signed-in context per persona, screenshots kept under test-artifacts/browser/."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.test import Client

CHROMIUM = os.environ.get("CAIRN_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
ARTIFACTS = Path(os.environ.get("CAIRN_TEST_ARTIFACTS", settings.BASE_DIR / "test-artifacts")) / "browser"


def chromium_available() -> bool:
    return Path(CHROMIUM).exists() or shutil.which(CHROMIUM) is not None


# Module scope, not session: Playwright's sync API keeps an event loop running in this thread while it is
# open, which would break every later test that calls asyncio.run (the MCP tests). All browser tests share one
# module, so this is still one browser for all of them.
@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not chromium_available():
        pytest.skip(f"no chromium at {CHROMIUM} (apt-get install -y chromium, or set CAIRN_CHROMIUM)")
    from playwright.sync_api import sync_playwright

    # That running loop also makes Django's async-safety guard refuse the plain synchronous ORM calls the
    # tests make between browser steps; lift it only while the browser is open.
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            instance = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
            yield instance
            instance.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


def signed_in_page(browser: Any, live_server: Any, user: Any, problems: list[str]) -> Any:
    """A page whose browser carries a session for `user` (signing in through the form is tested once)."""
    client = Client()
    client.force_login(user)
    context = browser.new_context(base_url=live_server.url, viewport={"width": 1400, "height": 900})
    context.add_cookies(
        [
            {
                "name": settings.SESSION_COOKIE_NAME,
                "value": client.cookies[settings.SESSION_COOKIE_NAME].value,
                "url": live_server.url,
            }
        ]
    )
    context.set_default_timeout(15_000)
    page = context.new_page()
    watch(page, problems)
    return page


def watch(page: Any, problems: list[str]) -> None:
    """Collect script errors and CSP refusals: either means a page is broken for real users."""
    page.on("pageerror", lambda error: problems.append(f"pageerror: {error}"))
    page.on(
        "console",
        lambda msg: (
            problems.append(f"console: {msg.text}")
            if msg.type == "error" and "favicon" not in msg.text
            else None
        ),
    )


def screenshot(page: Any, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
