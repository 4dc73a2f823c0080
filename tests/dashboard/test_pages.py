"""Workspace pages through the Django test client: who sees what, what each page shows, tenant isolation."""

from __future__ import annotations

import pytest
from django.test import Client

WORKSPACE_PAGES = [
    "/w/{ws}/graph/",
    "/w/{ws}/graph/data/",
    "/w/{ws}/rollout/",
    "/w/{ws}/memories/",
    "/w/{ws}/entities/",
    "/w/{ws}/facts/",
    "/w/{ws}/communities/",
    "/w/{ws}/members/",
]


def test_it_redirects_anonymous_visitors_to_sign_in(personas):
    r = Client().get(f"/w/{personas.acme.id}/graph/")
    assert r.status_code == 302 and r["Location"].startswith("/accounts/login/")


def test_it_signs_in_with_a_password(personas):
    client = Client()
    r = client.post("/accounts/login/", {"username": "alice", "password": "pw-alice"})
    assert r.status_code == 302
    r = client.get("/")
    assert r.status_code == 200
    assert b"Acme" in r.content and b"alice (personal)" in r.content


def test_it_refuses_a_wrong_password(personas):
    r = Client().post("/accounts/login/", {"username": "alice", "password": "nope"})
    assert r.status_code == 200 and b'role="alert"' in r.content


@pytest.mark.parametrize("page", WORKSPACE_PAGES)
def test_it_opens_every_page_for_a_member(bob_web, personas, graph, page):
    r = bob_web.get(page.format(ws=personas.acme.id))
    assert r.status_code == 200


@pytest.mark.parametrize("page", WORKSPACE_PAGES)
def test_it_hides_another_workspace_from_an_outsider(charlie_web, personas, graph, page):
    r = charlie_web.get(page.format(ws=personas.acme.id))
    assert r.status_code == 404


def test_it_hides_another_workspace_objects_behind_ids(charlie_web, personas, graph):
    ws = personas.acme.id
    for url in (
        f"/w/{ws}/graph/edges/{graph.fact.id}/",
        f"/w/{ws}/memories/{graph.memory.id}/",
        f"/w/{ws}/entities/{graph.ada.id}/",
        f"/w/{ws}/graph/node/?graph_node_type=person&graph_node_key=ada+lovelace",
    ):
        assert charlie_web.get(url).status_code == 404, url
    # Nor through his own workspace: RLS and the workspace filter both hide acme's rows.
    globex = personas.globex.id
    for url in (
        f"/w/{globex}/graph/edges/{graph.fact.id}/",
        f"/w/{globex}/memories/{graph.memory.id}/",
        f"/w/{globex}/entities/{graph.ada.id}/",
    ):
        assert charlie_web.get(url).status_code == 404, url


def test_it_sends_a_content_security_policy(alice_web, personas):
    r = alice_web.get(f"/w/{personas.acme.id}/graph/")
    assert "script-src 'self'" in r["Content-Security-Policy"]
    assert "unsafe-inline" not in r["Content-Security-Policy"]
    assert r["X-Frame-Options"] == "DENY"


def test_it_escapes_user_text(alice_web, personas, graph):
    from graphsvc.models import GraphNode
    from tenancy.rls import workspace_context

    with workspace_context(personas.acme.id):
        GraphNode.objects.filter(id=graph.ada.id).update(label="<script>alert(1)</script>")
    r = alice_web.get(f"/w/{personas.acme.id}/entities/")
    assert b"<script>alert(1)</script>" not in r.content
    assert b"&lt;script&gt;alert(1)&lt;/script&gt;" in r.content


# --- explorer -----------------------------------------------------------------------------------------------


def test_it_gives_the_top_nodes(alice_web, personas, graph):
    data = alice_web.get(f"/w/{personas.acme.id}/graph/data/").json()
    labels = {node["label"] for node in data["nodes"]}
    assert {"Ada Lovelace", "Python", "billing"} <= labels
    # The replaced fact is gone; the memory's links are drawn as edges next to the stored ones.
    stored = {edge["edgeId"] for edge in data["edges"] if edge["edgeId"]}
    assert stored == {graph.fact.id, graph.topic_edge.id}
    assert {edge["type"] for edge in data["edges"] if edge["edgeId"] is None} == {"mentions_entity", "tagged"}
    assert data["focus"] is None


