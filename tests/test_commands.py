"""Management commands for keys, orgs, members and routing (the dashboard comes later)."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from tenancy.models import ApiKey, Membership, UserSettings
from tests.conftest import SdkClient


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out, stderr=StringIO())
    return out.getvalue()


def test_it_creates_lists_and_revokes_keys(personas):
    raw_key = run("apikey_create", "--username", "alice", "--days", "30", "--name", "laptop").strip()
    assert raw_key.startswith("mem_") and len(raw_key) == 68
    SdkClient(Client(), raw_key).ok("memories/list", {})

    listing = run("apikey_list", "--username", "alice")
    assert raw_key[:12] in listing and raw_key[-4:] in listing and raw_key not in listing

    key = ApiKey.objects.get(name="laptop")
    run("apikey_revoke", str(key.id))
    SdkClient(Client(), raw_key).error("memories/list", {}, status=401, code="INVALID_API_KEY")
    assert "revoked" in run("apikey_list", "--username", "alice")


def test_it_explains_command_mistakes(personas):
    with pytest.raises(CommandError, match="No user"):
        run("apikey_create", "--username", "nobody")
    with pytest.raises(CommandError, match="at most"):
        run("apikey_create", "--username", "alice", "--days", "9999")
    with pytest.raises(CommandError, match="already exists"):
        run("org_create", "acme", "--owner", "alice")
    with pytest.raises(CommandError, match="not a valid GitHub owner"):
        run("org_create", "Bad_Slug", "--owner", "alice")


def test_it_manages_members_and_routing(personas):
    run("member_set", "--org", "acme", "--username", "charlie", "--role", "admin")
    assert Membership.objects.get(workspace=personas.acme, user=personas.charlie).role == "admin"

    output = run(
        "routing",
        "--username",
        "charlie",
        "--mode",
        "active_workspace",
        "--active-org",
        "acme",
        "--map",
        "acme-platform",
        "acme",
    )
    assert "mode: active_workspace" in output and "map: acme-platform -> acme" in output
    assert UserSettings.objects.get(user=personas.charlie).active_org == personas.acme
    assert "map:" not in run("routing", "--username", "charlie", "--unmap", "acme-platform")


def test_it_prints_the_same_demo_key_twice(tmp_path, monkeypatch):
    monkeypatch.setenv("CAIRN_VAR_DIR", str(tmp_path))
    first = run("cairn_demo").strip()
    second = run("cairn_demo").strip()
    assert first == second and first.startswith("mem_")
    SdkClient(Client(), first).ok("memories/list", {})


def test_it_replaces_a_revoked_demo_key(tmp_path, monkeypatch):
    monkeypatch.setenv("CAIRN_VAR_DIR", str(tmp_path))
    first = run("cairn_demo").strip()
    ApiKey.objects.filter(name="demo").update(revoked_at="2026-01-01T00:00:00Z")
    second = run("cairn_demo").strip()
    assert second != first
    SdkClient(Client(), second).ok("memories/list", {})
