"""The dashboard in a real browser (Debian chromium, Playwright) at 1440×900 and 390×844, on one workspace
seeded once for the whole module: the 300 memories of a coding agent (memories/fixtures/agent-memories-300.
jsonl) through memories/add and the real pipeline, LLM extraction answered by the scripted fake model.

The seed is committed (the live server reads it from its own thread), so the module keeps its own personas
and live server instead of the function-scoped ones, and empties the database when it is done, as a
transactional test would after each test."""

from __future__ import annotations

import json
import re
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client, override_settings
from django.utils import timezone

from graphsvc.models import GraphNode
from memories.models import Memory
from rollout import services as rollout_services
from tenancy import services
from tenancy.models import ApiKey, Workspace
from tenancy.rls import workspace_context
from tests.conftest import SdkClient, make_user
from tests.dashboard import agent_data
from tests.dashboard.browser import (  # noqa: F401 - browser is a fixture
    PHONE,
    SIZES,
    browser,
    screenshot,
    session_cookie,
    sideways_overflow,
    signed_in_page,
    wait_until,
    watch,
)
from tests.rollout.helpers import record

DEPLOY_FRIDAY = "We deploy the api to production every Friday afternoon with a blue-green deploy."
DEPLOY_TUESDAY = (
    "Lena moved production deploys from Friday to Tuesday because Friday incidents ruined two weekends."
)
PAIRED = "Paired with Marcus on billing; agreed to split the module next sprint."
BUCKET = "Browser test: the staging bucket is s3://old-bucket."
INFRA = "github.com/demo/infra"


@dataclass
class World:
    url: str
    alice: Any
    bob: Any
    charlie: Any
    acme: Workspace
    ids: dict[str, str]
    # Session cookies, committed with the seed so the live server's thread can read them.
    sessions: dict[str, str]

    @property
    def ws(self) -> int:
        return self.acme.id


@pytest.fixture(scope="module")
def world(django_db_setup: Any, django_db_blocker: Any) -> Iterator[World]:
    from pytest_django.live_server_helper import LiveServer

    # The hasher the tests sign in with (tests/conftest.py fast_password_hasher, set per test after this).
    fast = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    with django_db_blocker.unblock(), override_settings(RATE_LIMIT_REQUESTS=1_000_000, PASSWORD_HASHERS=fast):
        try:
            alice, bob, charlie = make_user("alice"), make_user("bob"), make_user("charlie")
            acme = services.org_create(owner=alice, slug="acme", name="Acme")
            services.membership_set(org=acme, user=bob, role="member")
            services.org_create(owner=charlie, slug="globex", name="Globex")
            # Pinned to acme: the fixture's github.com/demo/* projects land there whatever routing says.
            key = services.api_key_create(user=alice, scope="admin", workspace=acme).raw_key
            agent = SdkClient(Client(), key)
            ids = agent_data.load(
                workspace_id=acme.id, add=lambda body: agent.ok("memories/add", body, status=201)["memory"]
            )
            # One memory of an end user for the edit-and-forget test (written now: a test's own writes stay in
            # its transaction, where the live server never sees them).
            bucket = agent.ok(
                "memories/add",
                {"content": BUCKET, "tags": ["staging"], "scope": {"userId": "priya", "projectId": INFRA}},
                status=201,
            )["memory"]
            ids[BUCKET] = bucket["id"]
            # A day of context/get calls for the rollout page's trend (a gate that passes, one graph error),
            # and canary on, so the trace shows memories the graph added.
            now = timezone.now()
            for hour in range(0, 24, 2):
                record(acme.id, 4 + hour % 5, at=now - timedelta(hours=hour, minutes=5))
            record(acme.id, 1, reason="graph_expansion_error", at=now - timedelta(hours=7))
            rollout_services.rollout_mode_set(
                workspace_id=acme.id, mode="canary", autopilot_enabled=None, updated_by="dashboard:alice"
            )
            sessions = {user.get_username(): session_cookie(user) for user in (alice, bob, charlie)}
            server = LiveServer("localhost")
            server._live_server_modified_settings.enable()
            try:
                yield World(server.url, alice, bob, charlie, acme, ids, sessions)
            finally:
                server._live_server_modified_settings.disable()
                server.stop()
        finally:
            for alias in ("default",):
                call_command("flush", database=alias, interactive=False, verbosity=0)


@pytest.fixture
def problems() -> list[str]:
    return []


def wait_for_graph(page: Any) -> None:
    page.wait_for_selector(
        "#graph-canvas[data-ready='1'], #graph-canvas[data-ready='error']", state="attached", timeout=60_000
    )
    assert page.get_attribute("#graph-canvas", "data-ready") == "1", page.text_content("#graph-status")


def node_id(world: World, node_type: str, node_key: str) -> int:
    with workspace_context(world.ws):
        return GraphNode.objects.get(workspace_id=world.ws, node_type=node_type, node_key=node_key).id


def ego(world: World, node_type: str, node_key: str) -> str:
    from urllib.parse import urlencode

    return f"/w/{world.ws}/graph/?" + urlencode({"graph_node_type": node_type, "graph_node_key": node_key})


def only_expected(problems: list[str], *allowed: str) -> list[str]:
    return [p for p in problems if not any(a in p for a in allowed)]


def pick_node(page: Any, prefix: str) -> None:
    """Select the first node in the "Nodes on screen" list whose text starts with `prefix`."""
    value = page.evaluate(
        "prefix => Array.from(document.querySelectorAll('#node-select option'))"
        ".find(o => o.textContent.startsWith(prefix)).value",
        prefix,
    )
    page.focus("#node-select")
    page.select_option("#node-select", value=value)


