"""Writes from the dashboard: rollout mode, members, API keys, repo routing, sign-up; role checks and CSRF."""

from __future__ import annotations

from django.test import Client

from rollout.models import RolloutConfig
from tenancy import services
from tenancy.models import ApiKey, Invitation, Membership, RepoOwnerMapping, UserSettings
from tenancy.rls import workspace_context
from tests.conftest import make_user
from tests.dashboard.conftest import signed_in
from tests.rollout.helpers import record


def _mode(workspace_id: int) -> str | None:
    with workspace_context(workspace_id):
        return RolloutConfig.objects.filter(workspace_id=workspace_id).values_list("mode", flat=True).first()


# --- CSRF ---------------------------------------------------------------------------------------------------


def test_it_refuses_a_post_without_the_csrf_token(personas):
    client = Client(enforce_csrf_checks=True)
    client.force_login(personas.alice)
    r = client.post(f"/w/{personas.acme.id}/rollout/mode/", {"mode": "shadow"})
    assert r.status_code == 403
    assert _mode(personas.acme.id) is None
    r = client.post("/settings/keys/", {"expires_in_days": 30})
    assert r.status_code == 403 and not ApiKey.objects.filter(created_via="dashboard").exists()


def test_it_accepts_a_post_with_the_csrf_token(personas):
    client = Client(enforce_csrf_checks=True)
    client.force_login(personas.alice)
    client.get(f"/w/{personas.acme.id}/rollout/")
    token = client.cookies["csrftoken"].value
    r = client.post(f"/w/{personas.acme.id}/rollout/mode/", {"mode": "shadow", "csrfmiddlewaretoken": token})
    assert r.status_code == 302 and _mode(personas.acme.id) == "shadow"


# --- rollout ------------------------------------------------------------------------------------------------


def test_it_changes_the_rollout_mode_for_an_owner(alice_web, personas):
    r = alice_web.post(f"/w/{personas.acme.id}/rollout/mode/", {"mode": "shadow"}, HTTP_HX_REQUEST="true")
    html = r.content.decode()
    assert r.status_code == 200 and 'data-mode="shadow" class="mode-current" aria-pressed="true"' in html
    assert _mode(personas.acme.id) == "shadow"


def test_it_refuses_a_mode_change_from_a_member(bob_web, personas):
    r = bob_web.post(f"/w/{personas.acme.id}/rollout/mode/", {"mode": "shadow"})
    assert r.status_code == 403 and _mode(personas.acme.id) is None
    page = bob_web.get(f"/w/{personas.acme.id}/rollout/").content.decode()
    assert "Only owners and admins change the mode" in page


def test_it_refuses_a_mode_change_from_an_outsider(charlie_web, personas):
    assert charlie_web.post(f"/w/{personas.acme.id}/rollout/mode/", {"mode": "shadow"}).status_code == 404


def test_it_explains_why_canary_is_blocked(alice_web, personas):
    ws = personas.acme.id
    alice_web.post(f"/w/{ws}/rollout/mode/", {"mode": "shadow"})
    record(ws, 16)
    record(ws, 4, reason="graph_expansion_error")
    canary = {"mode": "canary", "confirmed": "1"}
    r = alice_web.post(f"/w/{ws}/rollout/mode/", canary, HTTP_HX_REQUEST="true")
    html = r.content.decode()
    assert 'id="rollout-blocked"' in html and "FALLBACK_RATE_ABOVE_LIMIT" in html
    assert "GRAPH_EXPANSION_ERRORS" in html  # the alarm
    assert _mode(ws) == "shadow"
    r = alice_web.post(f"/w/{ws}/rollout/mode/", canary)
    assert r.status_code == 409


def test_it_refuses_an_unknown_mode(alice_web, personas):
    r = alice_web.post(f"/w/{personas.acme.id}/rollout/mode/", {"mode": "on"})
    assert r.status_code == 409 and b"mode must be one of off, shadow, canary" in r.content


def test_it_refreshes_the_rollout_panel_alone(bob_web, personas):
    r = bob_web.get(f"/w/{personas.acme.id}/rollout/", HTTP_HX_REQUEST="true")
    assert r.status_code == 200 and b"<html" not in r.content and b"Quality gate" in r.content


# --- members ------------------------------------------------------------------------------------------------


def _role(org, user) -> str | None:
    return Membership.objects.filter(workspace=org, user=user).values_list("role", flat=True).first()