def test_it_gives_the_one_hop_view_of_a_node(alice_web, personas, graph):
    data = alice_web.get(
        f"/w/{personas.acme.id}/graph/data/?graph_node_type=topic&graph_node_key=billing"
    ).json()
    assert data["focus"]["label"] == "billing"
    assert {node["label"] for node in data["nodes"]} == {"billing", "Ada moved…"}
    assert {(edge["type"], edge["edgeId"]) for edge in data["edges"]} == {
        ("about_topic", graph.topic_edge.id),
        ("tagged", None),
    }


def test_it_filters_edges(alice_web, personas, graph):
    ws = personas.acme.id
    only_facts = alice_web.get(f"/w/{ws}/graph/data/?graph_et=uses").json()
    assert [edge["edgeId"] for edge in only_facts["edges"]] == [graph.fact.id]
    heavy = alice_web.get(f"/w/{ws}/graph/data/?graph_mw=0.5&graph_mc=0.75").json()
    assert {edge["edgeId"] for edge in heavy["edges"]} == {graph.fact.id, None}  # links weigh 1
    evidence = alice_web.get(f"/w/{ws}/graph/data/?graph_ev=1&graph_et=uses,about_topic").json()
    assert [edge["edgeId"] for edge in evidence["edges"]] == [graph.fact.id]
    people = alice_web.get(f"/w/{ws}/graph/data/?graph_nt=person,language").json()
    assert {node["type"] for node in people["nodes"]} == {"person", "language"}
    tags = alice_web.get(f"/w/{ws}/graph/data/?graph_et=tagged").json()
    assert [(edge["type"], edge["class"]) for edge in tags["edges"]] == [("tagged", "structural")]


@pytest.mark.parametrize(
    ("query", "code"),
    [
        ("graph_mw=2", "INVALID_FILTER"),
        ("graph_mc=abc", "INVALID_FILTER"),
        ("limit=0", "INVALID_LIMIT"),
        ("limit=99999", "INVALID_LIMIT"),
    ],
)
def test_it_explains_a_bad_filter(alice_web, personas, query, code):
    r = alice_web.get(f"/w/{personas.acme.id}/graph/data/?{query}")
    assert r.status_code == 400
    body = r.json()
    assert body["ok"] is False and body["meta"]["requestId"]  # the SDK API envelope
    assert body["error"]["code"] == code and body["error"]["message"]


def test_it_answers_404_for_an_unknown_node(alice_web, personas):
    r = alice_web.get(f"/w/{personas.acme.id}/graph/data/?graph_node_type=person&graph_node_key=nobody")
    assert r.status_code == 404 and r.json()["error"]["code"] == "NODE_NOT_FOUND"


def test_it_fills_the_edge_panel(alice_web, personas, graph):
    r = alice_web.get(f"/w/{personas.acme.id}/graph/edges/{graph.fact.id}/", HTTP_HX_REQUEST="true")
    html = r.content.decode()
    assert "Ada Lovelace → Python" in html
    assert "0.900" in html and "0.800" in html and "entity" in html
    assert "never" in html  # no expiry
    assert "moved the billing service to Python 3.13" in html  # the evidence quote
    assert f"/w/{personas.acme.id}/memories/{graph.memory.id}/" in html


def test_it_marks_the_evidence_memory_among_linked_ones(alice_web, personas, graph):
    r = alice_web.get(
        f"/w/{personas.acme.id}/graph/node/?graph_node_type=person&graph_node_key=ada+lovelace&evidence={graph.memory.id}"
    )
    html = r.content.decode()
    assert 'class="evidence"' in html and "Ada moved the billing service" in html


# --- memories, entities, facts, communities -----------------------------------------------------------------