def expand_and_wait(page: Any, before: int) -> None:
    """Expand the selected node and wait for its neighbours. Once, on the fully loaded CI machine, the
    expansion's request never reached the live server; a person would press the button again, so the test does
    too, once, and a second miss fails."""
    grown = f"window.cairnExplorer.cy.nodes().length > {before}"
    page.wait_for_selector("#graph-expand:enabled")
    page.click("#graph-expand")
    try:
        wait_until(page, grown, timeout=15.0)
    except AssertionError:
        first_status = page.text_content("#graph-status")
        page.click("#graph-expand")
        wait_until(page, grown, timeout=30.0)
        print(f"expand needed a second press; the first left the status at {first_status!r}")


def click_node(page: Any, cy_id: str) -> None:
    point = page.evaluate(f"window.cairnExplorer.cy.getElementById('{cy_id}').renderedPosition()")
    box = page.locator("#graph-canvas").bounding_box()
    page.mouse.click(box["x"] + point["x"], box["y"] + point["y"])


# --- every page, both sizes ---------------------------------------------------------------------------------


def tour(world: World) -> list[tuple[str, str, str]]:
    """(name, path, what to wait for) of every page a member sees."""
    ws = world.ws
    friday, tuesday = world.ids[DEPLOY_FRIDAY], world.ids[DEPLOY_TUESDAY]
    with workspace_context(ws):
        api = GraphNode.objects.get(workspace_id=ws, node_type="project", node_key="api")
    return [
        ("home", "/", "main h1"),
        ("explorer", f"/w/{ws}/graph/", "graph"),
        ("explorer-memory", ego(world, "memory", tuesday), "graph"),
        ("explorer-topic", ego(world, "topic", "deploy"), "graph"),
        ("memories", f"/w/{ws}/memories/", "#memory-total"),
        ("memories-search", f"/w/{ws}/memories/?q=When+do+we+deploy+to+production", "#memory-total"),
        ("memory", f"/w/{ws}/memories/{friday}/", "#memory-content"),
        ("memory-edit", f"/w/{ws}/memories/{friday}/edit/", "#memory-edit-form"),
        ("changes", f"/w/{ws}/changes/", "#conflicts"),
        (
            "trace",
            f"/w/{ws}/trace/?q=When+do+we+deploy+to+production&project_id=github.com/demo/api&strategy=hybrid",
            "#trace-canvas[data-ready='1']",
        ),
        ("entities", f"/w/{ws}/entities/", "#entity-list"),
        ("entity", f"/w/{ws}/entities/{api.id}/", "#aliases"),
        ("facts", f"/w/{ws}/facts/?all=1", "table.facts"),
        ("communities", f"/w/{ws}/communities/", "main h1"),
        ("rollout", f"/w/{ws}/rollout/", "#quality-gate"),
        ("members", f"/w/{ws}/members/", "#member-list"),
        ("invitations", "/settings/invitations/", "main h1"),
        ("keys", "/settings/keys/", "#key-list"),
        ("routing", "/settings/routing/", "#mapping-list"),
        ("not-found", f"/w/{ws}/memories/{uuid.uuid4()}/", "#error-404"),
    ]


@pytest.mark.parametrize("size", ["desktop", "phone"])
def test_it_shows_every_page_without_sideways_scroll(browser, world, problems, size):  # noqa: F811
    page = signed_in_page(browser, world.url, world.sessions["alice"], problems, SIZES[size])
    for name, path, ready in tour(world):
        page.goto(path)
        if ready == "graph":
            wait_for_graph(page)
        else:
            page.wait_for_selector(ready, state="attached")
        assert sideways_overflow(page) <= 0, f"{name} scrolls sideways at {size}"
        screenshot(page, f"{name}-{size}")
    page.context.close()
    # The 404 page's own status is the only console error allowed.
    assert only_expected(problems, "404 (Not Found)") == []


def test_it_shows_the_403_and_sign_in_pages(browser, world, problems):  # noqa: F811
    for size, viewport in SIZES.items():
        page = signed_in_page(browser, world.url, world.sessions["bob"], problems, viewport)
        page.goto(f"/w/{world.ws}/rollout/")
        # A member posting an admin's form (as a stale page would): the styled 403 keeps its message.
        page.evaluate(
            """ws => { const f = document.createElement('form'); f.method = 'post';
              f.action = `/w/${ws}/rollout/mode/`;
              const add = (n, v) => { const i = document.createElement('input'); i.type = 'hidden';
                i.name = n; i.value = v; f.appendChild(i); };
              add('csrfmiddlewaretoken', JSON.parse(document.body.getAttribute('hx-headers'))['X-CSRFToken']);
              add('mode', 'off'); add('confirmed', '1'); document.body.appendChild(f); f.submit(); }""",
            world.ws,
        )
        page.wait_for_selector("#error-403")
        assert "This needs the admin role in Acme; you are member here." in page.text_content("#error-403")
        assert sideways_overflow(page) <= 0
        screenshot(page, f"forbidden-{size}")
        page.context.close()
        signed_out = signed_in_page(browser, world.url, None, problems, viewport)
        signed_out.goto("/accounts/login/")
        assert sideways_overflow(signed_out) <= 0
        screenshot(signed_out, f"sign-in-{size}")
        signed_out.context.close()
    assert only_expected(problems, "403 (Forbidden)") == []


