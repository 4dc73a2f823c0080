"""The explorer's data as people read it, the views for what changed and why context/get answered, memory edit
and forget, the rollout page's whole picture, confirmations and session expiry — through Django's test client.
Every new view declares its role: a weaker role gets 403, an outsider 404."""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

import pytest
from django.test import Client

from dashboard import graph as explorer_graph
from graphsvc.models import GraphEdge, GraphNode
from memories.models import Memory
from rollout.models import RolloutConfig
from tenancy.rls import workspace_context
from tests.memories.helpers import ACME_PROJECT
from tests.rollout.helpers import record


def add(personas: Any, content: str, **fields: Any) -> dict[str, Any]:
    """memories/add as alice's agent in acme (the project routes there), mapped into the graph."""
    scope = {"projectId": ACME_PROJECT, **fields.pop("scope", {})}
    return personas.alice_api.add(content, scope=scope, **fields)


def node_id(workspace_id: int, node_type: str, node_key: str) -> int:
    with workspace_context(workspace_id):
        return GraphNode.objects.get(workspace_id=workspace_id, node_type=node_type, node_key=node_key).id


def relate(workspace_id: int, edge_type: str, first: str, second: str, explanation: str) -> GraphEdge:
    """A relationship edge between two memories as LLM extraction stores it (contradicts: both ways)."""
    a, b = node_id(workspace_id, "memory", first), node_id(workspace_id, "memory", second)
    pairs = [(a, b), (b, a)] if edge_type == "contradicts" else [(a, b)]
    with workspace_context(workspace_id):
        made = [
            GraphEdge.objects.create(
                workspace_id=workspace_id,
                edge_key=f"r:{edge_type}:{x}:{y}",
                from_node_id=x,
                to_node_id=y,
                edge_type=edge_type,
                edge_class="temporal" if edge_type == "supersedes" else "semantic",
                origin="llm_pairwise",
                confidence=0.92,
                evidence_memory_id=first,
                evidence_text="moved to Tuesday",
                metadata={"explanation": explanation},
            )
            for x, y in pairs
        ]
    return made[0]


def data(client: Client, ws: int, query: str = "") -> dict[str, Any]:
    response = client.get(f"/w/{ws}/graph/data/?{query}")
    assert response.status_code == 200, response.content
    return response.json()


# --- the graph as people read it ----------------------------------------------------------------------------


def test_it_draws_a_memory_with_its_repo_topics_category_and_user(alice_web, personas):
    memory = add(
        personas,
        "We deploy the api on Tuesdays.",
        tags=["deploy", "release"],
        category="process",
        scope={"userId": "marcus"},
    )
    ws = personas.acme.id
    view = data(alice_web, ws, f"graph_node_type=memory&graph_node_key={memory['id']}")
    by_id = {node["id"]: node for node in view["nodes"]}
    assert view["focus"]["key"] == memory["id"]
    linked = {(by_id[e["target"]]["type"], by_id[e["target"]]["key"], e["type"]) for e in view["edges"]
              if e["source"] == view["focus"]["id"]}  # fmt: skip
    assert {
        ("repo", ACME_PROJECT, "in_repo"),
        ("topic", "deploy", "tagged"),
        ("topic", "release", "tagged"),
        ("category", "process", "in_category"),
        ("user", "marcus", "for_user"),
    } <= linked


def test_it_never_returns_two_edges_with_the_same_source_target_and_type(alice_web, personas):
    for i in range(4):
        add(personas, f"Deploy note {i}: the api ships on Tuesdays.", tags=["deploy"], category="process")
    ws = personas.acme.id
    for query in ("", "limit=2000", "graph_node_type=topic&graph_node_key=deploy"):
        edges = data(alice_web, ws, query)["edges"]
        keys = Counter((e["source"], e["target"], e["type"]) for e in edges)
        assert keys and max(keys.values()) == 1, query
    # Four memories say repo → deploy: one edge that counts them.
    about = [e for e in data(alice_web, ws)["edges"] if e["type"] == "about"]
    assert about and max(e["count"] for e in about) == 4


