"""The integrations (TypeScript SDK, Vercel AI SDK tools, LangGraph store, LlamaIndex memory, MCP recipes)
against a real server of the project: pytest-django's live server on the committed test database, as the
Python SDK's tests use it. Node test files get its address and keys in their environment."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.flaky_proxy import FlakyProxy
from tests.sdk.conftest import LIVE, Account, Worker, account

ROOT = Path(__file__).resolve().parents[2]
NODE = shutil.which("node") or "/usr/bin/node"
NPM = shutil.which("npm") or "/usr/bin/npm"

__all__ = ["LIVE", "Account", "ROOT", "Worker", "node_package", "run_node_tests"]


class ControlledProxy(FlakyProxy):
    """FlakyProxy that a Node test steers over HTTP: POST /__plan sets the plan (a JSON list of actions),
    GET /__seen lists what went through it. Adds the action `429`: a rate-limit envelope with
    Retry-After: 1."""

    def _act(
        self, action: str, method: str, path: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        if path == "/__plan":
            self.plan[:] = [str(step) for step in json.loads(body or b"[]")]
            self.seen.clear()
            return 204, {}, b""
        if path == "/__seen":
            seen = [
                {
                    "method": s.method,
                    "path": s.path,
                    "action": s.action,
                    "status": s.status,
                    "idempotencyKey": next(
                        (v for k, v in s.headers.items() if k.lower() == "idempotency-key"), None
                    ),
                }
                for s in self.seen
                if not s.path.startswith("/__")
            ]
            return 200, {"Content-Type": "application/json"}, json.dumps(seen).encode()
        if action == "429":
            envelope = {
                "ok": False,
                "data": None,
                "error": {
                    "type": "rate_limit_error",
                    "code": "RATE_LIMITED",
                    "message": "Too many requests; retry after 1 s.",
                    "status": 429,
                    "retryable": True,
                    "details": {"retryAfterSeconds": 1},
                },
                "meta": {"version": "test", "endpoint": path, "requestId": "proxy-429", "timestamp": ""},
            }
            return (
                429,
                {"Content-Type": "application/json", "Retry-After": "1"},
                json.dumps(envelope).encode(),
            )
        return super()._act(action, method, path, headers, body)


@pytest.fixture
def alice() -> Account:
    return account("int-alice")


@pytest.fixture
def bob() -> Account:
    return account("int-bob")


@pytest.fixture
def base_url(live_server) -> str:
    return live_server.url


@pytest.fixture
def controlled_proxy(live_server) -> Iterator[ControlledProxy]:
    proxy = ControlledProxy(upstream=live_server.url)
    proxy.url = proxy.start()
    yield proxy
    proxy.stop()


@pytest.fixture
def worker() -> Iterator[Worker]:
    running = Worker()
    running.start()
    yield running
    running.stop()
    assert not running.failures, running.failures


@pytest.fixture(autouse=True)
def transfer_dir(settings, tmp_path: Path) -> Path:
    settings.EXPORT_IMPORT_DIR = str(tmp_path / "transfer")
    return tmp_path / "transfer"


def node_package(directory: Path) -> Path:
    """The Node package at `directory`, its dependencies installed (npm ci, once: `make install` does it too)
    and built from the current sources."""
    if not (directory / "node_modules").is_dir():
        subprocess.run([NPM, "ci", "--no-audit", "--no-fund"], cwd=directory, check=True, capture_output=True)
    build = subprocess.run([NPM, "run", "build"], cwd=directory, capture_output=True, text=True)
    assert build.returncode == 0, build.stdout[-4000:] + build.stderr[-4000:]
    return directory


def run_node_tests(directory: Path, env: dict[str, str], *, expect: int, timeout: float = 300) -> str:
    """`node --test` over the package's test/ directory with `env`; fails with the runner's report unless
    exactly `expect` tests ran and passed (a file that failed to load, or a skipped test, still exits 0)."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("CAIRN_")}
    environment.update(env)
    result = subprocess.run(
        [NODE, "--test", "--test-reporter=spec", "--test-concurrency=1", "test/"],
        cwd=directory,
        env=environment,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    report = result.stdout + result.stderr
    assert result.returncode == 0, report[-8000:]
    counts = {
        name: int(n)
        for name, n in re.findall(r"^\S* ?(tests|pass|fail|skipped|todo|cancelled) (\d+)$", report, re.M)
    }
    assert counts == {"tests": expect, "pass": expect, "fail": 0, "skipped": 0, "todo": 0, "cancelled": 0}, (
        report[-4000:]
    )
    return report
