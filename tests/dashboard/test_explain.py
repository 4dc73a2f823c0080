"""The explorer explains: a hub's summary, paths between two nodes, which side of a conflict holds, compressed
answers, and the loose ends around them (role names, personal workspaces, routing, the switcher,
communities). Django's test client on the small seeded graph of conftest.py."""

from __future__ import annotations

import gzip
import json
import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from dashboard import selectors
from graphsvc.models import GraphEdge, GraphNode, MemoryNodeLink
from memories.models import Memory
from pipeline.models import BackgroundJob
from tenancy import services as tenancy_services
from tenancy.models import Workspace
from tenancy.rls import workspace_context
from tests.dashboard.conftest import SeededGraph


def read_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("dashboard.access.user_role_in", lambda **kwargs: "read")


def memory(ws: int, content: str, *, type_: str = "note", days_ago: int = 0) -> tuple[Memory, GraphNode]:
    at = timezone.now() - timedelta(days=days_ago)
    with workspace_context(ws):
        row = Memory.objects.create(
            workspace_id=ws, content=content, type=type_, created_at=at, updated_at=at
        )
        node = GraphNode.objects.create(
            workspace_id=ws, node_type="memory", node_key=str(row.id), label=content[:60]
        )
        MemoryNodeLink.objects.create(workspace_id=ws, memory_id=row.id, node=node, role="self")
    return row, node


def link(ws: int, row: Memory, node: GraphNode, role: str) -> None:
    with workspace_context(ws):
        MemoryNodeLink.objects.create(workspace_id=ws, memory_id=row.id, node=node, role=role)


def edge(ws: int, a: GraphNode, b: GraphNode, edge_type: str, **fields: Any) -> GraphEdge:
    with workspace_context(ws):
        return GraphEdge.objects.create(
            workspace_id=ws,
            edge_key=f"t:{uuid.uuid4()}",
            from_node=a,
            to_node=b,
            edge_type=edge_type,
            edge_class=fields.pop("edge_class", "semantic"),
            origin=fields.pop("origin", "llm_pairwise"),
            weight=1.0,
            confidence=0.9,
            **fields,
        )


@pytest.fixture
def deploy_conflict(personas: Any, graph: SeededGraph) -> dict[str, Any]:
    """Friday (older) and Tuesday (newer) contradict each other, both on the billing topic; a rule too."""
    ws = personas.acme.id
    friday, friday_node = memory(ws, "We deploy on Fridays.", type_="decision", days_ago=10)
    tuesday, tuesday_node = memory(ws, "Deploys moved to Tuesdays.", type_="decision", days_ago=1)
    rule, _ = memory(ws, "Never deploy without a green CI run.", type_="rule", days_ago=3)
    for row in (friday, tuesday, rule):
        link(ws, row, graph.topic, "tag")
    link(ws, tuesday, graph.ada, "mentions")
    edge(ws, tuesday_node, friday_node, "contradicts")
    edge(ws, friday_node, tuesday_node, "contradicts")
    return {"friday": friday, "tuesday": tuesday, "rule": rule, "friday_node": friday_node}


# --- which side holds ---------------------------------------------------------------------------------------


def test_it_marks_the_newer_side_of_a_contradiction_current(personas, deploy_conflict):
    ws = personas.acme.id
    with workspace_context(ws):
        states = selectors.conflict_states(
            workspace_id=ws, memory_ids=[deploy_conflict["friday"].id, deploy_conflict["tuesday"].id]
        )
    assert states == {deploy_conflict["friday"].id: "outdated", deploy_conflict["tuesday"].id: "current"}