def test_it_invites_a_member_by_username_or_email_who_joins_on_accepting(alice_web, personas):
    dave, erin = make_user("dave"), make_user("erin")
    assert (
        alice_web.post(f"/w/{personas.acme.id}/members/", {"identifier": "dave", "role": "admin"}).status_code
        == 302
    )
    r = alice_web.post(
        f"/w/{personas.acme.id}/members/", {"identifier": "ERIN@example.com", "role": "member"}
    )
    assert r.status_code == 302
    # Nothing routes to the org before the invited users say yes.
    assert _role(personas.acme, dave) is None and _role(personas.acme, erin) is None
    assert b"dave" in alice_web.get(f"/w/{personas.acme.id}/members/").content
    for user in (dave, erin):
        web = signed_in(user)
        page = web.get("/settings/invitations/")
        invitation = Invitation.objects.get(user=user, org=personas.acme)
        assert page.status_code == 200 and b"acme" in page.content
        assert (
            web.post("/settings/invitations/", {"invitation": invitation.id, "action": "accept"}).status_code
            == 302
        )
    assert _role(personas.acme, dave) == "admin" and _role(personas.acme, erin) == "member"


def test_it_lets_an_invited_user_decline_and_an_admin_cancel(alice_web, personas):
    dave, erin = make_user("dave"), make_user("erin")
    for name in ("dave", "erin"):
        alice_web.post(f"/w/{personas.acme.id}/members/", {"identifier": name, "role": "member"})
    declined = Invitation.objects.get(user=dave)
    dave_web = signed_in(dave)
    # Declining asks first: without the confirmation the invitation stays.
    ask = dave_web.post("/settings/invitations/", {"invitation": declined.id, "action": "decline"})
    assert ask.status_code == 200 and b'id="confirm-page"' in ask.content
    assert Invitation.objects.get(pk=declined.pk).status == "pending"
    confirmed = {"invitation": declined.id, "action": "decline", "confirmed": "1"}
    assert dave_web.post("/settings/invitations/", confirmed).status_code == 302
    cancelled = Invitation.objects.get(user=erin)
    cancel = f"/w/{personas.acme.id}/invitations/{cancelled.id}/cancel/"
    assert b"Cancel the invitation of erin?" in alice_web.post(cancel).content
    assert alice_web.post(cancel, {"confirmed": "1"}).status_code == 302
    accept_late = signed_in(erin).post(
        "/settings/invitations/", {"invitation": cancelled.id, "action": "accept"}
    )
    assert accept_late.status_code == 400 and b"no longer pending" in accept_late.content
    assert _role(personas.acme, dave) is None and _role(personas.acme, erin) is None
    # Someone else's invitation is not found; a member cannot cancel invitations.
    other = alice_web.post(f"/w/{personas.acme.id}/members/", {"identifier": "dave", "role": "member"})
    assert other.status_code == 302
    pending = Invitation.objects.get(user=dave, status="pending")
    assert (
        signed_in(erin)
        .post("/settings/invitations/", {"invitation": pending.id, "action": "accept"})
        .status_code
        == 404
    )
    bob_web = signed_in(personas.bob)
    assert bob_web.post(f"/w/{personas.acme.id}/invitations/{pending.id}/cancel/").status_code == 403
    assert (
        signed_in(personas.charlie)
        .post(f"/w/{personas.acme.id}/invitations/{pending.id}/cancel/")
        .status_code
        == 404
    )


def test_it_explains_a_failed_add(alice_web, personas):
    r = alice_web.post(f"/w/{personas.acme.id}/members/", {"identifier": "nobody", "role": "member"})
    assert r.status_code == 400 and b"No single active user" in r.content
    r = alice_web.post(f"/w/{personas.acme.id}/members/", {"identifier": "bob", "role": "member"})
    assert r.status_code == 400 and b"already a member" in r.content
    r = alice_web.post(f"/w/{personas.acme.id}/members/", {"identifier": "dave", "role": "king"})
    assert r.status_code == 400 and b"role:" in r.content


def test_it_lets_only_managers_change_members(bob_web, personas):
    make_user("dave")
    r = bob_web.post(f"/w/{personas.acme.id}/members/", {"identifier": "dave", "role": "member"})
    assert r.status_code == 403
    r = bob_web.post(f"/w/{personas.acme.id}/members/{personas.alice.id}/remove/")
    assert r.status_code == 403 and _role(personas.acme, personas.alice) == "owner"
    assert b"Remove" not in bob_web.get(f"/w/{personas.acme.id}/members/").content


