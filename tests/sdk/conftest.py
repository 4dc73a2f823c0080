"""The SDK tests drive cairn_sdk against a real server of the project: pytest-django's live server (a thread
of this process serving the WSGI app over real HTTP) on the committed test database."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from cairn_sdk import Cairn
from django.contrib.auth import get_user_model

from tenancy import services
from tenancy.models import Workspace
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