def test_it_shows_current_and_outdated_on_every_page(alice_web, personas, deploy_conflict):
    ws = personas.acme.id
    friday, tuesday = deploy_conflict["friday"], deploy_conflict["tuesday"]
    listing = alice_web.get(f"/w/{ws}/memories/").content.decode()
    row = listing.split(f'data-memory-id="{friday.id}"', 1)[1].split("</tr>", 1)[0]
    assert 'data-state="outdated"' in row and "likely outdated" in row
    row = listing.split(f'data-memory-id="{tuesday.id}"', 1)[1].split("</tr>", 1)[0]
    assert 'data-state="current"' in row
    page = alice_web.get(f"/w/{ws}/memories/{friday.id}/").content.decode()
    assert "this memory is likely outdated" in page
    changes = alice_web.get(f"/w/{ws}/changes/").content.decode()
    card = changes.split('class="pair conflict"', 1)[1].split("</article>", 1)[0]
    assert f'data-memory-id="{friday.id}" data-state="outdated"' in card
    assert f'data-memory-id="{tuesday.id}" data-state="current"' in card
    with workspace_context(ws):
        contradicts = GraphEdge.objects.filter(workspace_id=ws, edge_type="contradicts").first()
    panel = alice_web.get(f"/w/{ws}/graph/edges/{contradicts.id}/", HTTP_HX_REQUEST="true").content.decode()
    assert 'data-state="current"' in panel and 'data-state="outdated"' in panel
    pair = alice_web.get(
        f"/w/{ws}/graph/pair/?a={contradicts.from_node_id}&b={contradicts.to_node_id}", HTTP_HX_REQUEST="true"
    ).content.decode()
    heading = pair.split("<h2>", 1)[1].split("</h2>", 1)[0]
    assert 'data-state="current"' in heading and 'data-state="outdated"' in heading


def test_it_marks_the_older_of_two_current_facts_likely_outdated(alice_web, personas, graph):
    ws = personas.acme.id
    with workspace_context(ws):
        rust = GraphNode.objects.create(workspace_id=ws, node_type="language", node_key="rust", label="Rust")
    newer = edge(
        ws,
        graph.ada,
        rust,
        "uses",
        origin="llm_entity",
        edge_class="entity",
        fact="Ada uses Rust",
        valid_from=timezone.now(),
    )
    facts = alice_web.get(f"/w/{ws}/facts/").content.decode()
    assert f'data-fact-id="{newer.id}" data-state="current"' in facts
    assert f'data-fact-id="{graph.fact.id}" data-state="outdated"' in facts
    timeline = alice_web.get(f"/w/{ws}/changes/").content.decode().split('id="timeline"', 1)[1]
    # Labels and an axis, and bars one can see: a fact that started today is at least 8 units wide.
    assert 'class="row-label"' in timeline and 'class="tick-label"' in timeline
    assert "bar-outdated" in timeline and "bar-current" in timeline and "bar-ended" in timeline
    widths = [float(part.split('"', 1)[0]) for part in timeline.split('width="')[2:]]
    assert widths and min(widths) >= 8.0


# --- a hub at a glance --------------------------------------------------------------------------------------


def test_it_summarises_a_hub_with_rules_and_decisions_first(alice_web, personas, graph, deploy_conflict):
    ws = personas.acme.id
    html = alice_web.get(
        f"/w/{ws}/graph/node/?graph_node_type=topic&graph_node_key=billing", HTTP_HX_REQUEST="true"
    ).content.decode()
    rules = html.split('id="hub-rules"', 1)[1].split("</ul>", 1)[0]
    # The rule before the decisions; the replaced Friday decision marked.
    assert rules.index("Never deploy without a green CI run.") < rules.index("Deploys moved to Tuesdays.")
    assert "likely outdated" in rules.split("We deploy on Fridays.", 1)[1][:400]
    people = html.split('id="hub-people"', 1)[1].split("</p>", 1)[0]
    assert "Ada Lovelace" in people and '<span class="count">2</span>' in people
    assert 'id="hub-conflicts"' in html and 'data-memory-type="decision"' in html
    assert "1 rule, 2 decisions, 1 fact" in html


# --- how is A connected to B --------------------------------------------------------------------------------


