"""Sign-in is throttled per (account, address): wrong passwords pause that pair, never the owner signing in
from another address. Slower limits pause an account guessed at from many addresses (one wrong password per
address from then on; a fresh address still signs in) and an address trying many accounts. Sign-up is limited
per address."""

from __future__ import annotations

import pytest
from axes.models import AccessFailureLog
from django.test import Client

from tests.conftest import make_user


def sign_in(username: str, password: str, address: str) -> int:
    response = Client(REMOTE_ADDR=address).post(
        "/accounts/login/", {"username": username, "password": password}
    )
    return response.status_code


@pytest.fixture
def limit(settings) -> int:
    settings.SIGNIN_FAILURE_LIMIT = 3
    return 3


def test_it_locks_an_account_from_one_address_after_repeated_wrong_passwords(personas, limit):
    assert sign_in("alice", "pw-alice", "10.0.0.1") == 302  # the right password works at first
    for _ in range(limit - 1):
        assert sign_in("alice", "wrong", "10.0.0.1") == 200  # the form again, with an error
    assert sign_in("alice", "wrong", "10.0.0.1") == 429  # the limit-th failure locks
    assert sign_in("alice", "pw-alice", "10.0.0.1") == 429
    # Per pair: the owner from another address still signs in, and bob from the same address too.
    assert sign_in("alice", "pw-alice", "10.0.0.2") == 302
    assert sign_in("bob", "pw-bob", "10.0.0.1") == 302


def test_it_never_lets_a_stranger_who_knows_the_username_lock_the_owner_out(personas, limit):
    for attacker in ("10.9.0.1", "10.9.0.2", "10.9.0.3"):
        for _ in range(limit):
            sign_in("alice", "wrong", attacker)
        assert sign_in("alice", "pw-alice", attacker) == 429
    assert sign_in("alice", "pw-alice", "192.168.1.10") == 302  # the owner's own address


def test_it_slows_an_account_guessed_at_from_many_addresses(personas, limit, settings):
    settings.SIGNIN_ACCOUNT_FAILURE_LIMIT = 4
    for attacker in ("10.8.0.1", "10.8.0.2"):
        for _ in range(2):
            assert sign_in("alice", "wrong", attacker) == 200  # under the pair limit of 3
    assert AccessFailureLog.objects.filter(username="alice").count() == 4
    # Past the account's limit: an address that failed once for alice is paused, even below the pair limit ...
    assert sign_in("alice", "pw-alice", "10.8.0.1") == 429
    # ... a new address gets one wrong password, not three ...
    assert sign_in("alice", "wrong", "10.8.0.3") == 429
    assert sign_in("alice", "pw-alice", "10.8.0.3") == 429
    # ... and the owner from an address that never failed still signs in; other accounts are unaffected.
    assert sign_in("alice", "pw-alice", "192.168.1.10") == 302
    assert sign_in("bob", "pw-bob", "10.8.0.1") == 302


def test_it_pauses_an_address_that_tries_many_accounts(personas, limit, settings):
    settings.SIGNIN_ADDRESS_FAILURE_LIMIT = 3
    make_user("dave")
    for name in ("alice", "bob", "charlie"):
        assert sign_in(name, "wrong", "10.0.0.9") == 200
    assert sign_in("dave", "pw-dave", "10.0.0.9") == 429
    assert sign_in("dave", "pw-dave", "10.0.0.10") == 302


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


def test_it_reads_the_address_one_proxy_appended(personas, limit, settings):
    # What TRUSTED_PROXY_COUNT=1 sets: the client is the last X-Forwarded-For entry, REMOTE_ADDR the proxy.
    settings.AXES_IPWARE_PROXY_COUNT = 0
    settings.AXES_IPWARE_META_PRECEDENCE_ORDER = ("HTTP_X_FORWARDED_FOR", "REMOTE_ADDR")

    def behind_proxy(password: str, client: str) -> int:
        proxied = Client(REMOTE_ADDR="10.1.1.1", HTTP_X_FORWARDED_FOR=client)
        return proxied.post("/accounts/login/", {"username": "alice", "password": password}).status_code

    for _ in range(limit):
        behind_proxy("wrong", "203.0.113.50")
    assert behind_proxy("pw-alice", "203.0.113.50") == 429
    assert behind_proxy("pw-alice", "198.51.100.50") == 302
