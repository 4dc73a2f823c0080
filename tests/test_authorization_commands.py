"""The commands an operator uses for keys and invitations: scoped and pinned keys, invitations accepted or
declined on a user's behalf, and the demo only on the embedded development database."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from tenancy.models import ApiKey, Membership
from tests.conftest import SdkClient, make_user


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out, stderr=StringIO())
    return out.getvalue()


def test_it_creates_a_scoped_pinned_key(personas):
    raw = run("apikey_create", "--username", "bob", "--scope", "read", "--workspace", "acme").strip()
    key = ApiKey.objects.get(key_hash__isnull=False, prefix=raw[:12])
    assert key.scope == "read" and key.workspace_id == personas.acme.id
    listed = run("apikey_list", "--username", "bob")
    assert "read " in listed and "pinned to Acme" in listed
    api = SdkClient(Client(), raw)
    assert api.post("memories/add", {"content": "x"}).status_code == 403
    assert api.post("memories/list", {}).status_code == 200


def test_it_refuses_a_pin_outside_the_users_workspaces(personas):
    with pytest.raises(CommandError, match="not a member"):
        run("apikey_create", "--username", "bob", "--workspace", "globex")
    with pytest.raises(CommandError, match="No workspace"):
        run("apikey_create", "--username", "bob", "--workspace", "nowhere")


def test_it_invites_and_the_user_accepts_or_declines(personas):
    dave, erin = make_user("dave"), make_user("erin")
    assert "invited dave" in run("member_invite", "--org", "acme", "--username", "dave", "--role", "admin")
    run("member_invite", "--org", "acme", "--username", "erin")
    assert not Membership.objects.filter(user__in=[dave, erin]).exclude(workspace__kind="personal").exists()
    assert "acme  admin" in run("invitation_respond", "--username", "dave")
    assert "dave is admin of acme" in run(
        "invitation_respond", "--username", "dave", "--org", "acme", "--accept"
    )
    run("invitation_respond", "--username", "erin", "--org", "acme", "--decline")
    assert Membership.objects.get(workspace=personas.acme, user=dave).role == "admin"
    assert not Membership.objects.filter(workspace=personas.acme, user=erin).exists()
    with pytest.raises(CommandError, match="no pending invitation"):
        run("invitation_respond", "--username", "erin", "--org", "acme", "--accept")
    with pytest.raises(CommandError, match="already a member"):
        run("member_invite", "--org", "acme", "--username", "bob")


def test_it_makes_the_demo_only_on_the_embedded_database(settings, tmp_path, monkeypatch):
    monkeypatch.setenv("CAIRN_VAR_DIR", str(tmp_path))
    settings.EMBEDDED_DATABASE = False
    assert run("cairn_demo") == ""
    assert not ApiKey.objects.filter(name="demo").exists()
    settings.EMBEDDED_DATABASE = True
    raw = run("cairn_demo").strip()
    assert ApiKey.objects.get(name="demo").scope == "admin" and raw.startswith("mem_")


def test_it_starts_the_demo_in_canary_with_samples_that_one_command_removes(tmp_path, monkeypatch):
    monkeypatch.setenv("CAIRN_VAR_DIR", str(tmp_path))
    err = StringIO()
    raw = call_command_output("cairn_demo", stderr=err)
    assert "sign in as demo / demo-password" in err.getvalue() and "canary" in err.getvalue()
    demo = SdkClient(Client(), raw)
    listed = demo.ok("memories/list", {"limit": 50, "scope": {"projectId": "github.com/demo/api"}})
    assert listed["memories"] and all("sample" in m["tags"] for m in listed["memories"])
    rollout = demo.client.get("/api/sdk/v1/graph/rollout", HTTP_AUTHORIZATION=f"Bearer {raw}").json()["data"]
    assert rollout["rollout"]["mode"] == "canary"
    # Run again: the same samples, not twice as many.
    call_command_output("cairn_demo")
    again = demo.ok("memories/list", {"limit": 50, "scope": {"projectId": "github.com/demo/api"}})
    assert len(again["memories"]) == len(listed["memories"])
    removed = StringIO()
    call_command_output("cairn_demo", "--remove-samples", stderr=removed)
    assert "Removed" in removed.getvalue()
    assert demo.ok("memories/list", {"scope": {"projectId": "github.com/demo/api"}})["memories"] == []
    call_command_output("cairn_demo")  # they stay out
    assert demo.ok("memories/list", {"scope": {"projectId": "github.com/demo/api"}})["memories"] == []


def call_command_output(*args: str, stderr: StringIO | None = None) -> str:
    out = StringIO()
    call_command(*args, stdout=out, stderr=stderr or StringIO())
    return out.getvalue().strip()
