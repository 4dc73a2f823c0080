"""Playwright helpers for the browser tests: Debian's chromium (never Playwright's own download), one browser
and one live server for all of them, signed-in pages per persona at the two sizes every page is checked at,
screenshots kept under test-artifacts/browser/."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.test import Client

CHROMIUM = os.environ.get("CAIRN_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
ARTIFACTS = Path(os.environ.get("CAIRN_TEST_ARTIFACTS", settings.BASE_DIR / "test-artifacts")) / "browser"
DESKTOP = {"width": 1440, "height": 900}
PHONE = {"width": 390, "height": 844}
SIZES = {"desktop": DESKTOP, "phone": PHONE}


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


def session_cookie(user: Any) -> str:
    client = Client()
    client.force_login(user)
    return client.cookies[settings.SESSION_COOKIE_NAME].value


def signed_in_page(
    browser: Any,
    base_url: str,
    session: str | None,
    problems: list[str],
    viewport: dict[str, int] | None = None,
) -> Any:
    """A page whose browser carries the session cookie `session` (session_cookie(user), made where the live
    server can read it: committed, not inside a test's transaction). Signing in through the form is tested
    once."""
    context = browser.new_context(base_url=base_url, viewport=viewport or DESKTOP)
    if session is not None:
        context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": session, "url": base_url}])
    context.set_default_timeout(20_000)
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


def screenshot(page: Any, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path))
    return path


def wait_until(page: Any, expression: str, timeout: float = 20.0) -> None:
    """Poll an expression: page.wait_for_function would need eval, which the page's CSP (rightly) refuses."""
    deadline = time.monotonic() + timeout
    while not page.evaluate(expression):
        assert time.monotonic() < deadline, f"timed out waiting for {expression}"
        page.wait_for_timeout(50)


def sideways_overflow(page: Any) -> int:
    """How many pixels the page scrolls sideways (0: none)."""
    return int(page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth"))