def test_it_pages_through_memories(alice_web, personas):
    from django.utils import timezone

    from memories.models import Memory
    from tenancy.rls import workspace_context

    now = timezone.now()
    with workspace_context(personas.acme.id):
        for i in range(30):
            Memory.objects.create(
                workspace_id=personas.acme.id,
                content=f"note number {i}",
                user_id=f"u{i % 2}",
                created_at=now,
                updated_at=now,
            )
    first = alice_web.get(f"/w/{personas.acme.id}/memories/")
    assert first.content.count(b"data-memory-id") == 25 and b"Load more" in first.content
    cursor = first.context["next_cursor"]
    rest = alice_web.get(f"/w/{personas.acme.id}/memories/?cursor={cursor}&page=1", HTTP_HX_REQUEST="true")
    assert rest.content.count(b"data-memory-id") == 5 and b"Load more" not in rest.content
    bad = alice_web.get(f"/w/{personas.acme.id}/memories/?cursor=garbage")
    assert b"cursor is not one this API returned" in bad.content


def test_it_searches_memories_with_a_strategy(alice_web, personas, graph):
    r = alice_web.get(f"/w/{personas.acme.id}/memories/?q=billing&strategy=lexical", HTTP_HX_REQUEST="true")
    assert b"Ada moved the billing service" in r.content
    assert b"applied lexical" in r.content


def test_it_shows_a_memory_with_its_graph_links(alice_web, personas, graph):
    r = alice_web.get(f"/w/{personas.acme.id}/memories/{graph.memory.id}/")
    html = r.content.decode()
    assert "mentions → " in html and "Ada Lovelace" in html
    assert "Speaker" in html and "Session" in html
    assert f"graph_edge_id={graph.fact.id}" in html
    assert "No pipeline jobs" in html


def test_it_lists_entities_by_alias(alice_web, personas, graph):
    r = alice_web.get(f"/w/{personas.acme.id}/entities/?q=lovelace")
    assert b"Ada Lovelace" in r.content and b"Python" not in r.content
    r = alice_web.get(f"/w/{personas.acme.id}/entities/?type=language")
    assert b"Python" in r.content and b"Ada Lovelace" not in r.content


def test_it_shows_an_entity_with_aliases_and_facts(alice_web, personas, graph):
    r = alice_web.get(f"/w/{personas.acme.id}/entities/{graph.ada.id}/")
    html = r.content.decode()
    assert "a. lovelace" in html and "Ada uses Python 3.13" in html and "Ada uses Python 3.11" not in html
    everything = alice_web.get(f"/w/{personas.acme.id}/entities/{graph.ada.id}/?all=1").content.decode()
    assert "Ada uses Python 3.11" in everything


def test_it_lists_facts_and_communities(alice_web, personas, graph):
    facts = alice_web.get(f"/w/{personas.acme.id}/facts/?q=3.13").content.decode()
    assert "Ada uses Python 3.13" in facts
    communities = alice_web.get(f"/w/{personas.acme.id}/communities/").content.decode()
    assert "billing people" in communities and "Ada Lovelace, Python" in communities


def test_it_signs_out_with_a_post_only(alice_web, personas):
    assert alice_web.get("/accounts/logout/").status_code == 405
    assert alice_web.post("/accounts/logout/").status_code == 302
    assert alice_web.get(f"/w/{personas.acme.id}/graph/").status_code == 302


def test_it_opens_an_sdk_tenant_with_the_parent_role(bob_web, charlie_web, personas):
    from tenancy.models import Workspace

    tenant = Workspace.objects.create(
        kind="sdk_tenant", parent=personas.acme, tenant_id="shop-1", name="tenant shop-1"
    )
    assert b"shop-1" in bob_web.get("/").content
    assert bob_web.get(f"/w/{tenant.id}/graph/").status_code == 200
    assert bob_web.post(f"/w/{tenant.id}/rollout/mode/", {"mode": "shadow"}).status_code == 403
    assert charlie_web.get(f"/w/{tenant.id}/graph/").status_code == 404


def test_it_serves_the_vendored_files(alice_web):
    for path in (
        "/static/vendor/htmx-2.0.11.min.js",
        "/static/vendor/cytoscape-3.34.4.min.js",
        "/static/dashboard/explorer.js",
    ):
        response = alice_web.get(path)
        assert response.status_code == 200, path


def test_it_says_when_the_view_is_truncated(alice_web, personas, graph):
    data = alice_web.get(f"/w/{personas.acme.id}/graph/data/?limit=2").json()
    assert len(data["nodes"]) <= 2 and data["truncated"] is True
    assert alice_web.get(f"/w/{personas.acme.id}/graph/data/?limit=10").json()["truncated"] is False