def test_it_summarises_a_hub_and_pages_its_memories(alice_web, personas, monkeypatch):
    monkeypatch.setattr(explorer_graph, "EGO_MEMORIES", 5)
    for i in range(explorer_graph.HUB_LINKS + 4):
        add(personas, f"Incident {i} was caused by a flaky deploy.", tags=["incident"])
    ws = personas.acme.id
    top = data(alice_web, ws, "limit=2000")
    incident = next(n for n in top["nodes"] if n["type"] == "topic" and n["key"] == "incident")
    drawn = [e for e in top["edges"] if e["target"] == incident["id"] and e["edgeId"] is None]
    assert len(drawn) == explorer_graph.HUB_LINKS and incident["hidden"] == 4 and incident["memories"] == 12
    first = data(alice_web, ws, "graph_node_type=topic&graph_node_key=incident")
    assert sum(n["type"] == "memory" for n in first["nodes"]) == 5
    assert first["more"] == {"count": 7, "offset": 5}
    second = data(alice_web, ws, "graph_node_type=topic&graph_node_key=incident&graph_offset=5")
    assert not {n["id"] for n in second["nodes"] if n["type"] == "memory"} & {
        n["id"] for n in first["nodes"] if n["type"] == "memory"
    }


def test_it_classes_contradictions_and_replacements(alice_web, personas):
    old = add(personas, "We deploy the api every Friday.", tags=["deploy"])
    new = add(personas, "Lena moved api deploys from Friday to Tuesday.", tags=["deploy"])
    ws = personas.acme.id
    relate(ws, "contradicts", new["id"], old["id"], "Friday versus Tuesday.")
    view = data(alice_web, ws, f"graph_node_type=memory&graph_node_key={old['id']}")
    contradicts = [e for e in view["edges"] if e["type"] == "contradicts"]
    assert contradicts and {e["class"] for e in contradicts} == {"contradicts"}
    focus = next(n for n in view["nodes"] if n["id"] == view["focus"]["id"])
    assert focus["contradicted"] is True
    # The pair panel carries the model's explanation.
    a, b = contradicts[0]["source"], contradicts[0]["target"]
    panel = alice_web.get(f"/w/{ws}/graph/pair/?a={a}&b={b}", HTTP_HX_REQUEST="true").content.decode()
    assert "Friday versus Tuesday." in panel and "tag-contradicts" in panel


def test_it_finds_nodes_and_memories_by_words(alice_web, personas, graph):
    add(personas, "The billing service runs on Python 3.13.", scope={"userId": "priya"}, tags=["billing"])
    found = alice_web.get(f"/w/{personas.acme.id}/graph/find/?q=billing").json()
    assert found["nodes"][0]["label"] == "billing" and found["nodes"][0]["exact"] is True
    contents = [m["content"] for m in found["memories"]]
    # Workspace-wide: the memory with a userId and a projectId is found too, with its node for the canvas.
    assert "The billing service runs on Python 3.13." in contents
    assert all(m["nodeId"] for m in found["memories"])
    assert alice_web.get(f"/w/{personas.acme.id}/graph/find/?q=").json()["nodes"] == []


# --- what changed, why context/get returned this ------------------------------------------------------------


def test_it_shows_conflicts_side_by_side_with_the_explanation(bob_web, personas):
    old = add(personas, "Use Moment.js for dates in the web app.")
    new = add(personas, "Moment.js was replaced by date-fns; do not add Moment imports.")
    stale = add(personas, "API pagination uses offset and limit.")
    newer = add(personas, "API pagination moved to cursors; offset is deprecated.")
    ws = personas.acme.id
    relate(ws, "contradicts", new["id"], old["id"], "Moment.js or date-fns: they disagree.")
    relate(ws, "supersedes", newer["id"], stale["id"], "Cursors replace offsets.")
    page = bob_web.get(f"/w/{ws}/changes/").content.decode()
    conflicts = page.split('id="conflicts"', 1)[1].split('id="replaced"', 1)[0]
    assert conflicts.count('class="pair conflict"') == 1  # stored both ways, shown once
    assert old["id"] in conflicts and new["id"] in conflicts
    assert "Moment.js or date-fns: they disagree." in conflicts
    assert "Cursors replace offsets." in page.split('id="replaced"', 1)[1]
    assert 'id="conflict-badge"' in page
    # The replaced memory says so on its own page, the contradicted one too.
    stale_page = bob_web.get(f"/w/{ws}/memories/{stale['id']}/").content.decode()
    assert 'id="superseded-banner"' in stale_page and newer["id"] in stale_page
    old_page = bob_web.get(f"/w/{ws}/memories/{old['id']}/").content.decode()
    assert 'id="contradicted-banner"' in old_page and "they disagree" in old_page
    listed = bob_web.get(f"/w/{ws}/memories/").content.decode()
    assert "tag-superseded" in listed and "tag-contradicts" in listed


