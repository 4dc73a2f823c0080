"""django-q2 entry points of graphsvc; the worker runs graph upkeep from the 'graph-upkeep' Schedule
(hourly)."""

from __future__ import annotations

from graphsvc import upkeep


def graph_upkeep() -> int:
    """Hourly: communities when due, retrieval-count decay once a day, eviction. Safe to run twice."""
    return upkeep.graph_upkeep_all()
