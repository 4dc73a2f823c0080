"""The dashboard in a real browser (Debian chromium, Playwright) against pytest-django's live server."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest

from graphsvc.models import GraphEdge
from tenancy.rls import workspace_context
from tests.dashboard.browser import browser, screenshot, signed_in_page, watch  # noqa: F401 - fixture
from tests.dashboard.conftest import seed_graph
from tests.rollout.helpers import record

# The live server answers from another thread, so the data must be committed.
pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")


@pytest.fixture
def problems() -> list[str]:
    return []


def wait_for_graph(page: Any) -> None:
    page.wait_for_selector("#graph-canvas[data-ready='1']")


def wait_until(page: Any, expression: str, timeout: float = 15.0) -> None:
    """Poll an expression: page.wait_for_function would need eval, which the page's CSP (rightly) refuses."""
    deadline = time.monotonic() + timeout
    while not page.evaluate(expression):
        assert time.monotonic() < deadline, f"timed out waiting for {expression}"
        page.wait_for_timeout(50)


def counts(page: Any) -> tuple[int, int]:
    nodes, edges = page.evaluate(
        "[window.cairnExplorer.cy.nodes().length, window.cairnExplorer.cy.edges().length]"
    )
    return nodes, edges


def click_edge(page: Any, edge_id: int) -> None:
    """Click the middle of an edge where Cytoscape drew it."""
    point = page.evaluate(
        "id => { const e = window.cairnExplorer.cy.getElementById('e' + id); return e.renderedMidpoint(); }",
        edge_id,
    )
    box = page.locator("#graph-canvas").bounding_box()
    page.mouse.click(box["x"] + point["x"], box["y"] + point["y"])


def test_it_signs_in_through_the_form(browser, live_server, personas, problems):  # noqa: F811
    page = browser.new_page(base_url=live_server.url)
    watch(page, problems)
    page.goto(f"/w/{personas.acme.id}/graph/")
    assert "/accounts/login/" in page.url
    page.fill("input[name=username]", "alice")
    page.fill("input[name=password]", "pw-alice")
    page.click("#login-form button[type=submit]")
    wait_for_graph(page)
    assert page.url.endswith(f"/w/{personas.acme.id}/graph/")
    screenshot(page, "signed-in-explorer-empty")
    page.close()
    assert problems == []


def test_it_draws_the_graph_and_fills_the_edge_panel(browser, live_server, personas, problems):  # noqa: F811
    graph = seed_graph(personas.acme.id)
    page = signed_in_page(browser, live_server, personas.alice, problems)
    page.goto(f"/w/{personas.acme.id}/graph/")
    wait_for_graph(page)
    assert counts(page) == (4, 2)
    assert "4 nodes, 2 edges" in page.text_content("#graph-status")
    click_edge(page, graph.fact.id)
    panel = page.locator("#edge-details")
    panel.wait_for()
    assert panel.locator("[data-field=direction]").text_content() == "Ada Lovelace → Python"
    assert panel.locator("[data-field=expiry]").text_content() == "never"
    assert "moved the billing service" in panel.locator("[data-field=quote]").text_content()
    assert f"graph_edge_id={graph.fact.id}" in page.url
    screenshot(page, "explorer-edge-panel")
    page.context.close()
    assert problems == []