def test_it_puts_facts_on_a_timeline(alice_web, personas, graph):
    page = alice_web.get(f"/w/{personas.acme.id}/changes/").content.decode()
    timeline = page.split('id="timeline"', 1)[1]
    assert "Ada uses Python 3.13" in timeline and "Ada uses Python 3.11" in timeline
    assert "bar-ended" in timeline and "bar-current" in timeline


def test_it_traces_context_get(bob_web, personas):
    memory = add(personas, "We deploy to production on Tuesdays.", scope={"userId": "priya"})
    ws = personas.acme.id
    r = bob_web.get(
        f"/w/{ws}/trace/?q=deploy+production&user_id=priya&project_id={ACME_PROJECT}&strategy=lexical"
    )
    html = r.content.decode()
    assert r.status_code == 200 and memory["id"] in html and "the ranking, place 1" in html
    row = html.split(f'data-memory-id="{memory["id"]}"', 1)[1].split("</tr>", 1)[0]
    # Text and type, not ids: the memory's words and its type in their own column.
    assert "We deploy to production on Tuesdays." in row and '<td data-label="Type">note</td>' in row
    assert "long-term" in row
    assert 'id="trace-data"' in html
    bad = bob_web.get(f"/w/{ws}/trace/?q=deploy&limit=999").content.decode()
    assert 'role="alert"' in bad and "limit" in bad


# --- memories: workspace-wide search, filters, edit, forget -------------------------------------------------


def test_it_searches_every_memory_of_the_workspace(bob_web, personas):
    scoped = add(personas, "When do we deploy to production? On Tuesdays.", scope={"userId": "marcus"})
    add(personas, "Shared note about lunch.")
    ws = personas.acme.id
    r = bob_web.get(f"/w/{ws}/memories/?q=deploy+production", HTTP_HX_REQUEST="true")
    assert scoped["id"] in r.content.decode()
    assert r.context["total"] == 1
    filtered = bob_web.get(f"/w/{ws}/memories/?q=deploy&user_id=priya", HTTP_HX_REQUEST="true")
    assert scoped["id"] not in filtered.content.decode() and filtered.context["total"] == 0


def test_it_filters_the_memory_list_and_counts(alice_web, personas):
    add(personas, "A rule for marcus.", type="rule", scope={"userId": "marcus"}, tags=["style"])
    add(personas, "A note for priya.", scope={"userId": "priya"}, tags=["style"])
    add(personas, "A shared note.", tags=["lunch"])
    ws = personas.acme.id
    everything = alice_web.get(f"/w/{ws}/memories/")
    assert everything.context["workspace_total"] == 3 and b"3 memories in the workspace" in everything.content
    assert alice_web.get(f"/w/{ws}/memories/?user_id=marcus").context["total"] == 1
    assert alice_web.get(f"/w/{ws}/memories/?user_id=-").context["total"] == 1
    assert alice_web.get(f"/w/{ws}/memories/?tag=style").context["total"] == 2
    assert alice_web.get(f"/w/{ws}/memories/?type=rule&tag=style").context["total"] == 1
    assert alice_web.get(f"/w/{ws}/memories/?type=poem").status_code == 400


