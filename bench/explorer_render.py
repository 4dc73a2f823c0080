"""How fast the graph explorer draws real memories, in Debian's chromium, at 150, 750 and 2,000 nodes.

    .venv/bin/python bench/explorer_render.py [--sizes 150,750,2000] [--copies 11] [--runs 3]
                                              [--out bench/results/explorer_render.json]

What it does:
  1. uses the cairn_bench database (bench/api_latency.py creates and migrates it) and a user explorer-bench
     whose personal workspace holds the 300 memories of memories/fixtures/agent-memories-300.jsonl, scaled
     up `--copies` times (other teams' copies with their own repos and the same tags), written through
     memories/add and the real pipeline (mapping, embeddings, similar_to edges; LLM extraction of the update
     pairs of the first copy answered by the tests' scripted fake model). Reused while the memory count
     matches;
  2. starts gunicorn like bench/api_latency.py and opens /w/<ws>/graph/?graph_limit=<n> in headless chromium
     (software rendering) for each size;
  3. per run records from the page's performance marks: graph/data (request to parsed JSON), adding the
     elements, the layout (fcose, seeded; the constellation above 500 nodes), the fit and labels, and the
     draw: from the data in hand to the second animation frame after the fit, with the nodes and the
     relationship and fact edges on screen (drawMs), and until the structural and similarity edges that follow
     them are drawn too (completeMs); plus a zoom step, the worst frame gap of a wheel zoom and a node
     selection with its panel;
  4. prints medians per size and writes them as JSON to --out.
"""

from __future__ import annotations

import argparse
import json
import platform
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


def seed(copies: int) -> tuple[Any, int, dict[str, int]]:
    """The bench user's workspace with the agent memories `copies` times, through the real write path."""
    from django.contrib.auth import get_user_model
    from django.db import connections
    from django.test import Client, override_settings

    from graphsvc.models import GraphEdge, GraphNode
    from memories.models import Memory
    from tenancy import services
    from tenancy.rls import workspace_context
    from tests.dashboard import agent_data

    user, _ = get_user_model().objects.get_or_create(username=USERNAME)
    workspace = services.personal_workspace_ensure(user=user)
    ws = workspace.id
    wanted = len(agent_data.agent_memories(copies))

    def sizes() -> dict[str, int]:
        with workspace_context(ws):
            return {
                "memories": Memory.objects.filter(workspace_id=ws, deleted_at__isnull=True).count(),
                "nodes": GraphNode.objects.filter(workspace_id=ws).count(),
                "edges": GraphEdge.objects.filter(workspace_id=ws, expired_at__isnull=True).count(),
            }

    current = sizes()
    # Contents repeat in the fixture, so the count of distinct bodies is what a finished seed holds.
    distinct = len({b["content"] for b in agent_data.agent_memories(copies)})
    if current["memories"] in (wanted, distinct):
        return user, ws, current
    with connections["app"].cursor() as cursor, workspace_context(ws):
        tables = ("memory_node_links", "graph_edges", "graph_nodes", "memory_embeddings", "pipeline_jobs")
        for table in tables:
            cursor.execute(f"DELETE FROM {table} WHERE workspace_id = %s", [ws])  # noqa: S608 - fixed names
        Memory.objects.filter(workspace_id=ws).delete()
    key = services.api_key_create(user=user, scope="admin", workspace=workspace).raw_key
    client = Client()

    def add(body: dict[str, Any]) -> dict[str, Any]:
        response = client.post(
            "/api/sdk/v1/memories/add",
            data=json.dumps(body),
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {key}",
        )
        assert response.status_code == 201, response.content
        return response.json()["data"]["memory"]

    started = time.perf_counter()
    with override_settings(ALLOWED_HOSTS=["*"], RATE_LIMIT_REQUESTS=10**9):
        agent_data.load(workspace_id=ws, add=add, copies=copies)
    print(f"seeded {wanted} memories in {time.perf_counter() - started:.0f} s", flush=True)
    return user, ws, sizes()


def session_cookie(user: Any) -> str:
    from django.conf import settings
    from django.test import Client

    client = Client()
    client.force_login(user)
    return client.cookies[settings.SESSION_COOKIE_NAME].value


MARKS = "Object.fromEntries(performance.getEntriesByType('mark').map(m => [m.name, m.startTime]))"


