"""The SDK tests drive cairn_sdk against a real server of the project: pytest-django's live server (a thread
of this process serving the WSGI app over real HTTP) on the committed test database."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from cairn_sdk import Cairn
from django.contrib.auth import get_user_model
from django.db import connections
from django_q.models import OrmQ
from django_q.signing import SignedPackage

from pipeline import background, tasks
from tenancy import services
from tenancy.models import Workspace
from tests.graphsvc.conftest import fake_llm  # noqa: F401 - the fake model server, for the graph's jobs
from tests.helpers.flaky_proxy import FlakyProxy

# The live server answers from another thread, so data must be committed: every test module here marks itself
# django_db(transaction=True) (the database is flushed after each test).
LIVE = pytest.mark.django_db(transaction=True, databases="__all__")


@dataclass
class Account:
    user: Any
    key: str

    def workspace(self) -> Workspace:
        return services.personal_workspace_ensure(user=self.user)


def account(username: str) -> Account:
    user = get_user_model().objects.create_user(username, email=f"{username}@example.com", password="pw")
    return Account(user=user, key=services.api_key_create(user=user, scope="admin").raw_key)


@pytest.fixture
def alice() -> Account:
    return account("sdk-alice")


@pytest.fixture
def bob() -> Account:
    return account("sdk-bob")


@pytest.fixture
def base_url(live_server) -> str:
    return live_server.url


@pytest.fixture
def proxy(live_server) -> Iterator[FlakyProxy]:
    """A failing-on-purpose proxy in front of the live server; a test sets its `plan`."""
    flaky = FlakyProxy(upstream=live_server.url)
    flaky.url = flaky.start()
    yield flaky
    flaky.stop()


@pytest.fixture
def cairn(base_url: str, alice: Account) -> Iterator[Cairn]:
    with Cairn(alice.key, base_url=base_url, timeout=30) as client:
        yield client


@pytest.fixture(autouse=True)
def transfer_dir(settings: Any, tmp_path: Path) -> Path:
    """Uploads and export files of a test live in its own directory (web and worker share it)."""
    settings.EXPORT_IMPORT_DIR = str(tmp_path / "transfer")
    return tmp_path / "transfer"


@dataclass
class Worker:
    """A background-job worker beside the live server, as `manage.py qcluster` would be: a thread that takes
    the queued job messages off the broker, oldest first, and runs them with the real task function, so an
    SDK call that waits for a job sees it go from queued to its end over HTTP. `paused` holds jobs queued."""

    poll_seconds: float = 0.02
    ran: list[str] = field(default_factory=list)  # job ids, in the order they ran
    failures: list[BaseException] = field(default_factory=list)
    paused: threading.Event = field(default_factory=threading.Event)
    _stop: threading.Event = field(default_factory=threading.Event)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="sdk-test-worker", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=60)

    def _loop(self) -> None:
        try:
            while not self._stop.is_set():
                if self.paused.is_set() or not self._run_one():
                    self._stop.wait(self.poll_seconds)
        except BaseException as exc:  # noqa: BLE001 - reported by the fixture, in the test's thread
            self.failures.append(exc)
        finally:
            connections.close_all()

    def _run_one(self) -> bool:
        for message in OrmQ.objects.using("app").order_by("id"):
            task = SignedPackage.loads(message.payload)
            if task["func"] != background.RUN_TASK:
                continue
            message.delete()
            tasks.background_job_run(*task["args"])
            self.ran.append(str(task["args"][1]))
            return True
        return False


@pytest.fixture
def worker() -> Iterator[Worker]:
    running = Worker()
    running.start()
    yield running
    running.stop()
    assert not running.failures, running.failures