def test_it_keeps_admins_away_from_owners(personas):
    services.membership_set(org=personas.acme, user=personas.bob, role="admin")
    bob_web = signed_in(personas.bob)
    make_user("dave")
    assert (
        bob_web.post(f"/w/{personas.acme.id}/members/", {"identifier": "dave", "role": "owner"}).status_code
        == 403
    )
    assert (
        bob_web.post(
            f"/w/{personas.acme.id}/members/{personas.alice.id}/role/", {"role": "member"}
        ).status_code
        == 403
    )
    assert (
        bob_web.post(f"/w/{personas.acme.id}/members/", {"identifier": "dave", "role": "admin"}).status_code
        == 302
    )


def test_it_keeps_the_last_owner(alice_web, personas):
    r = alice_web.post(f"/w/{personas.acme.id}/members/{personas.alice.id}/role/", {"role": "member"})
    assert r.status_code == 400 and b"at least one owner" in r.content
    r = alice_web.post(f"/w/{personas.acme.id}/members/{personas.alice.id}/remove/", {"confirmed": "1"})
    assert r.status_code == 400 and _role(personas.acme, personas.alice) == "owner"


def test_it_changes_a_role_and_removes_a_member(alice_web, personas):
    ws = personas.acme.id
    assert alice_web.post(f"/w/{ws}/members/{personas.bob.id}/role/", {"role": "admin"}).status_code == 302
    assert _role(personas.acme, personas.bob) == "admin"
    RepoOwnerMapping.objects.create(user=personas.bob, owner="acme-inc", org=personas.acme)
    ask = alice_web.post(f"/w/{ws}/members/{personas.bob.id}/remove/")
    assert b"Remove bob from Acme?" in ask.content and _role(personas.acme, personas.bob) == "admin"
    assert alice_web.post(f"/w/{ws}/members/{personas.bob.id}/remove/", {"confirmed": "1"}).status_code == 302
    assert _role(personas.acme, personas.bob) is None
    assert not RepoOwnerMapping.objects.filter(user=personas.bob).exists()
    assert signed_in(personas.bob).get(f"/w/{ws}/graph/").status_code == 404


def test_it_does_not_touch_members_of_another_org(alice_web, personas):
    r = alice_web.post(f"/w/{personas.globex.id}/members/{personas.charlie.id}/remove/")
    assert r.status_code == 404 and _role(personas.globex, personas.charlie) == "owner"
    r = alice_web.post(f"/w/{personas.acme.id}/members/{personas.charlie.id}/remove/")
    assert r.status_code == 404


# --- API keys -----------------------------------------------------------------------------------------------