def measure(base_url: str, cookie: str, ws: int, size: int, runs: int) -> list[dict[str, float]]:
    from django.conf import settings
    from playwright.sync_api import sync_playwright

    results = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            for _ in range(runs):
                context = browser.new_context(base_url=base_url, viewport={"width": 1440, "height": 900})
                context.add_cookies(
                    [{"name": settings.SESSION_COOKIE_NAME, "value": cookie, "url": base_url}]
                )
                page = context.new_page()
                page.set_default_timeout(180_000)
                page.goto(f"/w/{ws}/graph/?graph_limit={size}")
                page.wait_for_selector("#graph-canvas[data-ready='1']")
                marks = page.evaluate(MARKS)
                data_ms = page.evaluate(
                    "performance.getEntriesByType('resource').filter(e => e.name.includes('/graph/data/'))"
                    ".map(e => e.duration)[0] || 0"
                )
                on_screen = page.evaluate(
                    "[window.cairnExplorer.cy.nodes().length, window.cairnExplorer.cy.edges().length]"
                )
                zoom_ms = page.evaluate(
                    "() => new Promise(done => { const cy = window.cairnExplorer.cy;"
                    " const t = performance.now();"
                    " cy.zoom({level: cy.zoom() * 1.5, renderedPosition: {x: 400, y: 400}});"
                    " requestAnimationFrame(() => requestAnimationFrame(() => done(performance.now() - t)));"
                    " })"
                )
                # A wheel zoom is what a person does; Cytoscape then draws a cached texture of the canvas.
                box = page.locator("#graph-canvas").bounding_box()
                assert box is not None
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
                started = time.perf_counter()
                page.select_option("#node-select", index=0)
                page.wait_for_selector("#node-details")
                select_ms = (time.perf_counter() - started) * 1000
                results.append(
                    {
                        "nodesOnScreen": on_screen[0],
                        "edgesOnScreen": on_screen[1],
                        "firstPaintMs": marks["graph:drawn"],
                        "readyMs": marks["graph:complete"],
                        "graphDataMs": data_ms,
                        "fetchMs": marks["graph:fetched"] - marks["graph:fetch"],
                        "addMs": marks["graph:added"] - marks["graph:fetched"],
                        "layoutMs": marks["graph:laidout"] - marks["graph:added"],
                        "fitAndLabelsMs": marks["graph:panels"] - marks["graph:laidout"],
                        "drawMs": marks["graph:drawn"] - marks["graph:fetched"],
                        "completeMs": marks["graph:complete"] - marks["graph:fetched"],
                        "zoomFrameMs": zoom_ms,
                        "wheelZoomWorstFrameMs": max(gaps) if gaps else 0.0,
                        "selectNodeMs": select_ms,
                    }
                )
                context.close()
        finally:
            browser.close()
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="150,750,2000", help="graph_limit values, comma-separated")
    parser.add_argument("--copies", type=int, default=11, help="copies of the 300 agent memories")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "explorer_render.json")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]

    api_latency.ensure_bench_database()
    api_latency.setup_django_and_migrate()
    from django.conf import settings
    from django.db import connections

    if max(sizes) > settings.DASHBOARD_EXPLORER_MAX_NODES:
        cap = settings.DASHBOARD_EXPLORER_MAX_NODES
        parser.error(f"sizes are capped by DASHBOARD_EXPLORER_MAX_NODES ({cap})")
    user, ws, workspace_size = seed(args.copies)
    cookie = session_cookie(user)
    connections.close_all()
    port = api_latency.free_port()
    report: dict[str, Any] = {
        "when": datetime.now(UTC).isoformat(),
        "machine": platform.machine(),
        "workspace": workspace_size,
        "copies": args.copies,
        "sizes": {},
    }
    with api_latency.gunicorn(port, ROOT / "bench" / "results" / "explorer_render.gunicorn.log"):
        for size in sizes:
            runs = measure(f"http://127.0.0.1:{port}", cookie, ws, size, args.runs)
            median = {key: round(statistics.median(run[key] for run in runs), 1) for key in runs[0]}
            report["sizes"][str(size)] = {"runs": runs, "median": median}
            print(f"graph_limit={size}: " + ", ".join(f"{k} {v}" for k, v in median.items()), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    print(f"workspace: {workspace_size}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
