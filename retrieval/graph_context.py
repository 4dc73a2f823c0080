"""The entity graph's part of context/get: known facts and community summaries, within a share of the
token budget.

context/get has a token budget (the request's tokenBudget, else CONTEXT_TOKEN_BUDGET); the graph's sections
may fill GRAPH_CONTEXT_BUDGET_SHARE of it (4 %: 160 of 4,000 tokens). Up to GRAPH_CONTEXT_MAX_FACTS facts are
recalled (graphsvc.facts.facts_recall: seeds from the query's content words, then its meaning when no word
names an entity; the caller's edge classes and direction). A community counts when its centroid is close to
the query (GRAPH_COMMUNITY_RECALL_MIN_COSINE), or when one of the query's seed entities is a member and its
summary names one of the query's words. Community summaries are placed first, within half of the share; the
facts then fill what is left, best first, while their lines fit; a community that did not fit its half may
take what the facts leave. Everything is what the caller's end user may see (graphsvc.facts.audience_for; a
community only when every member is visible).

Tokens are estimated as characters / 4 (English averages about four characters a token), on the lines exactly
as context_text writes them, so the estimate is the text's own.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from graphsvc import facts as graph_facts
from graphsvc import presence as graph_presence
from graphsvc import selectors as graph_selectors
from graphsvc.facts import QueryEmbedder, audience_for, query_terms
from memories.prompt_text import prompt_line
from memories.scrubber import scrub_secrets
from memories.selectors import MemoryScope

CHARS_PER_TOKEN = 4
FACTS_HEADER = "## Known facts"
COMMUNITIES_HEADER = "## Related topics"
# Communities may take at most this share of the graph's budget before the facts are placed.
COMMUNITY_SHARE = 0.5
MAX_COMMUNITIES = 3
MAX_SUMMARY_CHARS = 600


def tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def fact_line(fact: dict[str, Any]) -> str:
    """A fact as context_text writes it under Known facts."""
    return f"- {fact['fact']} (confidence {fact['confidence']:.2f})"


@dataclass
class GraphSection:
    """What the entity graph adds to one context/get."""

    facts: list[dict[str, Any]] = field(default_factory=list)
    communities: list[dict[str, Any]] = field(default_factory=list)
    budget_tokens: int = 0
    used_tokens: int = 0
    recalled: int = 0
    seed_source: str = "none"

    def communities_text(self, *, redact: bool) -> str:
        """The community summaries as a section of the context text (empty without any)."""
        if not self.communities:
            return ""
        lines = [_community_line(c, redact=redact) for c in self.communities]
        return COMMUNITIES_HEADER + "\n" + "\n".join(lines)

    def trace(self) -> dict[str, Any]:
        return {
            "graphBudgetTokens": self.budget_tokens,
            "graphTokensUsed": self.used_tokens,
            "factsRecalled": self.recalled,
            "factCount": len(self.facts),
            "communityCount": len(self.communities),
            "factSeedSource": self.seed_source,
        }


def _community_line(community: dict[str, Any], *, redact: bool) -> str:
    summary = community["summary"]
    text = prompt_line(scrub_secrets(summary) if redact else summary)
    if len(text) > MAX_SUMMARY_CHARS:
        text = text[: MAX_SUMMARY_CHARS - 3] + "..."
    return f"- [community {prompt_line(community['id'])}: {prompt_line(community['name'])}] {text}"


def graph_budget(token_budget: int | None) -> int:
    """The tokens the graph's sections may fill out of a context budget (the request's, else the server's)."""
    budget = token_budget if token_budget is not None else settings.CONTEXT_TOKEN_BUDGET
    return int(budget * settings.GRAPH_CONTEXT_BUDGET_SHARE)