def test_it_shows_a_new_key_once_and_never_makes_a_second_on_reload(alice_web, personas):
    r = alice_web.post("/settings/keys/", {"name": "laptop", "expires_in_days": 30, "scope": "read"})
    assert r.status_code == 302
    shown = alice_web.get("/settings/keys/")
    assert shown["Cache-Control"] == "no-store"
    raw = shown.context["created"]["raw_key"]
    assert raw.startswith("mem_") and raw.encode() in shown.content
    key = ApiKey.objects.get(name="laptop")
    assert key.user == personas.alice and key.created_via == "dashboard" and key.scope == "read"
    assert b'<td data-label="Scope">read</td>' in shown.content
    later = alice_web.get("/settings/keys/")
    assert raw.encode() not in later.content
    assert f"{key.prefix}…{key.last4}".encode() in later.content
    assert ApiKey.objects.filter(name="laptop").count() == 1
    # The key works against the SDK API, as a read key.
    api = Client().get("/api/sdk/v1/graph/status", HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert api.status_code == 200
    write = Client().post(
        "/api/sdk/v1/memories/add",
        {"content": "x"},
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {raw}",
    )
    assert write.status_code == 403 and write.json()["error"]["code"] == "FORBIDDEN_ROLE"


def test_it_pins_a_key_only_to_a_workspace_of_yours(alice_web, personas):
    r = alice_web.post(
        "/settings/keys/",
        {"name": "acme-ci", "expires_in_days": 5, "scope": "write", "pin": personas.acme.id},
    )
    assert r.status_code == 302
    key = ApiKey.objects.get(name="acme-ci")
    assert key.workspace_id == personas.acme.id
    assert b"Acme" in alice_web.get("/settings/keys/").content
    r = alice_web.post(
        "/settings/keys/",
        {"name": "theirs", "expires_in_days": 5, "scope": "write", "pin": personas.globex.id},
    )
    assert r.status_code == 400 and b"not a member" in r.content
    assert not ApiKey.objects.filter(name="theirs").exists()


def test_it_validates_the_expiry(alice_web, settings):
    settings.API_KEY_MAX_EXPIRY_DAYS = 60
    r = alice_web.post("/settings/keys/", {"expires_in_days": 61})
    assert r.status_code == 400 and b"within 60 days at most" in r.content
    assert alice_web.post("/settings/keys/", {"expires_in_days": 0}).status_code == 400
    assert alice_web.post("/settings/keys/", {"expires_in_days": "soon"}).status_code == 400


def test_it_limits_active_keys(alice_web, personas, settings):
    settings.MAX_ACTIVE_KEYS_PER_USER = 2  # alice already has one from the personas fixture
    assert alice_web.post("/settings/keys/", {"expires_in_days": 5}).status_code == 302
    r = alice_web.post("/settings/keys/", {"expires_in_days": 5})
    assert r.status_code == 400 and b"revoke one" in r.content


def test_it_revokes_only_your_own_keys(alice_web, charlie_web, personas):
    key = ApiKey.objects.filter(user=personas.alice).first()
    assert charlie_web.post(f"/settings/keys/{key.id}/revoke/").status_code == 404
    key.refresh_from_db()
    assert key.revoked_at is None
    ask = alice_web.post(f"/settings/keys/{key.id}/revoke/")
    assert ask.status_code == 200 and b"Revoke this key?" in ask.content
    key.refresh_from_db()
    assert key.revoked_at is None
    assert alice_web.post(f"/settings/keys/{key.id}/revoke/", {"confirmed": "1"}).status_code == 302
    key.refresh_from_db()
    assert key.revoked_at is not None


# --- repo routing -------------------------------------------------------------------------------------------


def test_it_sets_the_routing_mode_and_active_org(bob_web, personas):
    r = bob_web.post(
        "/settings/routing/", {"action": "mode", "mode": "active_workspace", "active_org": "acme"}
    )
    assert r.status_code == 302
    user_settings = UserSettings.objects.get(user=personas.bob)
    assert user_settings.routing_mode == "active_workspace" and user_settings.active_org == personas.acme


def test_it_refuses_an_org_you_are_not_in(bob_web, personas):
    r = bob_web.post("/settings/routing/", {"action": "mode", "mode": "auto", "active_org": "globex"})
    assert r.status_code == 400 and b"not a member of an organization" in r.content
    r = bob_web.post("/settings/routing/", {"action": "map", "owner": "globex-inc", "org": "globex"})
    assert r.status_code == 400 and not RepoOwnerMapping.objects.filter(user=personas.bob).exists()


def test_it_maps_owners_validated_like_the_api(bob_web, personas):
    r = bob_web.post("/settings/routing/", {"action": "map", "owner": "@Acme-Inc", "org": "acme"})
    assert r.status_code == 302
    assert RepoOwnerMapping.objects.get(user=personas.bob).owner == "acme-inc"
    r = bob_web.post("/settings/routing/", {"action": "map", "owner": "-bad owner", "org": "acme"})
    assert r.status_code == 400 and b"is not a valid GitHub owner" in r.content
    unmap = {"action": "unmap", "owner": "acme-inc"}
    assert b"Delete the mapping of acme-inc?" in bob_web.post("/settings/routing/", unmap).content
    assert RepoOwnerMapping.objects.filter(user=personas.bob).exists()
    assert bob_web.post("/settings/routing/", {**unmap, "confirmed": "1"}).status_code == 302
    assert not RepoOwnerMapping.objects.filter(user=personas.bob).exists()


# --- sign-up ------------------------------------------------------------------------------------------------


def test_it_hides_signup_when_off(db):
    assert Client().get("/accounts/signup/").status_code == 404


def test_it_signs_up_when_on(settings, db):
    settings.DASHBOARD_SIGNUP_ENABLED = True
    client = Client()
    r = client.post(
        "/accounts/signup/",
        {"username": "frank", "password1": "a-long-passphrase-1", "password2": "a-long-passphrase-1"},
    )
    assert r.status_code == 302
    assert b"frank (personal)" in client.get("/").content
