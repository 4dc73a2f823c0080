"""How fast the graph explorer draws and reacts with 2,000 nodes on screen, in Debian's chromium.

    .venv/bin/python bench/explorer_render.py [--nodes 2000] [--edges 4000] [--runs 3]
                                              [--out bench/results/explorer_render.json]

What it does:
  1. uses the cairn_bench database (bench/api_latency.py creates and migrates it) and a user explorer-bench
     whose personal workspace gets --nodes topic/entity nodes and --edges random edges (reseeded when counts
     differ);
  2. starts gunicorn like bench/api_latency.py and opens /w/<ws>/graph/?graph_limit=<nodes> in headless
     chromium;
  3. per run records: the time from navigation start until the layout has run and the canvas is fitted
     (first paint of the whole graph) and its parts, the graph/data response time, a zoom step (two animation
     frames later), the worst frame gap during a mouse-wheel zoom and a node selection (panel loaded);
  4. prints medians and writes them as JSON to --out.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

sys.path.insert(0, str(ROOT / "bench"))

import api_latency  # noqa: E402 - sets CAIRN_DATABASE_NAME before Django loads; the gunicorn runner

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
USERNAME = "explorer-bench"
NODE_TYPES = ("topic", "person", "tool", "concept", "project", "language", "repo", "category")


def seed(nodes: int, edges: int) -> tuple[Any, int]:
    from django.contrib.auth import get_user_model

    from graphsvc.models import GraphEdge, GraphNode
    from tenancy import services
    from tenancy.rls import workspace_context

    user, _ = get_user_model().objects.get_or_create(username=USERNAME)
    workspace = services.personal_workspace_ensure(user=user)
    ws = workspace.id
    with workspace_context(ws):
        if GraphNode.objects.filter(workspace_id=ws).count() == nodes and (
            GraphEdge.objects.filter(workspace_id=ws).count() == edges
        ):
            return user, ws
        GraphEdge.objects.filter(workspace_id=ws).delete()
        GraphNode.objects.filter(workspace_id=ws).delete()
        rng = random.Random(7)
        created = GraphNode.objects.bulk_create(
            GraphNode(
                workspace_id=ws,
                node_type=NODE_TYPES[i % len(NODE_TYPES)],
                node_key=f"node-{i}",
                label=f"node {i}",
            )
            for i in range(nodes)
        )
        ids = [node.id for node in created]
        # A few hubs and a long tail, like a real memory graph.
        weights = [1.0 / (rank + 1) ** 0.8 for rank in range(nodes)]
        rows = []
        for i in range(edges):
            source, target = rng.choices(ids, weights=weights, k=1)[0], rng.choice(ids)
            rows.append(
                GraphEdge(
                    workspace_id=ws,
                    edge_key=f"bench:{i}",
                    from_node_id=source,
                    to_node_id=target,
                    edge_type=rng.choice(("related_to", "about_topic", "uses", "depends_on")),
                    weight=rng.random(),
                    confidence=rng.random(),
                )
            )
        GraphEdge.objects.bulk_create(rows, batch_size=2000)
    return user, ws


def session_cookie(user: Any) -> str:
    from django.conf import settings
    from django.test import Client

    client = Client()
    client.force_login(user)
    return client.cookies[settings.SESSION_COOKIE_NAME].value


def measure(base_url: str, cookie: str, ws: int, nodes: int, runs: int) -> list[dict[str, float]]:
    from django.conf import settings
    from playwright.sync_api import sync_playwright

    results = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            for _ in range(runs):
                context = browser.new_context(base_url=base_url, viewport={"width": 1400, "height": 900})
                context.add_cookies(
                    [{"name": settings.SESSION_COOKIE_NAME, "value": cookie, "url": base_url}]
                )
                page = context.new_page()
                page.set_default_timeout(120_000)
                page.goto(f"/w/{ws}/graph/?graph_limit={nodes}")
                page.wait_for_selector("#graph-canvas[data-ready='1']")
                first_paint = float(page.get_attribute("#graph-canvas", "data-ready-ms"))
                data_ms = page.evaluate(
                    "performance.getEntriesByType('resource').filter(e => e.name.includes('/graph/data/'))"
                    ".map(e => e.duration)[0] || 0"
                )
                marks = page.evaluate(
                    "Object.fromEntries(performance.getEntriesByType('mark').map(m => [m.name, m.startTime]))"
                )
                dom_ready = page.evaluate(
                    "performance.getEntriesByType('navigation')[0].domContentLoadedEventEnd"
                )
                on_screen = page.evaluate("window.cairnExplorer.cy.nodes().length")
                zoom_ms = page.evaluate(
                    "() => new Promise(done => { const cy = window.cairnExplorer.cy;"
                    " const t = performance.now();"
                    " cy.zoom({level: cy.zoom() * 1.5, renderedPosition: {x: 400, y: 400}});"
                    " requestAnimationFrame(() => requestAnimationFrame(() => done(performance.now() - t)));"
                    " })"
                )
                # A wheel zoom is what a person does; Cytoscape then draws a cached texture of the canvas.
                box = page.locator("#graph-canvas").bounding_box()
                page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
                page.evaluate(
                    "window.__frames = []; window.__t0 = performance.now();"
                    "const tick = () => { window.__frames.push(performance.now() - window.__t0);"
                    " if (window.__frames.length < 30) requestAnimationFrame(tick); };"
                    "requestAnimationFrame(tick);"
                )
                for _ in range(5):
                    page.mouse.wheel(0, -120)
                page.wait_for_timeout(1500)
                frames = page.evaluate("window.__frames")
                gaps = [b - a for a, b in zip(frames, frames[1:], strict=False)]
                wheel_frame_ms = max(gaps) if gaps else 0.0
                started = time.perf_counter()
                page.select_option("#node-select", index=0)
                page.wait_for_selector("#node-details")
                select_ms = (time.perf_counter() - started) * 1000
                results.append(
                    {
                        "firstPaintMs": first_paint,
                        "domReadyMs": dom_ready,
                        "fetchMs": marks["graph:fetched"] - marks["graph:fetch"],
                        "addMs": marks["graph:added"] - marks["graph:fetched"],
                        "layoutAndDrawMs": first_paint - marks["graph:added"],
                        "graphDataMs": data_ms,
                        "zoomFrameMs": zoom_ms,
                        "wheelZoomWorstFrameMs": wheel_frame_ms,
                        "selectNodeMs": select_ms,
                        "nodesOnScreen": on_screen,
                    }
                )
                context.close()
        finally:
            browser.close()
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=2000)
    parser.add_argument("--edges", type=int, default=4000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "explorer_render.json")
    args = parser.parse_args(argv)

    api_latency.ensure_bench_database()
    api_latency.setup_django_and_migrate()
    from django.conf import settings
    from django.db import connections

    if args.nodes > settings.DASHBOARD_EXPLORER_MAX_NODES:
        parser.error(
            f"--nodes is capped by DASHBOARD_EXPLORER_MAX_NODES ({settings.DASHBOARD_EXPLORER_MAX_NODES})"
        )
    user, ws = seed(args.nodes, args.edges)
    cookie = session_cookie(user)
    connections.close_all()
    port = api_latency.free_port()
    with api_latency.gunicorn(port, ROOT / "bench" / "results" / "explorer_render.gunicorn.log"):
        runs = measure(f"http://127.0.0.1:{port}", cookie, ws, args.nodes, args.runs)

    summary = {key: round(statistics.median(run[key] for run in runs), 1) for key in runs[0]}
    report = {
        "when": datetime.now(UTC).isoformat(),
        "machine": platform.machine(),
        "nodes": args.nodes,
        "edges": args.edges,
        "runs": runs,
        "median": summary,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    for key, value in summary.items():
        print(f"{key:>14}: {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