def test_it_edits_a_memory_in_its_own_scope(bob_web, personas):
    memory = add(personas, "We deploy on Fridays.", tags=["deploy"], scope={"userId": "marcus"})
    ws = personas.acme.id
    url = f"/w/{ws}/memories/{memory['id']}/edit/"
    form = bob_web.get(url)
    assert form.status_code == 200 and b"We deploy on Fridays." in form.content
    changed = {"content": "We deploy on Tuesdays.", "type": "decision", "layer": "long_term"}
    r = bob_web.post(
        url, {**changed, "tags": "deploy, release", "category": "", "metadata": '{"speaker": "Lena"}'}
    )
    assert r.status_code == 302 and r["Location"] == f"/w/{ws}/memories/{memory['id']}/"
    with workspace_context(ws):
        stored = Memory.objects.get(pk=memory["id"])
    assert stored.content == "We deploy on Tuesdays." and stored.tags == ["deploy", "release"]
    assert stored.user_id == "marcus" and stored.metadata == {"speaker": "Lena"}
    page = bob_web.get(f"/w/{ws}/memories/{memory['id']}/").content.decode()
    assert "Memory saved" in page and 'id="memory-speaker">Lena' in page
    # Validated by the SDK's EditIn: one path, the same messages.
    bad = bob_web.post(url, {"content": "x", "type": "decision", "layer": "long_term", "metadata": "[1]"})
    assert bad.status_code == 400 and b"Metadata must be a JSON object" in bad.content
    huge = bob_web.post(
        url, {"content": "ok", "type": "decision", "layer": "long_term", "tags": ",".join(["t"] * 60)}
    )
    assert huge.status_code == 400 and b'role="alert"' in huge.content


def test_it_forgets_a_memory_after_a_confirmation(bob_web, personas):
    memory = add(personas, "Forget me.", scope={"userId": "priya"})
    ws = personas.acme.id
    url = f"/w/{ws}/memories/{memory['id']}/forget/"
    ask = bob_web.post(url)
    assert ask.status_code == 200 and b'id="confirm-page"' in ask.content
    with workspace_context(ws):
        assert Memory.objects.get(pk=memory["id"]).deleted_at is None
    done = bob_web.post(url, {"confirmed": "1"})
    assert done.status_code == 302 and done["Location"] == f"/w/{ws}/memories/"
    with workspace_context(ws):
        assert Memory.objects.get(pk=memory["id"]).deleted_at is not None
    assert bob_web.get(f"/w/{ws}/memories/{memory['id']}/").status_code == 404


# --- roles: every new view declares one ---------------------------------------------------------------------


def read_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Memberships grant write at least; a read-only holder (as an SDK key of scope read acts) is simulated
    by answering `read` for every user's role."""
    monkeypatch.setattr("dashboard.access.user_role_in", lambda **kwargs: "read")


READ_VIEWS = [
    "/w/{ws}/changes/",
    "/w/{ws}/trace/?q=deploy",
    "/w/{ws}/graph/find/?q=deploy",
    "/w/{ws}/graph/pair/?a=1&b=2",
    "/w/{ws}/memories/{memory}/",
]


@pytest.mark.parametrize("url", READ_VIEWS)
def test_it_lets_a_reader_read_and_keeps_an_outsider_out(bob_web, charlie_web, personas, url, monkeypatch):
    memory = add(personas, "A memory.")
    link = url.format(ws=personas.acme.id, memory=memory["id"])
    assert charlie_web.get(link).status_code == 404
    read_only(monkeypatch)
    assert bob_web.get(link).status_code in (200, 404)  # the pair 1–2 does not exist: 404 after the role


def test_it_refuses_edit_and_forget_to_a_reader_and_an_outsider(bob_web, charlie_web, personas, monkeypatch):
    memory = add(personas, "Keep me.")
    ws = personas.acme.id
    edit, forget = f"/w/{ws}/memories/{memory['id']}/edit/", f"/w/{ws}/memories/{memory['id']}/forget/"
    assert charlie_web.get(edit).status_code == 404
    assert charlie_web.post(forget, {"confirmed": "1"}).status_code == 404
    read_only(monkeypatch)
    refused = bob_web.post(forget, {"confirmed": "1"})
    assert refused.status_code == 403 and b"This needs the member role" in refused.content
    assert bob_web.get(edit).status_code == 403
    assert b'id="forget-memory"' not in bob_web.get(f"/w/{ws}/memories/{memory['id']}/").content
    with workspace_context(ws):
        assert Memory.objects.get(pk=memory["id"]).deleted_at is None