# --- the graph as people read it ----------------------------------------------------------------------------


def test_it_draws_a_memory_with_its_topic_and_repo(browser, world, problems):  # noqa: F811
    page = signed_in_page(browser, world.url, world.sessions["alice"], problems)
    tuesday = world.ids[DEPLOY_TUESDAY]
    page.goto(ego(world, "memory", tuesday))
    wait_for_graph(page)
    focus = node_id(world, "memory", tuesday)
    neighbours = page.evaluate(
        f"""window.cairnExplorer.cy.getElementById('n{focus}').connectedEdges().map(e => {{
              const other = e.source().id() === 'n{focus}' ? e.target() : e.source();
              return [other.data('type'), other.data('key'), e.data('label')]; }})"""
    )
    linked = {(t, k) for t, k, _ in neighbours}
    assert ("topic", "deploy") in linked and ("repo", "github.com/demo/api") in linked
    assert ("category", "deploy") in linked
    labels = {label for t, k, label in neighbours if (t, k) == ("repo", "github.com/demo/api")}
    assert any("in_repo" in label for label in labels)
    # The status line says it: not "1 node, 0 edges".
    assert re.search(r"\d+ nodes, \d+ edges", page.text_content("#graph-status"))
    screenshot(page, "memory-one-hop")
    page.context.close()
    assert problems == []


def test_it_answers_no_two_edges_with_the_same_source_target_and_type(browser, world, problems):  # noqa: F811
    page = signed_in_page(browser, world.url, world.sessions["alice"], problems)
    for query in ("limit=2000", "graph_node_type=topic&graph_node_key=deploy", "limit=150"):
        response = page.request.get(f"/w/{world.ws}/graph/data/?{query}")
        assert response.ok, query
        edges = response.json()["edges"]
        keys = Counter((e["source"], e["target"], e["type"]) for e in edges)
        assert edges and max(keys.values()) == 1, query
        # Every drawn node has an edge: nothing floats.
        touched = {e["source"] for e in edges} | {e["target"] for e in edges}
        assert {n["id"] for n in response.json()["nodes"]} <= touched, query
    page.context.close()


def test_it_draws_a_contradiction_in_its_own_style_and_lists_it_with_both_memories(browser, world, problems):  # noqa: F811
    page = signed_in_page(browser, world.url, world.sessions["bob"], problems)
    page.goto(ego(world, "memory", world.ids[DEPLOY_FRIDAY]))
    wait_for_graph(page)
    style = page.evaluate(
        """(() => { const e = window.cairnExplorer.cy.edges('.contradicts')[0];
              return e ? [e.style('line-style'), e.style('line-color'), e.style('width'),
                          e.style('target-arrow-shape')] : null; })()"""
    )
    assert style is not None, "no contradicts edge drawn"
    line_style, colour, width, arrow = style
    assert line_style == "dashed" and colour == "rgb(213,94,0)" and arrow == "tee"
    structural = page.evaluate("window.cairnExplorer.cy.edges('.structural')[0].style('line-color')")
    assert structural != colour
    legend = page.text_content("#legend-edges")
    assert "contradicts" in legend and "belongs to" in legend
    # The memory carries the mark too.
    assert page.evaluate("window.cairnExplorer.cy.nodes('.contradicted').length") >= 1
    screenshot(page, "contradiction-in-graph")
    page.goto(f"/w/{world.ws}/changes/")
    conflict = page.locator("article.conflict", has_text="every Friday afternoon")
    assert conflict.count() == 1
    text = conflict.text_content()
    assert DEPLOY_FRIDAY in text and DEPLOY_TUESDAY in text and "production deploys moved to Tuesday" in text
    screenshot(page, "conflicts")
    page.context.close()
    assert problems == []


def test_it_steps_back_through_drill_downs(browser, world, problems):  # noqa: F811
    page = signed_in_page(browser, world.url, world.sessions["alice"], problems)
    page.goto(f"/w/{world.ws}/graph/")
    wait_for_graph(page)
    overview = page.url
    # The overview folds all but its busiest topics into bundles: the topic is found by name.
    find_and_open(page, "deploy", "topic")
    wait_until(page, "location.search.includes('graph_node_key=deploy')")
    assert page.text_content("#graph-status").startswith("deploy")
    pick_node(page, "api (repo")
    page.keyboard.press("Enter")
    wait_until(page, "location.search.includes('demo%2Fapi')")
    wait_for_graph(page)
    assert page.text_content("#graph-status").startswith("api")
    # The panels follow the focus: nothing of the old selection is left.
    assert page.locator("#edge-details, #pair-details").count() == 0
    page.go_back()
    wait_until(page, "location.search.includes('graph_node_key=deploy')")
    wait_for_graph(page)
    # The view before, with the selection it had when the drill-down left it.
    assert "graph_node_type=topic&graph_node_key=deploy" in page.url
    assert page.text_content("#graph-status").startswith("deploy")
    page.go_back()
    wait_until(page, "!location.search.includes('graph_node_key')")
    wait_for_graph(page)
    assert page.url.split("?")[0] == overview.split("?")[0]
    assert re.match(r"\d+ nodes", page.text_content("#graph-status"))
    page.context.close()
    assert problems == []


