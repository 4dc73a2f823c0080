"""Sign-in and sign-up are throttled per account and per address: after the limit of wrong passwords even the
right one is refused for a while, for that account from anywhere and from that address for any account."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.conftest import make_user


def sign_in(username: str, password: str, address: str) -> int:
    response = Client(REMOTE_ADDR=address).post(
        "/accounts/login/", {"username": username, "password": password}
    )
    return response.status_code


@pytest.fixture
def limit(settings) -> int:
    settings.AXES_FAILURE_LIMIT = 3
    return 3


def test_it_locks_an_account_after_repeated_wrong_passwords(personas, limit):
    assert sign_in("alice", "pw-alice", "10.0.0.1") == 302  # the right password works at first
    for _ in range(limit - 1):
        assert sign_in("alice", "wrong", "10.0.0.1") == 200  # the form again, with an error
    assert sign_in("alice", "wrong", "10.0.0.1") == 429  # the limit-th failure locks
    assert sign_in("alice", "pw-alice", "10.0.0.1") == 429
    # Per account: another address does not unlock alice, and bob is not affected.
    assert sign_in("alice", "pw-alice", "10.0.0.2") == 429
    assert sign_in("bob", "pw-bob", "10.0.0.2") == 302


def test_it_locks_an_address_that_tries_many_accounts(personas, limit):
    for name in ("alice", "bob"):
        assert sign_in(name, "wrong", "10.0.0.9") == 200
    assert sign_in("charlie", "wrong", "10.0.0.9") == 429
    assert sign_in("bob", "pw-bob", "10.0.0.9") == 429
    assert sign_in("bob", "pw-bob", "10.0.0.10") == 302


def test_it_shows_a_page_that_says_why(personas, limit):
    for _ in range(limit):
        sign_in("alice", "wrong", "10.0.0.3")
    response = Client(REMOTE_ADDR="10.0.0.3").post("/accounts/login/", {"username": "alice", "password": "x"})
    assert response.status_code == 429 and b"Too many failed sign-ins" in response.content
    assert response["Content-Security-Policy"]


def test_it_limits_sign_ups_per_address(settings):
    settings.DASHBOARD_SIGNUP_ENABLED = True
    settings.SIGNUP_PER_ADDRESS_PER_HOUR = 2
    client = Client(REMOTE_ADDR="10.0.1.1")
    for n in range(2):
        body = {"username": f"new{n}", "password1": "a-long-Passw0rd!", "password2": "a-long-Passw0rd!"}
        assert client.post("/accounts/signup/", body).status_code == 302
        client.logout()
    refused = client.post(
        "/accounts/signup/",
        {"username": "new9", "password1": "a-long-Passw0rd!", "password2": "a-long-Passw0rd!"},
    )
    assert refused.status_code == 429 and b"Too many sign-ups" in refused.content
    other = Client(REMOTE_ADDR="10.0.1.2").post(
        "/accounts/signup/",
        {"username": "new8", "password1": "a-long-Passw0rd!", "password2": "a-long-Passw0rd!"},
    )
    assert other.status_code == 302
    assert make_user("unrelated")  # the limit is on the sign-up form only