def test_it_explains_the_shortest_path_between_two_nodes(alice_web, personas, graph, deploy_conflict):
    ws = personas.acme.id
    with workspace_context(ws):
        lena = GraphNode.objects.create(workspace_id=ws, node_type="person", node_key="lena", label="Lena")
    link(ws, deploy_conflict["tuesday"], lena, "mentions")
    r = alice_web.get(f"/w/{ws}/graph/path/?a={lena.id}&b={graph.python.id}")
    body = r.json()
    assert r.status_code == 200 and body["hops"] == 3 and body["paths"]
    path = body["paths"][0]
    assert path["nodes"][0] == lena.id and path["nodes"][-1] == graph.python.id
    # Lena ← the Tuesday memory → Ada Lovelace → Python: typed, in words.
    assert [s["type"] for s in path["steps"]] == ["mentions_entity", "mentions_entity", "uses"]
    assert path["steps"][0]["text"] == "the memory “Deploys moved to Tuesdays.” mentions “Lena”"
    assert path["steps"][2]["text"] == "person “Ada Lovelace” uses language “Python”"
    # Too few hops: an empty answer that says so, not an error.
    short = alice_web.get(f"/w/{ws}/graph/path/?a={lena.id}&b={graph.python.id}&max_hops=2").json()
    assert short["paths"] == [] and short["hops"] is None


def test_it_refuses_bad_path_requests(alice_web, personas, graph):
    ws = personas.acme.id
    assert alice_web.get(f"/w/{ws}/graph/path/?a=x&b=1").json()["error"]["code"] == "INVALID_NODE"
    assert alice_web.get(f"/w/{ws}/graph/path/?a=1").status_code == 400
    r = alice_web.get(f"/w/{ws}/graph/path/?a={graph.ada.id}&b={graph.python.id}&max_hops=99")
    assert r.status_code == 400 and r.json()["error"]["code"] == "INVALID_LIMIT"
    missing = alice_web.get(f"/w/{ws}/graph/path/?a={graph.ada.id}&b=999999999")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "NODE_NOT_FOUND"


def test_it_keeps_paths_inside_the_workspace_and_needs_the_read_role(
    bob_web, charlie_web, personas, graph, monkeypatch
):
    ws = personas.acme.id
    url = f"/w/{ws}/graph/path/?a={graph.ada.id}&b={graph.python.id}"
    assert charlie_web.get(url).status_code == 404
    # charlie's own workspace does not reach acme's nodes either.
    globex = Workspace.objects.get(slug="globex")
    assert (
        charlie_web.get(f"/w/{globex.id}/graph/path/?a={graph.ada.id}&b={graph.python.id}").status_code == 404
    )
    from dashboard.views import explorer

    assert explorer.explorer_path.cairn_role == "read"
    read_only(monkeypatch)
    assert bob_web.get(url).status_code == 200
    # Nothing weaker than read exists: a user without a role at all is an outsider (404, above); a signed-out
    # script gets 401.
    assert Client().get(url, HTTP_ACCEPT="application/json").status_code == 401


# --- compressed answers -------------------------------------------------------------------------------------


def test_it_compresses_pages_and_json_but_not_a_new_key(alice_web, personas, graph):
    ws = personas.acme.id
    data = alice_web.get(f"/w/{ws}/graph/data/", HTTP_ACCEPT_ENCODING="gzip")
    assert data["Content-Encoding"] == "gzip"
    assert "nodes" in json.loads(gzip.decompress(data.content))
    html = alice_web.get(f"/w/{ws}/changes/", HTTP_ACCEPT_ENCODING="gzip")
    assert html["Content-Encoding"] == "gzip" and b"What changed" in gzip.decompress(html.content)
    plain = alice_web.get(f"/w/{ws}/changes/")
    assert not plain.has_header("Content-Encoding")
    # The page that shows a new key's secret once: never compressed (BREACH).
    alice_web.post("/settings/keys/", {"name": "ci", "scope": "read", "expires_in_days": "7"})
    shown = alice_web.get("/settings/keys/", HTTP_ACCEPT_ENCODING="gzip")
    assert b'id="raw-key"' in shown.content
    assert "no-store" in shown["Cache-Control"] and not shown.has_header("Content-Encoding")


# --- loose ends ---------------------------------------------------------------------------------------------


def test_it_names_roles_as_members_does(bob_web, personas):
    r = bob_web.post(f"/w/{personas.acme.id}/rollout/mode/", {"mode": "off", "confirmed": "1"})
    assert "This needs the admin role in Acme; you are member here." in r.content.decode()


