"""Where a benchmark's CPU went: the load generator, the web server, PostgreSQL, what the host took (steal).

Throughput on a small machine that also runs the database and the load generator says little on its own: the
machine's speed drifts (a burstable VM's steal time) and the load generator competes for the same cores. This
module reads Linux's /proc before and after a measured interval and splits the CPU time by who used it, per
request, so a run also says how much CPU one request costs the server (web + database) — a figure that does
not depend on what else ran — and how many requests per second that CPU allows on a given number of cores.

Linux only (/proc); elsewhere `snapshot` returns None and the report leaves the split out.
"""

from __future__ import annotations

import os
import resource
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TICKS_PER_SECOND = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
PROC = Path("/proc")


@dataclass(frozen=True)
class Snapshot:
    client_seconds: float  # this process (the load generator), every thread
    web: dict[int, float]  # pid -> CPU seconds of the web server's processes
    database: dict[int, float]  # pid -> CPU seconds of PostgreSQL's processes
    machine: dict[str, int]  # /proc/stat's first line, in ticks


def _process_table() -> dict[int, tuple[int, float]]:
    """pid -> (parent pid, CPU seconds) of every process still readable. A process's seconds include those of
    the children it has reaped (cutime, cstime): when a PostgreSQL backend or a worker process exits during a
    run, its time moves to its parent instead of vanishing from the tree's sum."""
    table: dict[int, tuple[int, float]] = {}
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            raw = (entry / "stat").read_text()
        except OSError:  # exited between the listing and the read
            continue
        # The command name is in parentheses and may hold spaces; the fields after it are fixed.
        fields = raw[raw.rindex(")") + 2 :].split()
        parent = int(fields[1])
        ticks = int(fields[11]) + int(fields[12]) + int(fields[13]) + int(fields[14])
        table[int(entry.name)] = (parent, ticks / TICKS_PER_SECOND)
    return table


def _tree(table: dict[int, tuple[int, float]], root: int) -> dict[int, float]:
    children: dict[int, list[int]] = {}
    for pid, (parent, _) in table.items():
        children.setdefault(parent, []).append(pid)
    found: dict[int, float] = {}
    pending = [root]
    while pending:
        pid = pending.pop()
        if pid in table:
            found[pid] = table[pid][1]
            pending.extend(children.get(pid, []))
    return found


def _machine() -> dict[str, int]:
    names = ["user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal"]
    values = (PROC / "stat").read_text().splitlines()[0].split()[1 : 1 + len(names)]
    return dict(zip(names, map(int, values), strict=True))


def tree_seconds(root: int) -> dict[int, float]:
    """pid -> CPU seconds of `root` and every process below it (e.g. the worker cluster's processes)."""
    return _tree(_process_table(), root)


def spent_seconds(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU seconds a process tree spent between two tree_seconds readings."""
    return _spent(before, after)


def snapshot(*, web_root: int, database_root: int) -> Snapshot | None:
    if not (PROC / "stat").exists():
        return None
    usage = resource.getrusage(resource.RUSAGE_SELF)
    table = _process_table()
    return Snapshot(
        client_seconds=usage.ru_utime + usage.ru_stime,
        web=_tree(table, web_root),
        database=_tree(table, database_root),
        machine=_machine(),
    )


def _spent(before: dict[int, float], after: dict[int, float]) -> float:
    # The tree's total after less its total before: a process born during the interval counts from zero, and
    # one that exited counts up to its exit, through its parent's reaped-children time (_process_table).
    # PostgreSQL's backends come and go (Django closes a connection past CONN_MAX_AGE), so they must.
    return sum(after.values()) - sum(before.values())


def split(
    before: Snapshot | None, after: Snapshot | None, *, requests: int, cores: int
) -> dict[str, Any] | None:
    """CPU milliseconds per request by who spent them, the host's share of the interval, and the requests per
    second `cores` cores allow at the server's cost per request (web + database, no load generator)."""
    if before is None or after is None or requests == 0:
        return None
    per_request = {
        "client": (after.client_seconds - before.client_seconds) * 1000 / requests,
        "web": _spent(before.web, after.web) * 1000 / requests,
        "database": _spent(before.database, after.database) * 1000 / requests,
    }
    server = per_request["web"] + per_request["database"]
    ticks = {name: after.machine[name] - before.machine[name] for name in after.machine}
    total = sum(ticks.values()) or 1
    return {
        "cpuMsPerRequest": {name: round(value, 2) for name, value in per_request.items()},
        "serverCpuMsPerRequest": round(server, 2),
        # What the server's CPU per request allows when the whole of `cores` serves requests (the load
        # generator and the host elsewhere): an upper bound, reached only with concurrency enough to keep
        # every core busy.
        "serverCpuBoundQps": round(cores * 1000 / server, 1) if server else None,
        "machinePercent": {
            "busy": round(100 * (total - ticks["idle"] - ticks["iowait"] - ticks["steal"]) / total, 1),
            "idle": round(100 * (ticks["idle"] + ticks["iowait"]) / total, 1),
            "steal": round(100 * ticks["steal"] / total, 1),
            # Kernel work charged to no process (loopback networking's softirqs, interrupts): busy time the
            # per-process split above cannot show.
            "irqAndSoftirq": round(100 * (ticks["irq"] + ticks["softirq"]) / total, 1),
        },
    }