def test_it_finds_expands_and_reads_labels(browser, world, problems):  # noqa: F811
    page = signed_in_page(browser, world.url, world.sessions["alice"], problems)
    page.goto(f"/w/{world.ws}/graph/")
    wait_for_graph(page)
    # Labels: some shown, the overlapping ones hidden.
    shown, total = page.evaluate(
        "[window.cairnExplorer.cy.nodes().filter(n => !n.hasClass('nolabel')).length,"
        " window.cairnExplorer.cy.nodes().length]"
    )
    assert 0 < shown < total
    # Find a memory by words: its 1-hop view opens.
    page.fill("#find-input", "Moment.js date-fns")
    page.wait_for_selector("#find-results [role=option]")
    page.press("#find-input", "Enter")
    wait_until(page, "location.search.includes('graph_node_type=memory')")
    wait_for_graph(page)
    assert "Moment.js" in page.text_content("#graph-status")
    # Expand a neighbour: its new nodes are placed around it, inside the canvas, not at its edge.
    before = page.evaluate("window.cairnExplorer.cy.nodes().length")
    pick_node(page, "web (repo")
    expand_and_wait(page, before)
    page.wait_for_timeout(400)
    spread = page.evaluate(
        """(() => { const cy = window.cairnExplorer.cy; const web = cy.nodes(':selected')[0].position();
              const far = n => Math.hypot(n.position().x - web.x, n.position().y - web.y);
              return Math.max(...cy.nodes().map(far)); })()"""
    )
    assert spread < 2000
    screenshot(page, "expanded")
    page.context.close()
    assert problems == []


# --- search, edit, forget ------------------------------------------------------------------------------


def test_it_searches_the_whole_workspace(browser, world, problems):  # noqa: F811
    page = signed_in_page(browser, world.url, world.sessions["bob"], problems)
    page.goto(f"/w/{world.ws}/memories/")
    total = page.text_content("#memory-total")
    assert re.search(r"\d+ memories in the workspace", total)
    page.fill("#memory-search input[name=q]", "When do we deploy to production")
    page.click("#memory-search button[type=submit]")
    page.wait_for_selector("#search-trace")
    assert page.locator(f"tr[data-memory-id='{world.ids[DEPLOY_TUESDAY]}']").count() == 1
    assert page.locator(f"tr[data-memory-id='{world.ids[DEPLOY_FRIDAY]}']").count() == 1
    assert "matching memor" in page.text_content("#memory-total")
    # A memory with both a projectId and a userId is found, and the user filter narrows to it.
    page.goto(f"/w/{world.ws}/memories/?q=Paired+Marcus+billing&user_id=marcus")
    row = page.locator(f"tr[data-memory-id='{world.ids[PAIRED]}']")
    assert row.count() == 1 and "github.com/demo/web · marcus" in row.text_content()
    with workspace_context(world.ws):
        stored = Memory.objects.get(pk=world.ids[PAIRED])
    assert stored.project_id and stored.user_id == "marcus"
    screenshot(page, "memory-search")
    page.context.close()
    assert problems == []


def test_it_edits_and_forgets_a_memory_after_confirming(browser, world, problems):  # noqa: F811
    memory = {"id": world.ids[BUCKET]}
    page = signed_in_page(browser, world.url, world.sessions["bob"], problems)
    page.goto(f"/w/{world.ws}/memories/{memory['id']}/")
    page.click("#edit-memory")
    page.fill("textarea[name=content]", "Browser test: the staging bucket is s3://new-bucket.")
    page.fill("textarea[name=metadata]", json.dumps({"speaker": "Priya", "sessionId": "s-browser"}))
    page.click("#memory-edit-form button[type=submit]")
    page.wait_for_selector(".flash-success")
    assert "s3://new-bucket" in page.text_content("#memory-content")
    assert page.text_content("#memory-speaker") == "Priya"
    # Forget asks first; Cancel keeps it.
    page.click("#forget-memory")
    page.wait_for_selector("#confirm-dialog[open]")
    screenshot(page, "confirm-forget")
    page.click("#confirm-dialog button[value=cancel]")
    assert page.url.endswith(f"/memories/{memory['id']}/")
    with workspace_context(world.ws):
        assert Memory.objects.get(pk=memory["id"]).deleted_at is None
    page.click("#forget-memory")
    page.click("#confirm-ok")
    page.wait_for_url(re.compile(r"/memories/$"))
    assert "Memory forgotten." in page.text_content(".flash")
    with workspace_context(world.ws):
        assert Memory.objects.get(pk=memory["id"]).deleted_at is not None
    page.context.close()
    assert problems == []


# --- sessions, rollout, keys, outsiders ---------------------------------------------------------------------


def test_it_sends_an_expired_session_to_sign_in(browser, world, problems):  # noqa: F811
    page = signed_in_page(browser, world.url, world.sessions["alice"], problems)
    page.goto(f"/w/{world.ws}/graph/")
    wait_for_graph(page)
    page.context.clear_cookies()
    # An htmx call (the node panel): the answer is a 401 with HX-Redirect, never the sign-in page in a panel.
    first = page.evaluate("window.cairnExplorer.cy.nodes()[0].id()")
    click_node(page, first)
    page.wait_for_url(re.compile(r"/accounts/login/\?next="))
    assert page.locator("#node-panel").count() == 0 and page.locator("#login-form").count() == 1
    # The explorer's own fetches (find) do the same.
    page2 = signed_in_page(browser, world.url, world.sessions["alice"], problems)
    page2.goto(f"/w/{world.ws}/graph/")
    wait_for_graph(page2)
    page2.context.clear_cookies()
    page2.fill("#find-input", "deploy")
    page2.wait_for_url(re.compile(r"/accounts/login/\?next=%2Fw%2F"))
    page.context.close()
    page2.context.close()
    assert only_expected(problems, "401 (Unauthorized)") == []


