"""cairn_sdk's keys namespace against a live server: create a restricted key, use it, list, revoke."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from cairn_sdk import (
    AsyncCairn,
    AuthenticationError,
    Cairn,
    ConflictError,
    NotFoundError,
    PermissionDeniedError,
    models,
)

from tests.sdk.conftest import LIVE, Account

pytestmark = LIVE


def test_it_creates_a_read_key_uses_it_lists_and_revokes_it(cairn, base_url):
    cairn.memories.add("The on-call rota lives in PagerDuty", tags=["ops"])
    created = cairn.keys.create("ci-reader", key_scope="read")
    assert isinstance(created, models.KeyCreateResult) and created.secret.startswith("mem_")
    key = created.key
    assert (key.name, key.key_scope, key.created_via, key.active) == ("ci-reader", "read", "api", True)
    assert key.pinned_workspace is None and key.revoked_at is None and key.last_used_at is None
    assert created.secret.endswith(key.last4) and created.secret.startswith(key.prefix)
    assert created.secret not in repr(created)  # a logged answer does not leak the key

    with Cairn(created.secret, base_url=base_url) as reader:
        assert [m.content for m in reader.memories.search("on-call rota").memories] == [
            "The on-call rota lives in PagerDuty"
        ]
        with pytest.raises(PermissionDeniedError) as write:
            reader.memories.add("a reader cannot write")
        assert write.value.code == "FORBIDDEN_ROLE" and write.value.details["requiredRole"] == "write"
        with pytest.raises(PermissionDeniedError) as manage:
            reader.keys.list()
        assert manage.value.details == {"requiredRole": "admin", "heldRole": "read"}

        listed = cairn.keys.list()
        assert listed.count == len(listed.keys) == 2  # the fixture's admin key and the new one
        assert listed.keys[0].id == key.id  # newest first
        assert listed.keys[0].last_used_at is not None  # the reader's search just used it
        assert all("secret" not in (row.model_extra or {}) for row in listed.keys)

        revoked = cairn.keys.revoke(key.id)
        assert revoked.revoked is True and revoked.id == key.id and isinstance(revoked.revoked_at, datetime)
        assert cairn.keys.revoke(key.id).revoked is True  # again is fine
        with pytest.raises(AuthenticationError):
            reader.memories.search("on-call rota")

    assert key.id not in {row.id for row in cairn.keys.list().keys}
    everything = cairn.keys.list(include_inactive=True)
    gone = next(row for row in everything.keys if row.id == key.id)
    assert gone.active is False and gone.revoked_at == revoked.revoked_at


def test_it_pins_a_key_to_one_workspace_and_lets_it_expire(cairn, base_url):
    before = datetime.now(UTC)
    created = cairn.keys.create(key_scope="write", pinned=True, expires_in_days=1, scope={"tenantId": "acme"})
    key = created.key
    assert key.key_scope == "write" and key.name == ""
    assert key.pinned_workspace is not None and key.pinned_workspace.kind == "sdk_tenant"
    assert before + timedelta(hours=23) < key.expires_at <= datetime.now(UTC) + timedelta(days=1)

    with Cairn(created.secret, base_url=base_url) as pinned:
        pinned.memories.add("acme ships on Tuesdays")  # no scope given: the pinned workspace
        with pytest.raises(PermissionDeniedError) as escaped:
            pinned.memories.add("elsewhere", scope={"tenantId": "other"})
        assert escaped.value.code == "KEY_PINNED"
    assert [m.content for m in cairn.with_scope(tenant_id="acme").memories.iter()] == [
        "acme ships on Tuesdays"
    ]
    assert cairn.memories.list().memories == []  # not in the caller's own workspace


def test_it_refuses_what_a_key_may_not_do(cairn, base_url, bob: Account, settings):
    writer = cairn.keys.create(key_scope="write")
    with Cairn(writer.secret, base_url=base_url) as weaker, pytest.raises(PermissionDeniedError) as refused:
        weaker.keys.create(key_scope="read")  # only an admin-scoped key manages keys
    assert refused.value.details == {"requiredRole": "admin", "heldRole": "write"}

    with Cairn(bob.key, base_url=base_url) as bobs:
        with pytest.raises(NotFoundError) as foreign:
            bobs.keys.revoke(writer.key.id)  # alice's key does not exist for bob
        assert foreign.value.code == "KEY_NOT_FOUND"
    with pytest.raises(NotFoundError) as unknown:
        cairn.keys.revoke("not-a-key-id")
    assert unknown.value.code == "KEY_NOT_FOUND"
    assert writer.key.id in {row.id for row in cairn.keys.list().keys}

    settings.MAX_ACTIVE_KEYS_PER_USER = 2
    with pytest.raises(ConflictError) as full:
        cairn.keys.create("one too many")
    assert full.value.code == "KEY_LIMIT_REACHED"


def test_it_manages_keys_the_same_asynchronously(base_url, alice):
    async def scenario() -> None:
        async with AsyncCairn(alice.key, base_url=base_url, timeout=30) as cairn:
            created = await cairn.keys.create("async-reader", key_scope="read")
            async with AsyncCairn(created.secret, base_url=base_url) as reader:
                assert (await reader.memories.list()).memories == []
                with pytest.raises(PermissionDeniedError):
                    await reader.memories.add("no")
            listed = await cairn.keys.list()
            assert [row.id for row in listed.keys][0] == created.key.id
            revoked = await cairn.keys.revoke(created.key.id)
            assert revoked.revoked is True
            assert created.key.id not in {row.id for row in (await cairn.keys.list()).keys}
            inactive = await cairn.keys.list(include_inactive=True)
            assert created.key.id in {row.id for row in inactive.keys}

    asyncio.run(scenario())
