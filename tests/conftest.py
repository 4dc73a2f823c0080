"""Shared fixtures: the fixed personas and an SDK client that speaks the envelope.

alice owns org "acme", bob is a member of acme, charlie is an outsider with his own org "globex".
Every test gets the database (both aliases: the owner and the runtime role) unless it marks itself.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from tenancy import services
from tenancy.models import Workspace


@pytest.fixture(autouse=True)
def fast_password_hasher(settings: Any) -> None:
    """The personas have passwords; a fast hasher keeps hashing them off every test's clock."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


# Browser tests collected while chromium is missing (they skip): the run's summary says so in red.
_WITHOUT_CHROMIUM = pytest.StashKey[list[str]]()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("django_db") is None:
            item.add_marker(pytest.mark.django_db(databases="__all__"))
    from tests.dashboard.browser import CHROMIUM, chromium_available

    if chromium_available():
        return
    skipped = [item.nodeid for item in items if "browser" in getattr(item, "fixturenames", ())]
    config.stash[_WITHOUT_CHROMIUM] = skipped
    if skipped:
        config.issue_config_time_warning(
            pytest.PytestWarning(f"{len(skipped)} browser tests will skip: no chromium at {CHROMIUM}"),
            stacklevel=2,
        )


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    from tests.dashboard.browser import CHROMIUM

    skipped = config.stash.get(_WITHOUT_CHROMIUM, [])
    if not skipped:
        return
    terminalreporter.section("BROWSER TESTS NOT RUN", sep="!", red=True, bold=True)
    terminalreporter.write_line(
        f"{len(skipped)} browser tests skipped (dashboard pages, the TypeScript SDK in a browser): "
        f"no chromium at {CHROMIUM}. Install it (apt-get install -y chromium, as .ci/run does) or point "
        "CAIRN_CHROMIUM at one, then run make test again.",
        red=True,
        bold=True,
    )


API = "/api/sdk/v1"


@dataclass
class SdkClient:
    """A Django test client holding one persona's key."""

    client: Client
    key: str | None

    def post(self, path: str, body: Any = None, *, headers: dict[str, str] | None = None) -> Any:
        extra = {f"HTTP_{name.upper().replace('-', '_')}": value for name, value in (headers or {}).items()}
        if self.key is not None:
            extra.setdefault("HTTP_AUTHORIZATION", f"Bearer {self.key}")
        payload = body if isinstance(body, str | bytes) else json.dumps(body if body is not None else {})
        return self.client.post(f"{API}/{path}", data=payload, content_type="application/json", **extra)

    def get(self, path: str) -> Any:
        extra = {"HTTP_AUTHORIZATION": f"Bearer {self.key}"} if self.key else {}
        return self.client.get(f"{API}/{path}", **extra)

    def ok(
        self, path: str, body: Any = None, *, status: int = 200, headers: dict[str, str] | None = None
    ) -> Any:
        response = self.post(path, body, headers=headers)
        assert response.status_code == status, response.content
        envelope = response.json()
        assert envelope["ok"] is True and envelope["error"] is None
        return envelope["data"]

    def error(self, path: str, body: Any = None, *, status: int, code: str) -> dict[str, Any]:
        response = self.post(path, body)
        assert response.status_code == status, response.content
        envelope = response.json()
        assert envelope["ok"] is False and envelope["data"] is None
        assert envelope["error"]["code"] == code, envelope["error"]
        assert envelope["error"]["status"] == status
        return envelope["error"]

    def add(self, content: str, **fields: Any) -> dict[str, Any]:
        return self.ok("memories/add", {"content": content, **fields}, status=201)["memory"]


@dataclass
class Personas:
    alice: Any
    bob: Any
    charlie: Any
    acme: Workspace
    globex: Workspace
    alice_api: SdkClient
    bob_api: SdkClient
    charlie_api: SdkClient


def make_user(username: str) -> Any:
    return get_user_model().objects.create_user(
        username, email=f"{username}@example.com", password="pw-" + username
    )


def make_key(user: Any) -> str:
    # Admin-scoped: a persona key does what its user's role allows (bob, a member, still only writes).
    return services.api_key_create(user=user, scope="admin").raw_key


@pytest.fixture
def personas() -> Personas:
    alice, bob, charlie = make_user("alice"), make_user("bob"), make_user("charlie")
    acme = services.org_create(owner=alice, slug="acme", name="Acme")
    services.membership_set(org=acme, user=bob, role="member")
    globex = services.org_create(owner=charlie, slug="globex", name="Globex")
    return Personas(
        alice=alice,
        bob=bob,
        charlie=charlie,
        acme=acme,
        globex=globex,
        alice_api=SdkClient(Client(), make_key(alice)),
        bob_api=SdkClient(Client(), make_key(bob)),
        charlie_api=SdkClient(Client(), make_key(charlie)),
    )


@pytest.fixture
def alice_api(personas: Personas) -> SdkClient:
    return personas.alice_api


@pytest.fixture
def alice_ws(personas: Personas) -> int:
    """The id of alice's personal workspace, where her key's unscoped calls land."""
    return services.personal_workspace_ensure(user=personas.alice).id


@pytest.fixture
def ws(alice_ws: int) -> int:
    """The short name some modules use for alice_ws."""
    return alice_ws


@pytest.fixture
def anonymous_api() -> SdkClient:
    return SdkClient(Client(), None)


@pytest.fixture(scope="session")
def local_embedder() -> Any:
    """The real offline default model (the one the pipeline embeds with), loaded once per test session."""
    from django.conf import settings

    from retrieval.embeddings import get_embedder

    embedder = get_embedder(settings.DEFAULT_EMBEDDING_MODEL)
    embedder.warm()
    return embedder