def test_it_confirms_rollout_changes_and_names_who_made_them(browser, world, problems):  # noqa: F811
    page = signed_in_page(browser, world.url, world.sessions["alice"], problems)
    page.goto(f"/w/{world.ws}/rollout/")
    assert page.locator("#gate-trend polyline").count() == 2
    page.click("button[data-mode=shadow]")
    page.wait_for_selector("button[data-mode=shadow][aria-pressed=true]")
    assert page.text_content("#rollout-changed-by") == "alice"
    page.click("button[data-mode=off]")
    page.wait_for_selector("#confirm-dialog[open]")
    assert "Switch graph retrieval to off?" in page.text_content("#confirm-title")
    page.click("#confirm-dialog button[value=cancel]")
    assert page.locator("button[data-mode=shadow][aria-pressed=true]").count() == 1
    page.click("button[data-mode=off]")
    page.click("#confirm-ok")
    page.wait_for_selector("button[data-mode=off][aria-pressed=true]")
    screenshot(page, "rollout")
    page.context.close()
    assert problems == []


def test_it_shows_a_new_key_once_with_a_copy_button_and_revokes_after_confirming(browser, world, problems):  # noqa: F811
    page = signed_in_page(browser, world.url, world.sessions["alice"], problems)
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=world.url)
    page.goto("/settings/keys/")
    page.fill("#key-form input[name=name]", "ci")
    page.fill("#key-form input[name=expires_in_days]", "7")
    page.click("#key-form button[type=submit]")
    raw = page.text_content("#raw-key")
    assert re.fullmatch(r"mem_[0-9a-f]{64}", raw)
    page.click("#copy-raw-key")
    wait_until(page, "document.querySelector('#copy-raw-key').dataset.copied === '1'")
    assert page.evaluate("navigator.clipboard.readText()") == raw
    page.reload()  # post/redirect/get: a reload shows the list, never a second key
    assert page.locator("#raw-key").count() == 0
    assert ApiKey.objects.filter(user=world.alice, name="ci").count() == 1
    row = page.locator("#key-list tr", has_text=raw[-4:])
    row.locator("button.danger").click()
    page.wait_for_selector("#confirm-dialog[open]")
    page.click("#confirm-ok")
    page.wait_for_selector(".flash-success")
    assert ApiKey.objects.get(user=world.alice, name="ci").revoked_at is not None
    page.context.close()
    assert problems == []


def test_it_keeps_an_outsider_out(browser, world, problems):  # noqa: F811
    page = signed_in_page(browser, world.url, world.sessions["charlie"], problems)
    for path in (f"/w/{world.ws}/graph/", f"/w/{world.ws}/changes/", f"/w/{world.ws}/trace/?q=deploy"):
        response = page.goto(path)
        assert response.status == 404 and page.locator("#error-404").count() == 1
    data = page.request.get(f"/w/{world.ws}/graph/data/")
    assert data.status == 404
    page.context.close()
    assert only_expected(problems, "404 (Not Found)") == []


# --- a phone ------------------------------------------------------------------------------------------------


def test_it_gives_the_canvas_the_phone_screen_with_drawers_and_a_menu(browser, world, problems):  # noqa: F811
    page = signed_in_page(browser, world.url, world.sessions["alice"], problems, PHONE)
    page.goto(f"/w/{world.ws}/graph/")
    wait_for_graph(page)
    box = page.locator("#graph-canvas").bounding_box()
    assert box["width"] >= 360 and box["height"] >= 400
    assert not page.locator(".sections").is_visible()
    page.click(".nav-toggle-label")
    assert page.locator(".sections a", has_text="Changes").is_visible()
    page.click(".nav-toggle-label")
    page.click("#toggle-filters")
    page.wait_for_selector("#filters-drawer.open")
    screenshot(page, "explorer-filters-phone")
    page.click("#filters-drawer .drawer-close")
    first = page.evaluate("window.cairnExplorer.cy.nodes()[0].id()")
    click_node(page, first)
    page.wait_for_selector("#details-drawer.open #node-details")
    assert sideways_overflow(page) <= 0
    screenshot(page, "explorer-details-phone")
    page.context.close()
    assert problems == []


def test_it_signs_in_through_the_form(browser, world, problems):  # noqa: F811
    page = browser.new_page(base_url=world.url)
    watch(page, problems)
    page.goto(f"/w/{world.ws}/changes/")
    assert "/accounts/login/" in page.url
    page.fill("input[name=username]", "alice")
    page.fill("input[name=password]", "pw-alice")
    page.click("#login-form button[type=submit]")
    page.wait_for_selector("#conflicts")
    assert page.url.endswith(f"/w/{world.ws}/changes/")
    page.close()
    assert problems == []


# --- an explorer that explains: the walk-through of a new user ----------------------------------------------

TERRAFORM_RULE = "Terraform changes must be planned in CI and applied only by Lena or the on-call SRE."


