"""Slow clients against each web-worker model: does a trickled upload with a valid key starve everyone else?

    .venv/bin/python bench/slow_clients.py [--seconds 15] [--slow 0,4,16] [--clients 2] [--threads 8]
                                           [--models sync,gthread,gthread-slots,uvicorn]
                                           [--out bench/results/slow_clients.json]

For each worker model and each number of slow connections, on its own database (cairn_slow_clients):
  1. starts gunicorn with 2 workers of that model on a free port and waits for /health;
  2. opens --slow connections that each send a valid key and the head of a memories/add with a 2 KB body,
     then trickle the body one byte every 0.5 s; a connection the server answers or closes is opened again, so
     that many are always in flight;
  3. meanwhile --clients threads send memories/search requests back to back for --seconds;
  4. reports the normal requests' throughput and latency (and how many failed or took over 10 s), and what
     became of the slow uploads (how long the server held each before answering or closing it).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import api_latency  # noqa: E402 - the bench database helpers, gunicorn start and stop, HTTP client, stats

DATABASE = "cairn_slow_clients"
os.environ["CAIRN_DATABASE_NAME"] = DATABASE
SEED_MEMORIES = 2_000
SLOW_BODY_BYTES = 2_000
TRICKLE_SECONDS = 0.5
CLIENT_TIMEOUT_SECONDS = 10.0
WORKERS = 2

# Each model: the gunicorn command line after the executable, and the environment it needs.
MODELS: dict[str, tuple[list[str], dict[str, str]]] = {
    # gunicorn's default: what the Procfile ran before this benchmark.
    "sync": (["config.wsgi", "--worker-class", "sync", "--timeout", "60"], {}),
    # gthread, 8 threads, every thread may run the app; client reads bounded (config/gunicorn_conf.py).
    "gthread": (["config.wsgi", "--config", "config/gunicorn_conf.py"], {"WEB_REQUEST_SLOTS": "0"}),
    # The same with one request slot per worker, given back while a thread waits for its client.
    "gthread-slots": (["config.wsgi", "--config", "config/gunicorn_conf.py"], {"WEB_REQUEST_SLOTS": "1"}),
    # An async worker: uvicorn reads bodies in its event loop; Django runs each request in a thread.
    "uvicorn": (["config.asgi:application", "--worker-class", "uvicorn.workers.UvicornWorker"], {}),
}


def prepare() -> tuple[int, str]:
    """The bench database, migrated, with a key and SEED_MEMORIES memories to search."""
    api_latency.ensure_bench_database(DATABASE)
    api_latency.setup_django_and_migrate()
    _, workspace_id, raw_key = api_latency.bench_user_and_key()
    api_latency.seed_memories(workspace_id, SEED_MEMORIES)
    from django.db import connections

    connections.close_all()
    return workspace_id, raw_key


@contextmanager
def server(model: str, port: int, log_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    arguments, extra_env = MODELS[model]
    executable = Path(sys.executable).with_name("gunicorn")
    # Made here: only config/gunicorn_conf.py makes it, and the sync and uvicorn runs start without that file.
    metrics_dir = (log_path.parent / "prometheus").resolve()
    shutil.rmtree(metrics_dir, ignore_errors=True)
    metrics_dir.mkdir(parents=True)
    env = {
        **os.environ,
        **extra_env,
        "CAIRN_DATABASE_NAME": DATABASE,
        # The scenarios measure the server, not the key's request budget.
        "RATE_LIMIT_REQUESTS": "1000000",
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir),
    }
    command = [str(executable), *arguments, "--workers", str(WORKERS), "--bind", f"127.0.0.1:{port}"]
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            api_latency.wait_healthy(process, port, log_path)
            yield process
        finally:
            api_latency.stop_gunicorn(process)


@dataclass
class SlowResult:
    held_seconds: list[float] = field(default_factory=list)  # connect → the server answered or closed
    outcomes: dict[str, int] = field(default_factory=dict)  # "HTTP 408", "closed", "still open", …


def slow_upload(port: int, key: str, stop: threading.Event, result: SlowResult, lock: threading.Lock) -> None:
    """One connection at a time, always in flight: a valid key, a memories/add head, then one byte per
    TRICKLE_SECONDS of a SLOW_BODY_BYTES body."""
    body = json.dumps({"content": "x" * (SLOW_BODY_BYTES - 16)}).encode().ljust(SLOW_BODY_BYTES)
    head = (
        f"POST {api_latency.API}/memories/add HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Authorization: Bearer {key}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    while not stop.is_set():
        began = time.monotonic()
        outcome = "still open"
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
                sock.sendall(head)
                sock.settimeout(TRICKLE_SECONDS)
                for byte in body:
                    if stop.is_set():
                        break
                    try:
                        sock.sendall(bytes([byte]))
                    except OSError:
                        outcome = "closed"
                        break
                    try:
                        answer = sock.recv(256)
                    except TimeoutError:
                        continue  # nothing from the server: keep trickling
                    outcome = answer.split(b"\r\n", 1)[0].decode(errors="replace")[9:12] if answer else ""
                    outcome = f"HTTP {outcome}" if outcome else "closed"
                    break
        except OSError:
            outcome = "closed"
        with lock:
            if outcome != "still open":
                result.held_seconds.append(time.monotonic() - began)
            result.outcomes[outcome] = result.outcomes.get(outcome, 0) + 1


def normal_load(port: int, key: str, stop: threading.Event, seed: int, out: list[api_latency.Sample]) -> None:
    client = api_latency.Client(port, key)
    client.conn.timeout = CLIENT_TIMEOUT_SECONDS
    rng = random.Random(seed)
    try:
        while not stop.is_set():
            sample, _ = client.call(api_latency.SEARCH, api_latency.search_body(rng, None))
            out.append(sample)
    finally:
        client.close()


def scenario(model: str, slow: int, clients: int, seconds: float, key: str, log_dir: Path) -> dict[str, Any]:
    port = api_latency.free_port()
    with server(model, port, log_dir / f"slow_clients.{model}.{slow}.log"):
        # Warm up: both workers import the app and open their connections; these timings are dropped.
        warm: list[api_latency.Sample] = []
        stop_warm = threading.Event()
        warmers = [
            threading.Thread(target=normal_load, args=(port, key, stop_warm, i, warm), daemon=True)
            for i in range(2)
        ]
        for thread in warmers:
            thread.start()
        time.sleep(3)
        stop_warm.set()
        for thread in warmers:
            thread.join()

        stop = threading.Event()
        lock = threading.Lock()
        slow_result = SlowResult()
        slow_threads = [
            threading.Thread(target=slow_upload, args=(port, key, stop, slow_result, lock), daemon=True)
            for _ in range(slow)
        ]
        for thread in slow_threads:
            thread.start()
        time.sleep(1.0)  # the slow uploads are in before the measured requests start
        samples: list[api_latency.Sample] = []
        outputs: list[list[api_latency.Sample]] = [[] for _ in range(clients)]
        normal = [
            threading.Thread(target=normal_load, args=(port, key, stop, 100 + i, outputs[i]), daemon=True)
            for i in range(clients)
        ]
        began = time.perf_counter()
        for thread in normal:
            thread.start()
        time.sleep(seconds)
        stop.set()
        for thread in normal:
            thread.join(timeout=CLIENT_TIMEOUT_SECONDS + 5)
        wall = time.perf_counter() - began
        for thread in slow_threads:
            thread.join(timeout=TRICKLE_SECONDS * 4)
        samples = [s for out in outputs for s in out]
    ok = [s for s in samples if s.ok]
    failed = [s for s in samples if not s.ok]
    return {
        "model": model,
        "slow": slow,
        "clients": clients,
        "n": len(ok),
        "errors": len(failed),
        "firstError": failed[0].error if failed else None,
        "throughputRps": round(len(ok) / wall, 1),
        "clientMs": api_latency.summary([s.client_ms for s in ok]),
        "serverMs": api_latency.summary([s.server_ms for s in ok if s.server_ms is not None]),
        "slowHeldSeconds": api_latency.summary(slow_result.held_seconds),
        "slowOutcomes": slow_result.outcomes,
    }


def print_table(results: list[dict[str, Any]]) -> None:
    fmt = api_latency.fmt
    header = ["model", "slow", "n", "err", "req/s", "cli p50", "cli p95", "cli max", "slow outcomes"]
    rows = [header] + [
        [
            r["model"],
            str(r["slow"]),
            str(r["n"]),
            str(r["errors"]),
            fmt(r["throughputRps"]),
            fmt(r["clientMs"]["p50"]),
            fmt(r["clientMs"]["p95"]),
            fmt(r["clientMs"]["max"]),
            ", ".join(f"{k}: {v}" for k, v in sorted(r["slowOutcomes"].items())) or "-",
        ]
        for r in results
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    for index, row in enumerate(rows):
        cells = enumerate(zip(row, widths, strict=True))
        print("  ".join(c.ljust(w) if i in (0, 8) else c.rjust(w) for i, (c, w) in cells))
        if index == 0:
            print("  ".join("-" * w for w in widths))
    print("(normal requests: memories/search, ms as the client saw them; err = failed or over 10 s)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--slow", default="0,4,16", help="slow connections, one scenario per count")
    parser.add_argument("--clients", type=int, default=2, help="threads sending normal requests")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--threads", type=int, default=8, help="WEB_THREADS of the gthread models")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "slow_clients.json")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # stop gunicorn on the way out
    os.environ["WEB_THREADS"] = str(args.threads)  # read by config/gunicorn_conf.py in the server
    _, key = prepare()
    results = []
    for model in args.models.split(","):
        for slow in [int(n) for n in args.slow.split(",")]:
            print(f"{model}, {slow} slow connections …", file=sys.stderr, flush=True)
            results.append(scenario(model, slow, args.clients, args.seconds, key, args.out.parent))
    print_table(results)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    report = {"machine": api_latency.machine_info(), "threads": args.threads, "results": results}
    args.out.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
