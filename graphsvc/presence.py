"""Whether a workspace has an entity graph for context/get to read, cached per process."""

from __future__ import annotations

import time
from dataclasses import dataclass

from config.prepared import prepared_cursor


@dataclass(frozen=True)
class GraphPresence:
    """What the entity graph of a workspace holds for context/get: entity search terms (word seeds), entity
    vectors of the current model (meaning seeds) and summarised communities."""

    terms: bool
    vectors: bool
    communities: bool

    @property
    def any(self) -> bool:
        return self.terms or self.vectors or self.communities


# workspace → (monotonic expiry, presence).
_PRESENCE_CACHE: dict[int, tuple[float, GraphPresence]] = {}
_PRESENCE_CACHE_MAX = 10_000
# A workspace that has a graph keeps it (a graph emptied later only costs recalls that find nothing), so
# that answer is kept long; an empty one is asked again after CONTEXT_SETTINGS_CACHE_SECONDS.
_PRESENT_SECONDS = 300.0

_PRESENCE_SQL = """
SELECT EXISTS (SELECT 1 FROM graph_entity_terms t WHERE t.workspace_id = %(ws)s),
       EXISTS (SELECT 1 FROM graph_nodes v WHERE v.workspace_id = %(ws)s AND v.embedding IS NOT NULL
               AND v.embedding_model = %(model)s),
       EXISTS (SELECT 1 FROM graph_communities c WHERE c.workspace_id = %(ws)s AND c.summary <> '')
"""


def graph_presence_cached(*, workspace_id: int) -> GraphPresence:
    """GraphPresence, remembered per process: context/get skips fact recall and community matching in a
    workspace without an entity graph (most of them, and every one that never ran extraction) instead of
    sending the recall statement on every call to find nothing.

    Across processes the answer is a cache, not a notification: the first entity or community of a workspace
    (written by an extraction job in a worker) reaches the web processes' context/get within
    CONTEXT_SETTINGS_CACHE_SECONDS, as a settings change does; the process that writes them forgets its own
    copy at once (graph_presence_forget). Once present, the answer is kept for five minutes."""
    from django.conf import settings

    cached = _PRESENCE_CACHE.get(workspace_id)
    now = time.monotonic()
    if cached is not None and cached[0] > now:
        return cached[1]
    with prepared_cursor() as cursor:
        cursor.execute(_PRESENCE_SQL, {"ws": workspace_id, "model": settings.EMBEDDING_MODEL})
        terms, vectors, communities = cursor.fetchone()
    presence = GraphPresence(bool(terms), bool(vectors), bool(communities))
    ttl = _PRESENT_SECONDS if presence.any else settings.CONTEXT_SETTINGS_CACHE_SECONDS
    if ttl > 0:
        if len(_PRESENCE_CACHE) >= _PRESENCE_CACHE_MAX:
            _PRESENCE_CACHE.clear()
        _PRESENCE_CACHE[workspace_id] = (now + ttl, presence)
    return presence


def graph_presence_forget(*, workspace_id: int | None = None) -> None:
    """This process wrote entities or communities (or removed them): its next context/get asks again."""
    if workspace_id is None:
        _PRESENCE_CACHE.clear()
    else:
        _PRESENCE_CACHE.pop(workspace_id, None)