def contrast(rgb: str, background: tuple[int, int, int] = (255, 255, 255), opacity: float = 1.0) -> float:
    """WCAG contrast of a CSS colour (rgb(…) or #rrggbb), blended at `opacity` over the background."""
    if rgb.startswith("#"):
        channels = [int(rgb[i : i + 2], 16) for i in (1, 3, 5)]
    else:
        channels = [int(float(c)) for c in re.findall(r"[\d.]+", rgb)[:3]]
    blended = [c * opacity + b * (1 - opacity) for c, b in zip(channels, background, strict=True)]

    def luminance(values: list[float] | tuple[int, ...]) -> float:
        def linear(c: float) -> float:
            c = c / 255
            return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

        r, g, b = (linear(v) for v in values)
        return 0.2126 * r + 0.7152 * g + 0.0722 * b

    first, second = luminance(blended), luminance(background)
    return (max(first, second) + 0.05) / (min(first, second) + 0.05)


def find_and_open(page: Any, words: str, kind: str) -> None:
    page.fill("#find-input", words)
    page.wait_for_selector(f"#find-results [role=option]:has-text('{kind}')")
    page.locator("#find-results [role=option]", has_text=kind).first.click()
    wait_until(page, f"location.search.includes('graph_node_type={kind}')")
    wait_for_graph(page)


@pytest.mark.parametrize("size", ["desktop", "phone"])
def test_it_answers_what_the_agent_knows_about_the_api_repo(browser, world, problems, size):  # noqa: F811
    page = signed_in_page(browser, world.url, world.sessions["alice"], problems, SIZES[size])
    page.goto(f"/w/{world.ws}/graph/")
    wait_for_graph(page)
    find_and_open(page, "api", "repo")
    if size == "phone":
        # Picked from the find box: the summary opens in the Details drawer by itself.
        page.wait_for_selector("#details-drawer.open")
    page.wait_for_selector("#hub-rules li")
    rules = page.locator("#hub-rules li")
    assert rules.first.locator(".tag").text_content() == "rule"
    # The rules and decisions are on screen without scrolling.
    box = page.locator("#hub-rules li").first.bounding_box()
    assert box is not None and box["y"] + box["height"] <= SIZES[size]["height"]
    assert page.locator("#hub-topics .chip").count() >= 3
    assert re.search(r"\d+$", page.locator("#hub-topics .chip .count").first.text_content())
    # The neighbourhood: memories in labelled boxes by type, rules first; the hub labelled.
    groups = page.evaluate("window.cairnExplorer.cy.nodes('.group').map(n => n.data('label'))")
    assert groups and groups[0].startswith("rule")
    assert page.evaluate("window.cairnExplorer.cy.nodes('.focus').every(n => !n.hasClass('nolabel'))")
    screenshot(page, f"walk-api-repo-{size}")
    page.context.close()
    assert problems == []


def test_it_answers_who_approves_terraform_changes_and_which_deploy_day_holds(browser, world, problems):  # noqa: F811
    page = signed_in_page(browser, world.url, world.sessions["alice"], problems)
    page.goto(f"/w/{world.ws}/graph/")
    wait_for_graph(page)
    find_and_open(page, "terraform", "topic")
    page.wait_for_selector("#hub-rules li")
    assert TERRAFORM_RULE in page.text_content("#hub-rules")
    screenshot(page, "walk-terraform")
    # Which deploy day is current: the Tuesday memory, on every page that shows the pair.
    friday, tuesday = world.ids[DEPLOY_FRIDAY], world.ids[DEPLOY_TUESDAY]
    page.goto(ego(world, "memory", friday))
    wait_for_graph(page)
    classes = page.evaluate(
        f"[window.cairnExplorer.cy.getElementById('n{node_id(world, 'memory', friday)}').classes(),"
        f" window.cairnExplorer.cy.getElementById('n{node_id(world, 'memory', tuesday)}').classes()]"
    )
    assert "outdated" in classes[0] and "current" in classes[1]
    contradiction = page.evaluate("window.cairnExplorer.cy.edges('.contradicts')[0].id()")
    page.evaluate(f"window.cairnExplorer.cy.getElementById('{contradiction}').emit('tap')")
    page.wait_for_selector("#pair-details, #edge-details")
    assert page.locator("#edge-panel [data-state=current]").count() == 1
    assert page.locator("#edge-panel [data-state=outdated]").count() == 1
    page.goto(f"/w/{world.ws}/changes/")
    card = page.locator("article.conflict", has_text="every Friday afternoon")
    assert card.locator(f"[data-memory-id='{friday}']").get_attribute("data-state") == "outdated"
    assert card.locator(f"[data-memory-id='{tuesday}']").get_attribute("data-state") == "current"
    screenshot(page, "walk-deploy-changes")
    page.goto(f"/w/{world.ws}/memories/?q=deploy+production")
    assert page.locator(f"tr[data-memory-id='{friday}'] [data-state=outdated]").count() == 1
    assert page.locator(f"tr[data-memory-id='{tuesday}'] [data-state=current]").count() == 1
    page.goto(f"/w/{world.ws}/facts/?all=1")
    tuesday_fact = page.locator("tr", has_text="deploys to production on Tuesdays")
    friday_fact = page.locator("tr", has_text="deploys to production on Fridays")
    assert tuesday_fact.first.get_attribute("data-state") == "current"
    assert friday_fact.first.get_attribute("data-state") != "current"
    screenshot(page, "walk-deploy-facts")
    page.context.close()
    assert problems == []


