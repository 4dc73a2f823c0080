"""The conflict card says which side is current and resolves it (keep newer / keep older / both stand, undo);
duplicates are grouped with a merge. Every decision is recorded as the person's; a reader gets 403 and an
outsider 404."""

from __future__ import annotations

from typing import Any

from memories.models import Memory, SupersessionDecision
from tenancy.rls import workspace_context
from tests.dashboard.test_views import add, read_only, relate
from tests.memories.helpers import backdate, run_jobs


def _stored(ws: int, memory_id: str) -> Memory:
    with workspace_context(ws):
        return Memory.objects.get(pk=memory_id)


def _conflict(personas: Any) -> tuple[int, dict[str, Any], dict[str, Any]]:
    ws = personas.acme.id
    old = add(personas, "Our standup is at 9:30 in the big room.")
    backdate(ws, old["id"], days=4)
    new = add(personas, "Standup is at 10:00 in the small room.")
    relate(ws, "contradicts", new["id"], old["id"], "9:30 or 10:00: they disagree.")
    return ws, old, new


def _card(page: str) -> str:
    return page.split('id="conflicts"', 1)[1].split('id="replaced"', 1)[0]


def test_it_marks_the_current_side_and_keeps_the_older_on_request(bob_web, personas):
    ws, old, new = _conflict(personas)
    card = _card(bob_web.get(f"/w/{ws}/changes/").content.decode())
    current = card.split(f'data-memory-id="{new["id"]}"', 1)[0].rsplit('<div class="side', 1)[1]
    assert current.startswith(" current")  # the newer side, until someone decides
    assert "the newer memory, until someone decides" in card
    for label in ("Keep newer", "Keep older", "Both stand"):
        assert label in card

    response = bob_web.post(
        f"/w/{ws}/changes/resolve/", {"resolution": "keep_older", "newer": new["id"], "older": old["id"]}
    )
    assert response.status_code == 302
    assert str(_stored(ws, new["id"]).superseded_by) == old["id"]
    with workspace_context(ws):
        decision = SupersessionDecision.objects.get(reverted_at__isnull=True)
    assert (decision.origin, decision.rule, decision.actor) == (
        "manual",
        "dashboard:keep_older",
        f"user:{personas.bob.pk}",
    )
    page = bob_web.get(f"/w/{ws}/changes/").content.decode()
    assert "The older memory is current" in page
    card = _card(page)
    assert "Undo decision" in card and "decided; the other left search and context" in card

    bob_web.post(f"/w/{ws}/changes/resolve/", {"resolution": "undo", "newer": new["id"], "older": old["id"]})
    assert _stored(ws, new["id"]).superseded_by is None
    bob_web.post(
        f"/w/{ws}/changes/resolve/", {"resolution": "both_stand", "newer": new["id"], "older": old["id"]}
    )
    assert "Both stand:" in _card(bob_web.get(f"/w/{ws}/changes/").content.decode())
    with workspace_context(ws):
        assert SupersessionDecision.objects.filter(reverted_at__isnull=False).count() == 1


def test_it_groups_duplicates_and_merges_into_the_newest(bob_web, personas):
    ws = personas.acme.id
    first = add(personas, "Secrets live in AWS Secrets Manager.", type="rule")
    backdate(ws, first["id"], days=2)
    second = add(personas, "Secrets are kept in AWS Secrets Manager.", type="rule")
    run_jobs(ws)
    page = bob_web.get(f"/w/{ws}/changes/").content.decode()
    duplicates = page.split('id="duplicates"', 1)[1].split('id="timeline"', 1)[0]
    assert f'data-memory-ids="{second["id"]} {first["id"]}"' in duplicates
    assert "Merge “Secrets live in AWS Secrets Manager.” into the newest" in duplicates
    bob_web.post(
        f"/w/{ws}/changes/resolve/", {"resolution": "merge", "newer": second["id"], "older": first["id"]}
    )
    assert str(_stored(ws, first["id"]).superseded_by) == second["id"]
    assert 'id="no-duplicates"' in bob_web.get(f"/w/{ws}/changes/").content.decode()


def test_it_refuses_a_reader_and_an_outsider(bob_web, charlie_web, personas, monkeypatch):
    ws, old, new = _conflict(personas)
    body = {"resolution": "keep_newer", "newer": new["id"], "older": old["id"]}
    assert charlie_web.post(f"/w/{ws}/changes/resolve/", body).status_code == 404
    read_only(monkeypatch)
    refused = bob_web.post(f"/w/{ws}/changes/resolve/", body)
    assert refused.status_code == 403
    assert "Keep newer" not in _card(bob_web.get(f"/w/{ws}/changes/").content.decode())
    assert _stored(ws, old["id"]).superseded_by is None
    bad = bob_web.post(
        f"/w/{ws}/changes/resolve/", {"resolution": "delete", "newer": new["id"], "older": old["id"]}
    )
    assert bad.status_code in (302, 403)