def graph_section(
    *,
    workspace_id: int,
    scope: MemoryScope,
    query: str | None,
    token_budget: int | None = None,
    edge_classes: Sequence[str] | None = None,
    direction: str = "both",
    embed: QueryEmbedder | None = None,
    redact: bool = True,
) -> GraphSection:
    """Known facts and community summaries for `query` within the graph's share of `token_budget`. `embed`
    gives the query's vector (None: words only, and no centroid match). Call inside the workspace context;
    raises what the graph raises (context/get keeps the graph out of the answer then)."""
    budget = graph_budget(token_budget)
    section = GraphSection(budget_tokens=budget)
    if not query or budget <= 0 or settings.GRAPH_CONTEXT_MAX_FACTS <= 0:
        return section
    # A workspace without an entity graph (no entity terms or vectors, no summarised community) has nothing
    # to recall: one cached check instead of the recall statement on every call.
    presence = graph_presence.graph_presence_cached(workspace_id=workspace_id)
    if not presence.any:
        return section
    # Recall reads graph_settings inside its seed lookup (no separate settings read to cache here), and
    # probes whether the workspace has entity vectors and summarised communities: a workspace without them
    # costs this one statement, as before communities reached the context.
    probes: dict[str, bool] = {}
    recalled = graph_facts.facts_recall(
        workspace_id=workspace_id,
        scope=scope,
        query=query,
        limit=settings.GRAPH_CONTEXT_MAX_FACTS,
        edge_classes=edge_classes,
        direction=direction,
        embed=embed,
        report_strategy=False,
        probes=probes,
    )
    section.recalled, section.seed_source = len(recalled["facts"]), recalled["seedSource"]
    candidates: list[dict[str, Any]] = []
    if presence.communities and probes.get("communities", True):
        vector = embed(query) if embed is not None else None
        seed_ids = [int(seed["id"]) for seed in recalled["seeds"]]
        if seed_ids or vector is not None:
            candidates = graph_selectors.communities_recall(
                workspace_id=workspace_id,
                seed_ids=seed_ids,
                vector=vector,
                model=settings.EMBEDDING_MODEL,
                limit=MAX_COMMUNITIES,
                audience=audience_for(scope),
            )
    chosen = _communities_matching(candidates, query=query)
    # Communities first, within their share; the facts then fill what is left, best first, and communities
    # that did not fit take what the facts leave.
    header = tokens(COMMUNITIES_HEADER) + 1
    community_budget = int(budget * COMMUNITY_SHARE)
    placed: list[dict[str, Any]] = []
    used = 0
    for community in chosen:
        cost = tokens(_community_line(community, redact=redact)) + (0 if placed else header)
        if used + cost <= community_budget:
            placed.append(community)
            used += cost
    facts_used = tokens(FACTS_HEADER) + 1
    for fact in recalled["facts"]:
        cost = tokens(fact_line(fact)) + 1
        if used + facts_used + cost > budget:
            break
        section.facts.append(fact)
        facts_used += cost
    if section.facts:
        used += facts_used
    for community in chosen:
        if community in placed:
            continue
        cost = tokens(_community_line(community, redact=redact)) + (0 if placed else header)
        if used + cost <= budget:
            placed.append(community)
            used += cost
    section.communities = [_public(c) for c in placed]
    section.used_tokens = used
    return section


def _communities_matching(candidates: list[dict[str, Any]], *, query: str) -> list[dict[str, Any]]:
    """The candidates whose centroid is close enough to the query, or which hold a seed and whose summary
    names one of the query's words; best first (cosine, or the share of the query's words the summary
    names)."""
    words = set(query_terms(query).words)
    scored = []
    for community in candidates:
        summary_words = {w.lower() for w in _words(community["summary"])}
        named = len(words & summary_words) / len(words) if words else 0.0
        cosine = community["cosine"]
        by_centroid = cosine is not None and cosine >= settings.GRAPH_COMMUNITY_RECALL_MIN_COSINE
        by_summary = community["seeded"] and named > 0
        if not (by_centroid or by_summary):
            continue
        score = max(cosine if by_centroid and cosine is not None else 0.0, named if by_summary else 0.0)
        scored.append(
            {**community, "score": round(score, 4), "matchedBy": "centroid" if by_centroid else "summary"}
        )
    scored.sort(key=lambda c: (-c["score"], c["id"]))
    return scored[:MAX_COMMUNITIES]


def _words(text: str) -> list[str]:
    words, current = [], []
    for ch in text[:4000]:
        if ch.isalnum():
            current.append(ch)
        elif current:
            words.append("".join(current))
            current = []
    if current:
        words.append("".join(current))
    return words


def _public(community: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": str(community["id"]),
        "name": prompt_line(community["name"]),
        "summary": prompt_line(community["summary"]),
        "size": community["size"],
        "memberIds": community["memberIds"],
        "score": community["score"],
        "matchedBy": community["matchedBy"],
    }


def with_section(text: str, section: str) -> str:
    """The context text with one more section after the others."""
    return f"{text}\n\n{section}" if text and section else text or section