@pytest.mark.parametrize("size", ["desktop", "phone"])
def test_it_shows_how_lena_is_connected_to_terraform(browser, world, problems, size):  # noqa: F811
    page = signed_in_page(browser, world.url, world.sessions["alice"], problems, SIZES[size])
    page.goto(f"/w/{world.ws}/graph/")
    wait_for_graph(page)
    page.click("#path-box summary")
    page.fill("#path-a", "Lena")
    page.fill("#path-b", "terraform")
    page.click("#path-form button[type=submit]")
    wait_until(page, "location.search.includes('graph_path=')")
    wait_for_graph(page)
    page.wait_for_selector("#path-details .path-steps li")
    steps = page.locator("#path-details .path-steps").first.locator("li").all_text_contents()
    assert steps and "Lena" in steps[0] and "terraform" in steps[-1]
    assert page.evaluate("window.cairnExplorer.cy.edges('.path').length") >= len(steps)
    assert "shortest path" in page.text_content("#graph-status")
    assert sideways_overflow(page) <= 0
    screenshot(page, f"walk-lena-terraform-{size}")
    # Back returns to the overview.
    page.go_back()
    wait_until(page, "!location.search.includes('graph_path')")
    wait_for_graph(page)
    page.context.close()
    assert problems == []


def test_it_expands_a_node_through_one_relationship(browser, world, problems):  # noqa: F811
    page = signed_in_page(browser, world.url, world.sessions["alice"], problems)
    page.goto(ego(world, "memory", world.ids[DEPLOY_TUESDAY]))
    wait_for_graph(page)
    pick_node(page, "deploy (topic")
    page.select_option("#expand-type", "tagged")
    before = page.evaluate("window.cairnExplorer.cy.edges().map(e => e.id())")
    page.click("#graph-expand")
    wait_until(page, f"window.cairnExplorer.cy.edges().length > {len(before)}")
    labels = page.evaluate(
        "before => window.cairnExplorer.cy.nodes(':selected')[0].connectedEdges()"
        ".filter(e => !before.includes(e.id())).map(e => e.data('label'))",
        before,
    )
    # What the expansion added reaches the topic through the chosen relationship only.
    assert labels and all(label == "tagged" for label in labels), labels
    assert "through tagged" in page.text_content("#graph-status")
    page.context.close()
    assert problems == []


def test_it_keeps_big_views_legible(browser, world, problems):  # noqa: F811
    page = signed_in_page(browser, world.url, world.sessions["alice"], problems)
    page.goto(f"/w/{world.ws}/graph/?graph_limit=400")
    wait_for_graph(page)
    cy = "window.cairnExplorer.cy"
    # Topics beyond the busiest few are folded into a bundle beside their repo; a click opens one.
    bundles = page.evaluate(f"{cy}.nodes('[type = \"bundle\"]').map(n => n.id())")
    assert bundles
    before = page.evaluate(f"{cy}.nodes('[type = \"topic\"]').length")
    click_node(page, bundles[0])
    wait_until(page, f"{cy}.nodes('[type = \"topic\"]').length > {before}")
    # Hubs keep a label at every zoom, at least 11 px on screen; memories get theirs once zoomed in.
    for zoom in (0.1, 0.4, 2.5):
        page.evaluate(f"{cy}.zoom({zoom}); {cy}.center(); window.cairnExplorer.cullLabels()")
        shown = page.evaluate(
            f"""{cy}.nodes('.hub').filter(n => !n.hasClass('nolabel') && n.visible()
                 && n.renderedPosition().x > 0 && n.renderedPosition().x < {cy}.width()
                 && n.renderedPosition().y > 0 && n.renderedPosition().y < {cy}.height())
                 .map(n => parseFloat(n.style('font-size')) * {cy}.zoom())"""
        )
        assert shown and min(shown) >= 11, zoom
        if zoom == 2.5:
            memories = page.evaluate(
                f"{cy}.nodes('[type = \"memory\"]').filter(n => !n.hasClass('nolabel')"
                " && n.renderedPosition().x > 0 && n.renderedPosition().x < "
                f"{cy}.width() && n.renderedPosition().y > 0"
                f" && n.renderedPosition().y < {cy}.height()).length"
            )
            assert memories > 0
    # The minimap is never an empty box.
    page.evaluate(f"{cy}.fit()")
    wait_until(page, "!!document.querySelector('#graph-minimap img[src]')")
    # Full text on hover.
    memory = page.evaluate(f"{cy}.nodes('[type = \"memory\"]')[0].id()")
    page.evaluate(f"{cy}.getElementById('{memory}').emit('mouseover')")
    full = page.evaluate(f"{cy}.getElementById('{memory}').data('fullLabel')")
    assert page.text_content("#graph-tooltip").startswith(full)
    screenshot(page, "legible-overview")
    page.context.close()
    assert problems == []