def test_it_keeps_the_message_on_a_403_page(bob_web, personas):
    r = bob_web.post(f"/w/{personas.acme.id}/rollout/mode/", {"mode": "off", "confirmed": "1"})
    html = r.content.decode()
    assert r.status_code == 403 and 'id="error-403"' in html
    assert "This needs the admin role in Acme; you are member here." in html


def test_it_styles_404_and_500(alice_web, personas):
    r = alice_web.get(f"/w/{personas.acme.id}/memories/{uuid.uuid4()}/")
    assert r.status_code == 404 and b'id="error-404"' in r.content and b"dashboard.css" in r.content
    from django.template.loader import render_to_string

    html = render_to_string("500.html")
    assert 'id="error-500"' in html and "dashboard.css" in html


# --- rollout: the whole picture -----------------------------------------------------------------------------


def test_it_shows_the_rollout_with_health_queue_spend_plan_and_trend(alice_web, personas):
    ws = personas.acme.id
    add(personas, "Something to count.")
    record(ws, 6)
    record(ws, 2, reason="graph_expansion_error")
    html = alice_web.get(f"/w/{ws}/rollout/").content.decode()
    sections = ("graph-health", "pipeline-queue", "dead-letters", "llm-usage", "rollout-plan", "gate-trend")
    for section in sections:
        assert f'id="{section}"' in html, section
    assert "polyline" in html and "tokens in 7 days" in html


def mode_of(workspace_id: int) -> str:
    with workspace_context(workspace_id):
        return RolloutConfig.objects.get(workspace_id=workspace_id).mode


def test_it_names_who_changed_the_mode(alice_web, personas):
    ws = personas.acme.id
    assert alice_web.post(f"/w/{ws}/rollout/mode/", {"mode": "shadow"}).status_code == 302
    assert 'id="rollout-changed-by">alice<' in alice_web.get(f"/w/{ws}/rollout/").content.decode()
    with workspace_context(ws):
        RolloutConfig.objects.filter(workspace_id=ws).update(updated_by=f"user:{personas.bob.pk}")
    assert "bob (API key)" in alice_web.get(f"/w/{ws}/rollout/").content.decode()


def test_it_asks_before_canary_or_off_and_calls_too_little_data_neutral(alice_web, personas):
    ws = personas.acme.id
    alice_web.post(f"/w/{ws}/rollout/mode/", {"mode": "shadow"})
    ask = alice_web.post(f"/w/{ws}/rollout/mode/", {"mode": "off"})
    assert ask.status_code == 200 and b"Switch graph retrieval to off?" in ask.content
    assert mode_of(ws) == "shadow"
    assert alice_web.post(f"/w/{ws}/rollout/mode/", {"mode": "off", "confirmed": "1"}).status_code == 302
    assert mode_of(ws) == "off"
    html = alice_web.get(f"/w/{ws}/rollout/").content.decode()
    assert 'class="status tone-neutral" id="gate-status" data-status="insufficient_data"' in html


# --- sessions that ended ------------------------------------------------------------------------------------


def test_it_sends_an_expired_htmx_call_to_sign_in(personas):
    ws = personas.acme.id
    page = f"/w/{ws}/graph/?graph_node_type=topic&graph_node_key=billing"
    r = Client().get(
        f"/w/{ws}/graph/node/?graph_node_type=topic&graph_node_key=billing",
        HTTP_HX_REQUEST="true",
        HTTP_HX_CURRENT_URL=f"http://testserver{page}",
    )
    assert r.status_code == 401 and r["HX-Redirect"].startswith("/accounts/login/?next=")
    assert "graph_node_key%3Dbilling" in r["HX-Redirect"] and b"<html" not in r.content
    fetched = Client().get(f"/w/{ws}/graph/data/", HTTP_ACCEPT="application/json")
    body = fetched.json()
    assert fetched.status_code == 401 and body["error"]["code"] == "SESSION_EXPIRED"
    assert body["error"]["details"]["loginUrl"].startswith("/accounts/login/")
    assert Client().get(f"/w/{ws}/graph/").status_code == 302  # a page still redirects


