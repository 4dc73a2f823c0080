"""Auth order and codes: missing → format → rate limit → unknown → expired → body."""

from __future__ import annotations

from datetime import timedelta

from django.test import Client
from django.utils import timezone

from tenancy import services
from tenancy.models import ApiKey
from tests.conftest import SdkClient

WELL_FORMED_UNKNOWN = "mem_" + "a" * 64


def test_it_requires_a_key(anonymous_api):
    anonymous_api.error("memories/list", {}, status=401, code="MISSING_API_KEY")


def test_it_checks_the_key_format_before_anything_else():
    for bad in ["mem_123", "mem_" + "A" * 64, "sk_" + "a" * 64, "Basic abc"]:
        api = SdkClient(Client(), None)
        response = api.post("memories/list", {}, headers={"Authorization": f"Bearer {bad}"})
        assert response.status_code == 401
        assert response.json()["error"]["code"] == "INVALID_API_KEY_FORMAT", bad


def test_it_accepts_a_case_insensitive_bearer(personas):
    key = services.api_key_create(user=personas.alice).raw_key
    response = SdkClient(Client(), None).post("memories/list", {}, headers={"Authorization": f"bearer {key}"})
    assert response.status_code == 200


def test_it_rejects_unknown_keys():
    SdkClient(Client(), WELL_FORMED_UNKNOWN).error("memories/list", {}, status=401, code="INVALID_API_KEY")


def test_it_rejects_expired_keys(personas):
    created = services.api_key_create(user=personas.alice)
    ApiKey.objects.filter(pk=created.api_key.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    SdkClient(Client(), created.raw_key).error("memories/list", {}, status=401, code="API_KEY_EXPIRED")


def test_it_rejects_revoked_keys(personas):
    created = services.api_key_create(user=personas.alice)
    services.api_key_revoke(api_key=created.api_key)
    error = SdkClient(Client(), created.raw_key).error(
        "memories/list", {}, status=401, code="INVALID_API_KEY"
    )
    assert "revoked" in error["message"]


def test_it_rejects_keys_of_deactivated_users(personas):
    personas.alice.is_active = False
    personas.alice.save()
    personas.alice_api.error("memories/list", {}, status=401, code="INVALID_API_KEY")


def test_it_authenticates_before_reading_the_body(anonymous_api):
    # An invalid body with no key is still a missing-key error, not a validation error.
    anonymous_api.error("memories/add", {"content": ""}, status=401, code="MISSING_API_KEY")


def test_it_validates_the_body_after_auth(alice_api):
    alice_api.error("memories/add", {"content": ""}, status=400, code="MEMORY_CONTENT_REQUIRED")


def test_it_rate_limits_before_looking_up_the_key(settings):
    settings.RATE_LIMIT_REQUESTS = 3
    api = SdkClient(Client(), WELL_FORMED_UNKNOWN)
    for _ in range(3):
        api.error("memories/list", {}, status=401, code="INVALID_API_KEY")
    error = api.error("memories/list", {}, status=429, code="RATE_LIMITED")
    assert error["type"] == "rate_limit_error"
    assert error["retryable"] is True


def test_it_answers_429_with_retry_after(alice_api, settings):
    settings.RATE_LIMIT_REQUESTS = 2
    alice_api.ok("memories/list", {})
    alice_api.ok("memories/list", {})
    response = alice_api.post("memories/list", {})
    assert response.status_code == 429
    retry_after = response.json()["error"]["details"]["retryAfterSeconds"]
    assert 1 <= retry_after <= 60
    assert response["Retry-After"] == str(retry_after)


def test_it_keeps_separate_budgets_per_key(personas, settings):
    settings.RATE_LIMIT_REQUESTS = 1
    personas.alice_api.ok("memories/list", {})
    personas.bob_api.ok("memories/list", {})
    personas.alice_api.error("memories/list", {}, status=429, code="RATE_LIMITED")


def test_it_records_last_use(personas):
    key = ApiKey.objects.get(user=personas.alice)
    assert key.last_used_at is None
    personas.alice_api.ok("memories/list", {})
    key.refresh_from_db()
    assert key.last_used_at is not None


def test_it_stores_only_the_hash_prefix_and_last4(personas):
    created = services.api_key_create(user=personas.alice)
    stored = ApiKey.objects.get(pk=created.api_key.pk)
    assert created.raw_key.startswith("mem_") and len(created.raw_key) == 68
    assert stored.prefix == created.raw_key[:12] and stored.last4 == created.raw_key[-4:]
    assert stored.key_hash == services.api_key_hash(created.raw_key)
    assert created.raw_key not in {stored.key_hash, stored.prefix, stored.name}
