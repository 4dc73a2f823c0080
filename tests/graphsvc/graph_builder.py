"""Build entity graphs directly in the database (faster and more exact than driving LLM extraction)."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import connections
from django.utils import timezone

from tenancy.rls import workspace_context


class GraphBuilder:
    def __init__(self, workspace_id: int) -> None:
        self.workspace_id = workspace_id
        self.ids: dict[str, int] = {}

    def entity(
        self,
        name: str,
        *,
        type: str = "concept",
        summary: str | None = None,
        aliases: tuple[str, ...] = (),
        last_seen: datetime | None = None,
    ) -> int:
        with workspace_context(self.workspace_id), connections["app"].cursor() as cursor:
            cursor.execute(
                """
                INSERT INTO graph_nodes (workspace_id, node_type, node_key, label, summary, first_seen_at,
                    last_seen_at, mention_count, created_at, updated_at)
                VALUES (%s, %s, %s, %s, %s, %s, %s, 1, %s, now()) RETURNING id
                """,
                [
                    self.workspace_id,
                    type,
                    name.lower(),
                    name,
                    summary,
                    last_seen or timezone.now(),
                    last_seen or timezone.now(),
                    last_seen or timezone.now(),
                ],
            )
            node_id = cursor.fetchone()[0]
            for alias in (name.lower(), *aliases):
                cursor.execute(
                    "INSERT INTO graph_entity_aliases (workspace_id, node_id, alias, created_at) "
                    "VALUES (%s, %s, %s, now())",
                    [self.workspace_id, node_id, alias],
                )
        self.ids[name] = node_id
        return node_id

    def fact(
        self,
        source: str,
        relation: str,
        target: str,
        *,
        edge_class: str = "semantic",
        confidence: float = 1.0,
        observed_days_ago: float = 0,
        valid_from: datetime | None = None,
        valid_to: datetime | None = None,
        retrievals: int = 0,
        fact: str | None = None,
    ) -> int:
        for name in (source, target):
            if name not in self.ids:
                self.entity(name)
        observed = timezone.now() - timedelta(days=observed_days_ago)
        with workspace_context(self.workspace_id), connections["app"].cursor() as cursor:
            cursor.execute(
                """
                INSERT INTO graph_edges (workspace_id, edge_key, from_node_id, to_node_id, edge_type,
                    edge_class, weight, confidence, fact, origin, valid_from, valid_to, expired_at,
                    created_at, updated_at, last_observed_at, retrieval_count)
                VALUES (%s, %s, %s, %s, %s, %s, 1.0, %s, %s, 'llm_entity', %s, %s, %s, %s, now(), %s, %s)
                RETURNING id
                """,
                [
                    self.workspace_id,
                    f"f:{self.ids[source]}:{self.ids[target]}:{edge_class}:{relation}:{valid_from}",
                    self.ids[source],
                    self.ids[target],
                    relation,
                    edge_class,
                    confidence,
                    fact or f"{source} {relation.replace('_', ' ')} {target}.",
                    valid_from or observed,
                    valid_to,
                    valid_to,
                    observed,
                    observed,
                    retrievals,
                ],
            )
            return cursor.fetchone()[0]

    def supported_by(self, fact_id: int, *, memory_id: str, user_id: str | None) -> None:
        """Record a memory (of end user `user_id`, None: shared) as evidence of a fact, as extraction does."""
        with workspace_context(self.workspace_id), connections["app"].cursor() as cursor:
            cursor.execute(
                "INSERT INTO graph_fact_evidence (workspace_id, edge_id, memory_id, user_id, created_at) "
                "VALUES (%s, %s, %s, %s, now())",
                [self.workspace_id, fact_id, memory_id, user_id],
            )

    def mentioned_in(self, name: str, *, memory_id: str) -> None:
        """Link a memory to an entity it mentions, as extraction does."""
        with workspace_context(self.workspace_id), connections["app"].cursor() as cursor:
            cursor.execute(
                "INSERT INTO memory_node_links (workspace_id, memory_id, node_id, role, created_at) "
                "VALUES (%s, %s, %s, 'mentions', now())",
                [self.workspace_id, memory_id, self.ids[name]],
            )