def test_it_does_not_redirect_sign_in_to_another_site(personas):
    r = Client().get(
        f"/w/{personas.acme.id}/graph/data/",
        HTTP_HX_REQUEST="true",
        HTTP_HX_CURRENT_URL="https://evil.example/x",
    )
    assert r.status_code == 401 and "evil" not in r["HX-Redirect"]


def test_it_names_the_llm_setting_only_when_it_is_missing(alice_web, personas, settings):
    settings.GRAPH_LLM_MODEL = ""
    assert b"GRAPH_LLM_MODEL" in alice_web.get(f"/w/{personas.acme.id}/entities/").content
    settings.GRAPH_LLM_MODEL = "openai/some-model"
    assert b"GRAPH_LLM_MODEL" not in alice_web.get(f"/w/{personas.acme.id}/entities/").content


def test_it_offers_a_ready_snippet_on_an_empty_workspace(alice_web, personas):
    html = alice_web.get(f"/w/{personas.acme.id}/graph/").content.decode()
    assert 'id="empty-workspace"' in html and "http://testserver/api/sdk/v1/memories/add" in html


# --- entities: merge and split (admin) ----------------------------------------------------------------------


def test_it_merges_undoes_and_splits_entities_for_an_admin(alice_web, personas, graph):
    ws = personas.acme.id
    merge = f"/w/{ws}/entities/{graph.ada.id}/merge/"
    ask = alice_web.post(merge, {"merged": graph.python.id})
    assert b"Merge Python into Ada Lovelace?" in ask.content
    done = alice_web.post(merge, {"merged": graph.python.id, "confirmed": "1"})
    assert done.status_code == 302
    page = alice_web.get(done["Location"]).content.decode()
    assert "Python merged into Ada Lovelace." in page and 'id="merge-history"' in page
    assert alice_web.get(f"/w/{ws}/entities/{graph.python.id}/").status_code == 404
    merge_id = page.split("/merges/", 1)[1].split("/", 1)[0]
    undo = alice_web.post(f"/w/{ws}/entities/{graph.ada.id}/merges/{merge_id}/undo/", {"confirmed": "1"})
    assert undo.status_code == 302
    assert alice_web.get(f"/w/{ws}/entities/{graph.python.id}/").status_code == 200
    split = alice_web.post(
        f"/w/{ws}/entities/{graph.ada.id}/split/",
        {"name": "A. Lovelace the younger", "aliases": ["a. lovelace"], "confirmed": "1"},
    )
    assert split.status_code == 302 and split["Location"] != f"/w/{ws}/entities/{graph.ada.id}/"
    assert b"A. Lovelace the younger" in alice_web.get(split["Location"]).content
    refused = alice_web.post(f"/w/{ws}/entities/{graph.ada.id}/split/", {"name": "", "confirmed": "1"})
    assert refused.status_code == 302  # back to the entity, with the schema's message
    assert b'class="flash-error"' in alice_web.get(refused["Location"]).content


def test_it_keeps_entity_fixes_from_members_and_outsiders(bob_web, charlie_web, personas, graph):
    ws = personas.acme.id
    merge = f"/w/{ws}/entities/{graph.ada.id}/merge/"
    refused = bob_web.post(merge, {"merged": graph.python.id, "confirmed": "1"})
    assert refused.status_code == 403 and b"This needs the admin role" in refused.content
    assert bob_web.post(f"/w/{ws}/entities/{graph.ada.id}/split/", {"name": "x"}).status_code == 403
    assert charlie_web.post(merge, {"merged": graph.python.id, "confirmed": "1"}).status_code == 404
    assert b'id="merge-form"' not in bob_web.get(f"/w/{ws}/entities/{graph.ada.id}/").content
    assert bob_web.get(f"/w/{ws}/entities/{graph.python.id}/").status_code == 200