def test_it_filters_expands_and_restores_a_deep_link(browser, live_server, personas, problems):  # noqa: F811
    graph = seed_graph(personas.acme.id)
    page = signed_in_page(browser, live_server, personas.bob, problems)
    page.goto(f"/w/{personas.acme.id}/graph/")
    wait_for_graph(page)
    page.check("input[name=graph_et][value=uses]")
    page.click("#graph-filters button[type=submit]")
    wait_until(page, "window.cairnExplorer.cy.edges().length === 1")
    wait_for_graph(page)
    assert counts(page) == (2, 1)
    assert "graph_et=uses" in page.url

    # Keyboard: pick a node in the list, Enter opens its 1-hop view.
    page.goto(f"/w/{personas.acme.id}/graph/")
    wait_for_graph(page)
    page.focus("#node-select")
    page.select_option("#node-select", label="billing (topic)")
    page.keyboard.press("Enter")
    wait_until(page, "window.cairnExplorer.cy.nodes().length === 2")
    assert "graph_node_key=billing" in page.url
    # In Python's 1-hop view (Python, Ada), "expand" on Ada adds her other neighbour without leaving it.
    with workspace_context(personas.acme.id):
        GraphEdge.objects.create(
            workspace_id=personas.acme.id,
            edge_key="r:works_on",
            from_node=graph.ada,
            to_node=graph.topic,
            edge_type="works_on",
            edge_class="entity",
            origin="llm_entity",
        )
    page.goto(f"/w/{personas.acme.id}/graph/?graph_node_type=language&graph_node_key=python")
    wait_for_graph(page)
    assert counts(page) == (2, 1)
    page.focus("#node-select")
    page.select_option("#node-select", label="Ada Lovelace (person)")
    page.click("#graph-expand")
    wait_until(page, "window.cairnExplorer.cy.nodes().length === 3")
    assert counts(page) == (3, 2)
    assert "graph_node_key=ada+lovelace" in page.url  # the selection is in the link

    # A deep link restores the focused node, the filters and the selected edge.
    link = (
        f"/w/{personas.acme.id}/graph/?graph_node_type=person&graph_node_key=ada+lovelace"
        f"&graph_edge_id={graph.fact.id}&graph_mc=0.5&graph_ev=1"
    )
    page.goto(link)
    wait_for_graph(page)
    assert counts(page) == (2, 1)
    page.locator("#edge-details").wait_for()
    assert page.locator("#edge-details").get_attribute("data-edge-id") == str(graph.fact.id)
    assert page.is_checked("input[name=graph_ev]") and page.input_value("input[name=graph_mc]") == "0.5"
    page.locator("#node-details li.evidence").wait_for()
    assert page.evaluate("window.cairnExplorer.cy.$(':selected').map(e => e.data('label') || e.id())") != []
    screenshot(page, "explorer-deep-link")
    page.context.close()
    assert problems == []


def test_it_switches_the_rollout_mode_and_shows_a_blocked_canary(browser, live_server, personas, problems):  # noqa: F811
    page = signed_in_page(browser, live_server, personas.alice, problems)
    page.goto(f"/w/{personas.acme.id}/rollout/")
    page.click("button[data-mode=shadow]")
    page.wait_for_selector("button[data-mode=shadow][aria-pressed=true]")
    assert "Mode: shadow" in page.text_content("#rollout-mode")
    record(personas.acme.id, 16)
    record(personas.acme.id, 4, reason="graph_expansion_error")
    page.click("button[data-mode=canary]")
    blocked = page.locator("#rollout-blocked")
    blocked.wait_for()
    assert "FALLBACK_RATE_ABOVE_LIMIT" in blocked.text_content()
    assert "Mode: shadow" in page.text_content("#rollout-mode")
    screenshot(page, "rollout-blocked-canary")
    page.context.close()
    assert problems == []


def test_it_shows_a_new_key_once(browser, live_server, personas, problems):  # noqa: F811
    page = signed_in_page(browser, live_server, personas.alice, problems)
    page.goto("/settings/keys/")
    page.fill("#key-form input[name=name]", "ci")
    page.fill("#key-form input[name=expires_in_days]", "7")
    page.click("#key-form button[type=submit]")
    raw = page.text_content("#raw-key")
    assert re.fullmatch(r"mem_[0-9a-f]{64}", raw)
    screenshot(page, "key-created")
    page.goto("/settings/keys/")
    assert page.locator("#raw-key").count() == 0
    assert raw[-4:] in page.text_content("#key-list")
    page.context.close()
    assert problems == []


def test_it_keeps_an_outsider_out(browser, live_server, personas, problems):  # noqa: F811
    page = signed_in_page(browser, live_server, personas.charlie, problems)
    response = page.goto(f"/w/{personas.acme.id}/graph/")
    assert response.status == 404
    response = page.goto(f"/w/{personas.acme.id}/rollout/")
    assert response.status == 404
    page.context.close()
    # The 404 pages themselves are expected console errors; nothing else may appear.
    assert all("404" in problem for problem in problems)