def test_it_keeps_colours_and_labels_readable(browser, world, problems):  # noqa: F811
    page = signed_in_page(browser, world.url, world.sessions["alice"], problems)
    page.goto(f"/w/{world.ws}/graph/?graph_limit=2000")
    wait_for_graph(page)
    cy = "window.cairnExplorer.cy"
    canvas = page.evaluate("getComputedStyle(document.getElementById('graph-canvas')).backgroundColor")
    background = tuple(int(c) for c in re.findall(r"\d+", canvas)[:3])
    assert background == (255, 255, 255)
    # Every edge line and node colour drawn, at the opacity drawn.
    edges = page.evaluate(
        f"{cy}.edges().map(e => [e.data('edgeClass'), e.style('line-color'), e.style('opacity'),"
        " e.style('line-outline-color'), e.style('line-outline-width')])"
    )
    assert {e[0] for e in edges} >= {"structural", "similarity", "contradicts"}
    for edge_class, colour, opacity, outline, outline_width in edges:
        best = contrast(colour, background, float(opacity))
        if float(str(outline_width).rstrip("px") or 0) > 0:
            best = max(best, contrast(outline, background, float(opacity)))
        assert best >= 3, (edge_class, colour, opacity)
    nodes = page.evaluate(
        f"{cy}.nodes().not('.group').map(n => [n.data('type'), n.style('background-color')])"
    )
    for node_type, colour in {tuple(n) for n in nodes}:
        assert contrast(colour, background) >= 3, (node_type, colour)
    # The legend's swatches and line samples.
    fills = page.evaluate(
        "Array.from(document.querySelectorAll('#graph-legend svg [fill], #graph-legend svg [stroke]'))"
        ".map(el => el.getAttribute('fill') || el.getAttribute('stroke'))"
    )
    assert fills and all(contrast(colour, background) >= 3 for colour in fills), fills
    # The same name twice: the kind is on the canvas.
    api = page.evaluate(f"{cy}.nodes().filter(n => n.data('fullLabel') === 'api').map(n => n.data('label'))")
    assert len(api) >= 2 and all("(" in label for label in api), api
    # Labels drawn are at least 11 px on screen.
    sizes = page.evaluate(
        f"{cy}.nodes().not('.group').filter(n => !n.hasClass('nolabel'))"
        f".map(n => parseFloat(n.style('font-size')) * {cy}.zoom())"
    )
    assert sizes and min(sizes) >= 11
    page.context.close()
    assert problems == []


@pytest.mark.parametrize("size", ["desktop", "phone"])
def test_it_reads_the_trace_and_the_timeline_as_text(browser, world, problems, size):  # noqa: F811
    page = signed_in_page(browser, world.url, world.sessions["alice"], problems, SIZES[size])
    page.goto(
        f"/w/{world.ws}/trace/?q=When+do+we+deploy+to+production&project_id=github.com/demo/api&strategy=hybrid"
    )
    page.wait_for_selector("#trace-canvas[data-ready='1']")
    rows = page.locator("#trace-memories tbody tr")
    assert rows.count() >= 3
    text = page.text_content("#trace-memories")
    assert not re.search(r"\b[0-9a-f]{8}-[0-9a-f]{4}-", text)  # no raw ids
    assert "long-term" in text or "working" in text
    # Narrow columns never break a word: each cell's words fit on their lines.
    broken = page.evaluate(
        """Array.from(document.querySelectorAll('#trace-memories td:nth-child(1),'
             + ' #trace-memories td:nth-child(3), #trace-memories td:nth-child(5)'))
             .filter(td => td.scrollWidth > td.clientWidth + 1).length"""
    )
    assert broken == 0
    assert sideways_overflow(page) <= 0
    screenshot(page, f"trace-text-{size}")
    page.goto(f"/w/{world.ws}/changes/#timeline")
    chart = page.locator("#fact-chart")
    assert page.locator("#fact-chart .row-label").count() >= 3
    assert page.locator("#fact-chart .tick-label").count() >= 3
    bars = page.evaluate(
        """Array.from(document.querySelectorAll('#fact-chart rect')).map(r => {
             const s = getComputedStyle(r); const b = r.getBoundingClientRect();
             return [s.fill, s.stroke, b.width]; })"""
    )
    for fill, stroke, width in bars:
        colour = stroke if fill in ("rgb(255, 255, 255)", "none") else fill
        assert contrast(colour) >= 3, (fill, stroke)
        assert width >= 5
    assert sideways_overflow(page) <= 0
    chart.scroll_into_view_if_needed()
    screenshot(page, f"timeline-{size}")
    page.context.close()
    assert problems == []


def test_it_shows_rollout_states_that_agree(browser, world, problems):  # noqa: F811
    page = signed_in_page(browser, world.url, world.sessions["bob"], problems)
    page.goto(f"/w/{world.ws}/rollout/")
    mode = page.text_content("#rollout-mode strong")
    current = page.locator("button[aria-pressed=true]")
    assert current.count() == 1 and current.get_attribute("data-mode") == mode
    # The mode in use reads as chosen: full strength, not the greyed look of a disabled button.
    assert (
        page.evaluate("getComputedStyle(document.querySelector('button[aria-pressed=true]')).opacity") == "1"
    )
    assert not current.is_disabled()
    stage = page.locator(f".stage[data-stage='{mode}'] .status")
    assert stage.count() == 0 or stage.text_content() == "current mode"
    recommended = page.text_content("#plan-recommended")
    plan_stage = page.locator(f".stage[data-stage='{recommended}'] .status")
    assert plan_stage.count() == 0 or plan_stage.text_content() in ("current mode", "ready", "passed")
    assert page.locator("#gate-trend rect.bar").count() > 0
    heights = page.evaluate(
        "Array.from(document.querySelectorAll('#gate-trend rect.bar')).map(r => +r.getAttribute('height'))"
    )
    assert max(heights) > 0
    screenshot(page, "rollout-states")
    page.context.close()
    assert problems == []


def test_it_gives_search_room_and_marks_the_current_workspace(browser, world, problems):  # noqa: F811
    page = signed_in_page(browser, world.url, world.sessions["alice"], problems)
    page.goto(f"/w/{world.ws}/graph/")
    wait_for_graph(page)
    assert page.locator("#find-input").bounding_box()["width"] >= 500
    page.click(".switcher summary")
    current = page.locator(".switcher li.current")
    assert current.count() == 1 and "Acme" in current.text_content() and "memories" in current.text_content()
    screenshot(page, "switcher")
    page.context.close()
    assert problems == []
