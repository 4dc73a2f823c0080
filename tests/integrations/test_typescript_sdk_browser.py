"""The TypeScript SDK's built package in a real browser (Debian's chromium): loaded as an ES module from
another origin than the API's, it stores a memory and finds it in context/get across origins (CORS preflight
with the Authorization and Idempotency-Key headers), and a typed error keeps its envelope code."""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.dashboard.browser import browser  # noqa: F401 - the module's chromium
from tests.integrations.conftest import LIVE, ROOT, node_package

SCRIPT = """
async ([apiKey, baseUrl]) => {
  const { Cairn, NotFoundError } = await import("/dist/index.js");
  const cairn = new Cairn({ apiKey, baseUrl });
  const added = await cairn.memories.add({ content: "Browser users sync their drafts every five minutes" });
  const { context } = await cairn.context.get({ query: "how often are drafts synced?" });
  let code = null;
  try {
    await cairn.memories.forget("00000000-0000-0000-0000-000000000000");
  } catch (error) {
    code = error instanceof NotFoundError ? error.code : String(error);
  }
  return { id: added.id, context, code, origin: location.origin };
}
"""


class Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def app_origin() -> Iterator[str]:
    """The web app's own origin: a static server of the package's directory (dist/ is the built SDK)."""
    handler = functools.partial(Quiet, directory=str(node_package(ROOT / "sdk" / "typescript")))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@LIVE
def test_it_runs_in_a_browser_across_origins(browser, app_origin, base_url, alice):  # noqa: F811
    page = browser.new_page()
    problems: list[str] = []
    page.on("console", lambda message: problems.append(message.text) if message.type == "error" else None)
    page.goto(f"{app_origin}/README.md")
    answer = page.evaluate(SCRIPT, [alice.key, base_url])
    page.close()
    assert answer["origin"] == app_origin and not base_url.startswith(app_origin)
    assert "every five minutes" in answer["context"]
    assert answer["code"] == "MEMORY_NOT_FOUND"
    assert [p for p in problems if "404" not in p] == [], problems
