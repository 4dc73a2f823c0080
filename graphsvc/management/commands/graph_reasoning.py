"""The operator side of the entity graph's SDK routes (Zeph's /graph commands): facts, entities, communities,
stats, upkeep and clear for one workspace, printed as JSON."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from config.errors import ApiError
from graphsvc import selectors, upkeep
from graphsvc.facts import entity_lookup, facts_recall
from retrieval.embeddings import embed_query
from tenancy.models import Workspace
from tenancy.policy import OPERATOR, declare
from tenancy.rls import workspace_context

ACTIONS = ("facts", "entities", "entity", "communities", "stats", "upkeep", "clear")


@declare(OPERATOR)
class Command(BaseCommand):
    help = (
        "Entity graph of one workspace: facts QUERY, entities [QUERY], entity NAME, communities [--refresh], "
        "stats, upkeep (communities when due, decay, eviction; --force runs them all now), clear --yes."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("action", choices=ACTIONS)
        parser.add_argument("text", nargs="?", default=None, help="Query or entity name.")
        parser.add_argument("--workspace", type=int, required=True, help="Workspace id.")
        parser.add_argument("--limit", type=int, default=10, help="Most results, 1-100 (default 10).")
        parser.add_argument("--refresh", action="store_true", help="communities: run detection first.")
        parser.add_argument("--force", action="store_true", help="upkeep: run every step now.")
        parser.add_argument("--yes", action="store_true", help="clear: confirm deleting the entity graph.")

    def handle(self, *args: Any, **options: Any) -> None:
        workspace_id = options["workspace"]
        if not Workspace.objects.filter(id=workspace_id).exists():
            raise CommandError(f"No workspace {workspace_id}.")
        limit = options["limit"]
        if not 1 <= limit <= 100:
            raise CommandError("--limit must be 1-100.")
        action, text = options["action"], options["text"]
        if action in ("facts", "entity") and not text:
            raise CommandError(f"{action} needs a {'query' if action == 'facts' else 'name'}.")
        if action == "clear" and not options["yes"]:
            raise CommandError("clear deletes the workspace's entity graph and cannot be undone: add --yes.")
        try:
            data = self._run(action, text, workspace_id, limit, options)
        except ApiError as exc:
            raise CommandError(f"{exc.code}: {exc.message}") from exc
        self.stdout.write(json.dumps(data, indent=2, default=str))

    def _run(
        self, action: str, text: str | None, workspace_id: int, limit: int, options: dict[str, Any]
    ) -> Any:
        if action == "upkeep":
            return upkeep.graph_upkeep_run(workspace_id=workspace_id, force=options["force"])
        if action == "communities" and options["refresh"]:
            upkeep.communities_refresh(workspace_id=workspace_id)
        with workspace_context(workspace_id):
            if action == "facts":
                return facts_recall(workspace_id=workspace_id, query=text, limit=limit, embed=embed_query)
            if action == "entities":
                return selectors.entities_list(
                    workspace_id=workspace_id, query=text, entity_type=None, limit=limit, cursor_id=None
                )
            if action == "entity":
                found = entity_lookup(workspace_id=workspace_id, name=text or "")
                if found is None:
                    raise CommandError(f"No entity named {text!r}.")
                return selectors.entity_detail(workspace_id=workspace_id, node_id=found.node_id)
            if action == "communities":
                return selectors.communities_list(workspace_id=workspace_id, limit=limit)
            if action == "stats":
                return selectors.entity_graph_stats(workspace_id=workspace_id)
            return upkeep.graph_clear(workspace_id=workspace_id)