def test_it_offers_no_invitation_in_a_personal_workspace(alice_web, personas):
    personal = tenancy_services.personal_workspace_ensure(user=personas.alice)
    html = alice_web.get(f"/w/{personal.id}/members/").content.decode()
    assert 'id="members-personal"' in html and "Invite a member" not in html
    org = alice_web.get(f"/w/{personas.acme.id}/members/").content.decode()
    assert "Invite a member" in org


def test_it_keeps_rejected_routing_input(alice_web):
    r = alice_web.post("/settings/routing/", {"action": "map", "owner": "our-gh-owner", "org": "nope"})
    html = r.content.decode()
    assert r.status_code == 400 and 'value="our-gh-owner" aria-invalid="true"' in html


def test_it_lists_sdk_tenants_with_counts_and_marks_the_current_workspace(alice_web, personas, graph):
    ws = personas.acme.id
    tenant = Workspace.objects.create(
        kind="sdk_tenant", parent=personas.acme, tenant_id="customer-7", name="customer-7"
    )
    html = alice_web.get(f"/w/{ws}/changes/").content.decode()
    switcher = html.split('class="switcher"', 1)[1].split("</details>", 1)[0]
    assert "customer-7" in switcher and "SDK tenant · 0 memories" in switcher
    assert f'href="/w/{ws}/graph/" aria-current="page">✓ Acme' in switcher
    assert "1 memory" in switcher  # acme's one seeded memory
    assert f"/w/{tenant.id}/graph/" in switcher


def test_it_names_communities_by_their_members_and_refreshes_them(
    alice_web, bob_web, charlie_web, personas, graph, monkeypatch
):
    ws = personas.acme.id
    with workspace_context(ws):
        graph.community.name = "Ada Lovelace, Python [3fa8c2d10]"
        graph.community.save()
    html = alice_web.get(f"/w/{ws}/communities/").content.decode()
    assert ">Ada Lovelace, Python</td>" in html and "Refresh communities" in html
    refresh = f"/w/{ws}/communities/refresh/"
    assert charlie_web.post(refresh).status_code == 404
    refused = bob_web.post(refresh)
    assert refused.status_code == 403 and b"This needs the admin role" in refused.content
    assert alice_web.post(refresh).status_code == 302
    with workspace_context(ws):
        jobs = list(BackgroundJob.objects.filter(workspace_id=ws, kind="graph_communities_refresh"))
    assert len(jobs) == 1
    assert alice_web.post(refresh).status_code == 302  # a refresh already queued is reused
    with workspace_context(ws):
        assert BackgroundJob.objects.filter(workspace_id=ws, kind="graph_communities_refresh").count() == 1
    assert (
        'id="communities-job" data-status="queued"' in alice_web.get(f"/w/{ws}/communities/").content.decode()
    )


def test_it_pre_selects_no_entity_to_merge(alice_web, personas, graph):
    html = alice_web.get(f"/w/{personas.acme.id}/entities/{graph.ada.id}/").content.decode()
    select = html.split('name="merged"', 1)[1].split("</select>", 1)[0]
    assert '<option value="" selected disabled>' in select and select.count("selected") == 1


def test_it_shows_rollout_numbers_with_separators_and_one_current_mode(alice_web, personas):
    from tests.rollout.helpers import record

    ws = personas.acme.id
    alice_web.post(f"/w/{ws}/rollout/mode/", {"mode": "shadow"})
    record(ws, 1234, mode="shadow", shadow=True)
    html = alice_web.get(f"/w/{ws}/rollout/").content.decode()
    cards = html.split('id="metric-cards"', 1)[1].split("</section>", 1)[0]
    assert "<span>1,234</span>requests" in cards
    # One button reads as the mode in use, and it is not a disabled one.
    assert html.count('aria-pressed="true"') == 1
    assert 'data-mode="shadow" class="mode-current" aria-pressed="true"' in html
    plan = html.split('id="rollout-plan"', 1)[1]
    assert 'data-stage="shadow"' in plan and 'data-state="current mode"' in plan
    # The trend covers a day even when the gate's window is shorter: never an empty box.
    assert "Trend over the last 24 h" in html and 'id="gate-trend"' in html
