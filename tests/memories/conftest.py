"""The personas fixture creates three users with passwords; a fast hasher keeps that off every test's clock."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def fast_password_hasher(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
