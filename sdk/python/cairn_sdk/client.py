"""The synchronous client: `Cairn()` reads CAIRN_API_KEY and CAIRN_BASE_URL."""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, cast

import httpx

from cairn_sdk import _core
from cairn_sdk import models as m
from cairn_sdk._core import DEFAULT_JOB_TIMEOUT, DEFAULT_POLL_INTERVAL, UNSET, RetryPolicy, drop_none

ScopeArg = m.Scope | Mapping[str, Any] | None
# Module-level names: inside Memories, `list` is the page method, so annotations there must not say list[...].
Strings = list[str]
MemoryTypes = list[m.MemoryType]


class Cairn:
    """Client of Cairn's SDK API.

    >>> cairn = Cairn()                                   # CAIRN_API_KEY, CAIRN_BASE_URL
    >>> cairn.memories.add("We deploy on Fridays", tags=["deploy"])
    >>> print(cairn.context.get("how do we deploy?").context)

    `scope` (or tenant_id / user_id / project_id) sets the default scope of every call; a call's own `scope=`
    replaces it for that call. Retries: 429 (after Retry-After), 408, 5xx and network failures, up to
    `max_retries` times with exponential backoff; `memories.add` sends an Idempotency-Key so a retry never
    stores the memory twice.
    """

    def __init__(
        self,
        api_key: str | None = None,
        *,
        base_url: str | None = None,
        scope: ScopeArg = None,
        tenant_id: str | None = None,
        user_id: str | None = None,
        project_id: str | None = None,
        timeout: float | httpx.Timeout = _core.DEFAULT_TIMEOUT,
        max_retries: int = 3,
        retry: RetryPolicy | None = None,
        headers: Mapping[str, str] | None = None,
        http_client: httpx.Client | None = None,
    ) -> None:
        self.api_key = _core.resolve_api_key(api_key)
        self.base_url = _core.resolve_base_url(base_url)
        self.scope = _core.coerce_scope(scope) or (
            m.Scope(**drop_none(tenant_id=tenant_id, user_id=user_id, project_id=project_id))
            if tenant_id or user_id or project_id
            else None
        )
        self.retry = retry or RetryPolicy(max_retries=max_retries)
        self._owns_http = http_client is None
        self._http = http_client or httpx.Client(timeout=timeout)
        self._headers = _core.client_headers(self.api_key, headers)
        self._sleep = time.sleep
        self.memories = Memories(self)
        self.context = Context(self)
        self.graph = Graph(self)
        self.workspace = Workspace(self)
        self.keys = Keys(self)
        self.jobs = Jobs(self)
        self.sessions = Sessions(self)
        self.skills = Skills(self)

    def with_scope(self, scope: ScopeArg = None, **fields: str | None) -> Cairn:
        """A client sharing this one's connection pool, with another default scope (e.g. per end user)."""
        clone = copy.copy(self)
        clone.scope = _core.coerce_scope(scope) or (m.Scope(**drop_none(**fields)) if fields else None)
        clone._owns_http = False
        clone.memories, clone.context, clone.graph = Memories(clone), Context(clone), Graph(clone)
        clone.workspace = Workspace(clone)
        clone.keys = Keys(clone)
        clone.jobs = Jobs(clone)
        clone.sessions = Sessions(clone)
        clone.skills = Skills(clone)
        return clone

    def close(self) -> None:
        if self._owns_http:
            self._http.close()

    def __enter__(self) -> Cairn:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def health(self) -> m.Health:
        return cast(m.Health, self.request("health"))

    def request(
        self, operation: str, body: m.RequestModel | None = None, *, idempotency_key: str | None = None
    ) -> Any:
        """Call one operation of `cairn_sdk.operations.OPERATIONS` with retries; return its response model."""
        prepared = _core.prepare(operation, body, default_scope=self.scope, idempotency_key=idempotency_key)
        return _core.parse_response(prepared.operation, self._send(prepared))

    def _send(
        self, prepared: _core.PreparedRequest, *, content: bytes | Path | None = None, stream: bool = False
    ) -> httpx.Response:
        """Send with retries; the final answer (success or not). With stream=True the caller must close it."""
        url = f"{self.base_url}/{prepared.path}"
        attempt = 0
        while True:
            try:
                with ExitStack() as stack:
                    # A file is reopened for every attempt; httpx sends it unbuffered, with its
                    # Content-Length.
                    data = stack.enter_context(content.open("rb")) if isinstance(content, Path) else content
                    request = self._http.build_request(
                        prepared.method,
                        url,
                        json=prepared.json if prepared.method != "GET" and data is None else None,
                        content=data,
                        params=prepared.params,
                        headers={**self._headers, **prepared.headers},
                    )
                    response = self._http.send(request, stream=stream)
                if stream and response.status_code >= 300:
                    response.read()  # the error envelope (and Retry-After details) is small
            except httpx.HTTPError as exc:
                delay = _core.connection_retry_delay(attempt=attempt, policy=self.retry)
                if delay is None:
                    raise _core.connection_error(exc, url=url) from exc
            else:
                delay = _core.retry_delay(response, attempt=attempt, policy=self.retry)
                if delay is None:
                    return response
                response.close()
            self._sleep(delay)
            attempt += 1


class Memories:
    def __init__(self, client: Cairn) -> None:
        self._client = client

    def add(
        self,
        content: str,
        *,
        type: m.MemoryType | None = None,
        layer: m.MemoryLayer | None = None,
        tags: Strings | None = None,
        paths: Strings | None = None,
        category: str | None = None,
        metadata: dict[str, Any] | None = None,
        embedding_model: str | None = None,
        scope: ScopeArg = None,
        idempotency_key: str | None = None,
    ) -> m.AddResult:
        """Store a memory. One Idempotency-Key (yours or a fresh UUID) covers every retry of this call.

        `embedding_model` must be one the server allows (else BadRequestError EMBEDDING_MODEL_NOT_ALLOWED)."""
        body = m.AddRequest(
            **drop_none(
                content=content,
                type=type,
                layer=layer,
                tags=tags,
                paths=paths,
                category=category,
                metadata=metadata,
                embedding_model=embedding_model,
                scope=_core.coerce_scope(scope),
            )
        )
        key = idempotency_key or _core.new_idempotency_key()
        return cast(m.AddResult, self._client.request("memories.add", body, idempotency_key=key))

    def search(
        self,
        query: str,
        *,
        type: m.MemoryType | None = None,
        layer: m.MemoryLayer | None = None,
        strategy: m.SearchStrategy | None = None,
        limit: int | None = None,
        importance_weight: float | None = None,
        half_life_days: float | None = None,
        mmr_lambda: float | None = None,
        include_superseded: bool | None = None,
        scope: ScopeArg = None,
    ) -> m.SearchResult:
        """Best match first. `half_life_days` (temporal decay, 0: off) and `mmr_lambda` (diversity, 1: off)
        replace the workspace's settings for this call; a time expression in the query ("last week") becomes
        a window the trace shows (`trace.time_window`)."""
        body = m.SearchRequest(
            **drop_none(
                query=query,
                type=type,
                layer=layer,
                strategy=strategy,
                limit=limit,
                importance_weight=importance_weight,
                half_life_days=half_life_days,
                mmr_lambda=mmr_lambda,
                include_superseded=include_superseded,
                scope=_core.coerce_scope(scope),
            )
        )
        return cast(m.SearchResult, self._client.request("memories.search", body))

    def list(
        self,
        *,
        type: m.MemoryType | None = None,
        layer: m.MemoryLayer | None = None,
        tags: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        include_superseded: bool | None = None,
        scope: ScopeArg = None,
    ) -> m.ListResult:
        """One page, newest first; pass `next_cursor` back as `cursor`, or use `iter()`."""
        body = m.ListRequest(
            **drop_none(
                type=type,
                layer=layer,
                tags=tags,
                limit=limit,
                cursor=cursor,
                include_superseded=include_superseded,
                scope=_core.coerce_scope(scope),
            )
        )
        return cast(m.ListResult, self._client.request("memories.list", body))

    def iter(
        self,
        *,
        type: m.MemoryType | None = None,
        layer: m.MemoryLayer | None = None,
        tags: str | None = None,
        page_size: int | None = None,
        include_superseded: bool | None = None,
        scope: ScopeArg = None,
    ) -> Iterator[m.Memory]:
        """Every matching memory, newest first, fetched in pages of `page_size` (server default 20)."""
        cursor: str | None = None
        while True:
            page = self.list(
                type=type,
                layer=layer,
                tags=tags,
                limit=page_size,
                cursor=cursor,
                include_superseded=include_superseded,
                scope=scope,
            )
            yield from page.memories
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    def edit(
        self,
        id: str,
        *,
        content: str | None = None,
        type: m.MemoryType | None = None,
        layer: m.MemoryLayer | None = None,
        tags: Strings | None = None,
        paths: Strings | None = None,
        category: str | None = None,
        metadata: dict[str, Any] | None = UNSET,
        embedding_model: str | None = None,
        scope: ScopeArg = None,
    ) -> m.EditResult:
        """Change the given fields; `metadata=None` clears the metadata. `embedding_model` as in `add`."""
        fields = drop_none(
            id=id,
            content=content,
            type=type,
            layer=layer,
            tags=tags,
            paths=paths,
            category=category,
            embedding_model=embedding_model,
            scope=_core.coerce_scope(scope),
        )
        if metadata is not UNSET:
            fields["metadata"] = metadata
        return cast(m.EditResult, self._client.request("memories.edit", m.EditRequest(**fields)))

    def forget(self, id: str, *, scope: ScopeArg = None) -> m.ForgetResult:
        body = m.ForgetRequest(**drop_none(id=id, scope=_core.coerce_scope(scope)))
        return cast(m.ForgetResult, self._client.request("memories.forget", body))

    def resolve(
        self,
        action: Literal["supersedes", "not_conflict", "restates", "revert"],
        memory_id: str,
        other_memory_id: str,
        *,
        note: str | None = None,
        scope: ScopeArg = None,
    ) -> m.ResolveResult:
        """Decide which of two memories is current: `supersedes` (memory_id replaces other_memory_id),
        `not_conflict` (both stand), `restates` (the same thing said twice), or `revert` (undo the pair's
        decisions). Recorded with who and when; reversible."""
        body = m.ResolveRequest(
            **drop_none(
                action=action,
                memory_id=memory_id,
                other_memory_id=other_memory_id,
                note=note,
                scope=_core.coerce_scope(scope),
            )
        )
        return cast(m.ResolveResult, self._client.request("memories.resolve", body))

    def decisions(
        self,
        memory_id: str,
        *,
        include_reverted: bool | None = None,
        limit: int | None = None,
        scope: ScopeArg = None,
    ) -> m.DecisionsResult:
        """The decisions about which memory is current that involve one memory, newest first."""
        body = m.DecisionsRequest(
            **drop_none(
                memory_id=memory_id,
                include_reverted=include_reverted,
                limit=limit,
                scope=_core.coerce_scope(scope),
            )
        )
        return cast(m.DecisionsResult, self._client.request("memories.decisions", body))

    def bulk_forget(
        self,
        *,
        types: MemoryTypes | None = None,
        tags: Strings | None = None,
        older_than_days: int | None = None,
        pattern: str | None = None,
        project_id: str | None = None,
        all: bool | None = None,
        dry_run: bool | None = None,
        scope: ScopeArg = None,
    ) -> m.BulkForgetResult:
        """Forget by filter (at most 10,000 per call: call again while `has_more`); `dry_run` previews."""
        filters = m.BulkForgetFilters(
            **drop_none(
                types=types,
                tags=tags,
                older_than_days=older_than_days,
                pattern=pattern,
                project_id=project_id,
                all=all,
            )
        )
        body = m.BulkForgetRequest(
            **drop_none(filters=filters, dry_run=dry_run, scope=_core.coerce_scope(scope))
        )
        return cast(m.BulkForgetResult, self._client.request("memories.bulk_forget", body))

    def vacuum(self, *, scope: ScopeArg = None) -> m.VacuumResult:
        body = m.VacuumRequest(**drop_none(scope=_core.coerce_scope(scope)))
        return cast(m.VacuumResult, self._client.request("memories.vacuum", body))

    def consolidate(
        self,
        *,
        types: MemoryTypes | None = None,
        include_global: bool | None = None,
        global_only: bool | None = None,
        dry_run: bool | None = None,
        model: str | None = None,
        scope: ScopeArg = None,
    ) -> m.ConsolidateResult:
        """Supersede older memories with the same upsert key by the newest; `dry_run` only reports."""
        body = m.ConsolidateRequest(
            **drop_none(
                types=types,
                include_global=include_global,
                global_only=global_only,
                dry_run=dry_run,
                model=model,
                scope=_core.coerce_scope(scope),
            )
        )
        return cast(m.ConsolidateResult, self._client.request("memories.consolidate", body))

    def settings(self, *, scope: ScopeArg = None) -> m.MemorySettings:
        """The workspace's hygiene settings: credential scrubbing, admission control, importance weight."""
        scope_fields = (_core.coerce_scope(scope) or self._client.scope or m.Scope()).model_dump()
        body = m.MemorySettingsQuery(**drop_none(**scope_fields))
        return cast(m.MemorySettings, self._client.request("memories.settings", body))

    def update_settings(
        self,
        *,
        redact_credentials: bool | None = None,
        scrub_at_rest: bool | None = None,
        admission_enabled: bool | None = None,
        admission_threshold: float | None = UNSET,
        importance_weight: float | None = UNSET,
        half_life_days: float | None = UNSET,
        mmr_lambda: float | None = UNSET,
        scope: ScopeArg = None,
    ) -> m.MemorySettings:
        """Change the given settings.

        `None` on `admission_threshold`, `importance_weight`, `half_life_days` (temporal decay, 0: off) or
        `mmr_lambda` (MMR diversity, 1: off) restores the server's default."""
        fields = drop_none(
            redact_credentials=redact_credentials,
            scrub_at_rest=scrub_at_rest,
            admission_enabled=admission_enabled,
            scope=_core.coerce_scope(scope),
        )
        if admission_threshold is not UNSET:
            fields["admission_threshold"] = admission_threshold
        if importance_weight is not UNSET:
            fields["importance_weight"] = importance_weight
        if half_life_days is not UNSET:
            fields["half_life_days"] = half_life_days
        if mmr_lambda is not UNSET:
            fields["mmr_lambda"] = mmr_lambda
        body = m.MemorySettingsRequest(**fields)
        return cast(m.MemorySettings, self._client.request("memories.update_settings", body))


def context_fields(query: str | None, scope: ScopeArg, **options: Any) -> dict[str, Any]:
    return drop_none(query=query, scope=_core.coerce_scope(scope), **options)


class Context:
    def __init__(self, client: Cairn) -> None:
        self._client = client

    def get(
        self,
        query: str | None = None,
        *,
        limit: int | None = None,
        include_rules: bool | None = None,
        mode: m.ContextMode | None = None,
        strategy: m.ContextStrategy | None = None,
        graph_depth: int | None = None,
        graph_limit: int | None = None,
        half_life_days: float | None = None,
        mmr_lambda: float | None = None,
        importance_weight: float | None = None,
        include_superseded: bool | None = None,
        token_budget: int | None = None,
        fact_edge_classes: Strings | None = None,
        fact_direction: m.Direction | None = None,
        scope: ScopeArg = None,
    ) -> m.ContextResult:
        """What to put in front of the next model call; `.context` is ready-to-paste text.

        `token_budget` (256-1,000,000; server default 4,000) sizes the entity graph's part: known facts
        (`fact_edge_classes`, walked `fact_direction` out, in or both) and community summaries fill at most
        the server's share of it; `trace.graph_budget_tokens` and `trace.graph_tokens_used` say how much."""
        body = m.ContextRequest(
            **context_fields(
                query,
                scope,
                limit=limit,
                include_rules=include_rules,
                mode=mode,
                strategy=strategy,
                graph_depth=graph_depth,
                graph_limit=graph_limit,
                half_life_days=half_life_days,
                mmr_lambda=mmr_lambda,
                importance_weight=importance_weight,
                include_superseded=include_superseded,
                token_budget=token_budget,
                fact_edge_classes=fact_edge_classes,
                fact_direction=fact_direction,
            )
        )
        return cast(m.ContextResult, self._client.request("context.get", body))


class Graph:
    def __init__(self, client: Cairn) -> None:
        self._client = client

    def trace(
        self,
        query: str | None = None,
        *,
        limit: int | None = None,
        include_rules: bool | None = None,
        mode: m.ContextMode | None = None,
        strategy: m.ContextStrategy | None = None,
        graph_depth: int | None = None,
        graph_limit: int | None = None,
        half_life_days: float | None = None,
        mmr_lambda: float | None = None,
        importance_weight: float | None = None,
        include_superseded: bool | None = None,
        token_budget: int | None = None,
        fact_edge_classes: Strings | None = None,
        fact_direction: m.Direction | None = None,
        scope: ScopeArg = None,
    ) -> m.TraceResult:
        """context/get with the source (baseline or graph expansion) of every returned memory."""
        body = m.TraceRequest(
            **context_fields(
                query,
                scope,
                limit=limit,
                include_rules=include_rules,
                mode=mode,
                strategy=strategy,
                graph_depth=graph_depth,
                graph_limit=graph_limit,
                half_life_days=half_life_days,
                mmr_lambda=mmr_lambda,
                importance_weight=importance_weight,
                include_superseded=include_superseded,
                token_budget=token_budget,
                fact_edge_classes=fact_edge_classes,
                fact_direction=fact_direction,
            )
        )
        return cast(m.TraceResult, self._client.request("graph.trace", body))

    def status(self, *, top_nodes_limit: int | None = None, scope: ScopeArg = None) -> m.StatusResult:
        body = m.StatusRequest(**drop_none(top_nodes_limit=top_nodes_limit, scope=_core.coerce_scope(scope)))
        return cast(m.StatusResult, self._client.request("graph.status", body))

    def rollout(self, *, window_hours: int | None = None, scope: ScopeArg = None) -> m.RolloutResult:
        scope_fields = (_core.coerce_scope(scope) or self._client.scope or m.Scope()).model_dump()
        body = m.RolloutQuery(**drop_none(window_hours=window_hours, **scope_fields))
        return cast(m.RolloutResult, self._client.request("graph.rollout", body))

    def set_rollout(self, mode: m.RolloutMode, *, scope: ScopeArg = None) -> m.RolloutResult:
        body = m.RolloutSetRequest(**drop_none(mode=mode, scope=_core.coerce_scope(scope)))
        return cast(m.RolloutResult, self._client.request("graph.set_rollout", body))

    def update_rollout(
        self,
        *,
        mode: m.RolloutMode | None = None,
        autopilot_enabled: bool | None = None,
        scope: ScopeArg = None,
    ) -> m.RolloutResult:
        body = m.RolloutPatchRequest(
            **drop_none(mode=mode, autopilot_enabled=autopilot_enabled, scope=_core.coerce_scope(scope))
        )
        return cast(m.RolloutResult, self._client.request("graph.update_rollout", body))

    def extraction(self, *, scope: ScopeArg = None) -> m.ExtractionState:
        """LLM extraction of the workspace: on/off, daily token budget, today's usage, entities and
        facts built."""
        scope_fields = (_core.coerce_scope(scope) or self._client.scope or m.Scope()).model_dump()
        body = m.ExtractionQuery(**drop_none(**scope_fields))
        return cast(m.ExtractionState, self._client.request("graph.extraction", body))

    def update_extraction(
        self, *, daily_token_budget: int | None, scope: ScopeArg = None
    ) -> m.ExtractionState:
        """Set the workspace's daily LLM token budget, at most the server's ceiling (above it: BadRequestError
        TOKEN_BUDGET_ABOVE_CEILING); None goes back to the server's default budget."""
        body = m.ExtractionSettingsRequest(
            **drop_none(scope=_core.coerce_scope(scope)), daily_token_budget=daily_token_budget
        )
        return cast(m.ExtractionState, self._client.request("graph.update_extraction", body))

    def facts(
        self,
        query: str | None = None,
        *,
        entity: str | None = None,
        max_hops: int | None = None,
        edge_classes: Strings | None = None,
        edge_types: Strings | None = None,
        direction: m.Direction | None = None,
        at: datetime | None = None,
        limit: int | None = None,
        strategy: str | None = None,
        scope: ScopeArg = None,
    ) -> m.FactsResult:
        """Facts about the entities a query (or one named entity) reaches, optionally as they stood `at`.

        `edge_types` keeps only these relations ("works on" is works_on); `direction` walks facts out (what
        the entity does), in (what points at it) or both (the default). `seed_source` says how the seeds were
        found."""
        body = m.FactsRequest(
            **drop_none(
                query=query,
                entity=entity,
                max_hops=max_hops,
                edge_classes=edge_classes,
                edge_types=edge_types,
                direction=direction,
                at=at,
                limit=limit,
                strategy=strategy,
                scope=_core.coerce_scope(scope),
            )
        )
        return cast(m.FactsResult, self._client.request("graph.facts", body))

    def traverse(
        self,
        start_entity: str,
        *,
        edge_types: Strings | None = None,
        direction: m.Direction | None = None,
        max_hops: int | None = None,
        limit: int | None = None,
        at: datetime | None = None,
        scope: ScopeArg = None,
    ) -> m.TraverseResult:
        """Entities reached from `start_entity` along typed edges (`direction` out, in or both), with the
        path to each."""
        body = m.TraverseRequest(
            **drop_none(
                start_entity=start_entity,
                edge_types=edge_types,
                direction=direction,
                max_hops=max_hops,
                limit=limit,
                at=at,
                scope=_core.coerce_scope(scope),
            )
        )
        return cast(m.TraverseResult, self._client.request("graph.traverse", body))

    def entities(
        self,
        query: str | None = None,
        *,
        entity: str | None = None,
        type: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        scope: ScopeArg = None,
    ) -> m.EntitiesResult:
        """Search or list entities; `entity=` asks for one entity with its aliases."""
        body = m.EntitiesRequest(
            **drop_none(
                query=query,
                entity=entity,
                type=type,
                limit=limit,
                cursor=cursor,
                scope=_core.coerce_scope(scope),
            )
        )
        return cast(m.EntitiesResult, self._client.request("graph.entities", body))

    def merge_entities(self, into: str, entities: Strings, *, scope: ScopeArg = None) -> m.EntityMergeResult:
        """Fold `entities` (1-10, by name or alias) into `into`: their aliases, mentions and facts move to it
        and duplicate facts merge. Each merge is recorded (`merges`); `split_entity(into, merge_id=...)`
        undoes one. Admin; a name your end user may not see raises NotFoundError ENTITY_NOT_FOUND, naming one
        entity twice BadRequestError MERGE_SAME_ENTITY."""
        body = m.EntityMergeRequest(
            **drop_none(into=into, entities=entities, scope=_core.coerce_scope(scope))
        )
        return cast(m.EntityMergeResult, self._client.request("graph.merge_entities", body))

    def split_entity(
        self,
        entity: str,
        *,
        merge_id: str | None = None,
        name: str | None = None,
        type: str | None = None,
        aliases: Strings | None = None,
        fact_ids: Strings | None = None,
        scope: ScopeArg = None,
    ) -> m.EntitySplitResult:
        """Undo a merge into `entity` (`merge_id`), or make a new entity `name` (of `type`) that takes the
        `aliases` and `fact_ids` given (fact ids: `entities(entity=...)` detail). Admin."""
        body = m.EntitySplitRequest(
            **drop_none(
                entity=entity,
                merge_id=merge_id,
                name=name,
                type=type,
                aliases=aliases,
                fact_ids=fact_ids,
                scope=_core.coerce_scope(scope),
            )
        )
        return cast(m.EntitySplitResult, self._client.request("graph.split_entity", body))

    def communities(
        self,
        *,
        refresh: bool | None = None,
        limit: int | None = None,
        scope: ScopeArg = None,
        timeout: float | None = DEFAULT_JOB_TIMEOUT,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
    ) -> m.CommunitiesResult:
        """Communities of entities, largest first. refresh=True first runs a refresh job (admin; see
        `refresh_communities`) and waits for it as `jobs.wait` does (`timeout`, `poll_interval`)."""
        if refresh:
            accepted = self.refresh_communities(scope=scope)
            self._client.jobs.wait(
                accepted.job_id,
                timeout=timeout,
                poll_interval=poll_interval,
                scope=_core.job_scope(_core.coerce_scope(scope), self._client.scope),
            )
        body = m.CommunitiesRequest(**drop_none(limit=limit, scope=_core.coerce_scope(scope)))
        return cast(m.CommunitiesResult, self._client.request("graph.communities", body))

    def refresh_communities(self, *, scope: ScopeArg = None) -> m.JobAccepted:
        """Start a community refresh (detection, then up to 200 model summaries) as a background job and
        return at once (202); follow `job_id` with `jobs.wait` or `jobs.status` (phases detect, summarize).
        A refresh already queued or running is answered with its own job. Admin."""
        body = m.CommunitiesRequest(**drop_none(refresh=True, scope=_core.coerce_scope(scope)))
        return cast(m.JobAccepted, self._client.request("graph.communities", body))

    def backfill(self, *, limit: int | None = None, scope: ScopeArg = None) -> m.JobAccepted:
        """Start LLM extraction for the memories that never had it (at most `limit`, server default and
        maximum 2,000, oldest first) as a background job and return at once (202); follow `job_id` with
        `jobs.wait` or `jobs.status` (phase extract; result `{"memories": n, "more": bool}`: run again while
        `more`). A backfill already queued or running is answered with its own job. Admin; ConflictError
        LLM_NOT_CONFIGURED when the server has no extraction model."""
        body = m.BackfillRequest(**drop_none(limit=limit, scope=_core.coerce_scope(scope)))
        return cast(m.JobAccepted, self._client.request("graph.backfill", body))

    def stats(self, *, scope: ScopeArg = None) -> m.GraphStats:
        """Entity graph counts: entities by type, current, invalidated and decayed facts, last eviction."""
        body = m.ScopedRequest(**drop_none(scope=_core.coerce_scope(scope)))
        return cast(m.GraphStats, self._client.request("graph.stats", body))

    def clear(self, *, confirm: str, scope: ScopeArg = None) -> m.ClearResult:
        """Delete the entity graph; confirm must be "delete entity graph"."""
        body = m.ClearRequest(**drop_none(confirm=confirm, scope=_core.coerce_scope(scope)))
        return cast(m.ClearResult, self._client.request("graph.clear", body))

    def decay(
        self,
        action: Literal["recompute", "set_rate"],
        *,
        edge_type: str | None = None,
        rate: float | None = None,
        scope: ScopeArg = None,
    ) -> m.DecayResult:
        """Recompute decay now, or set the decay rate of one relation (or the default)."""
        body = m.DecayRequest(
            **drop_none(action=action, edge_type=edge_type, rate=rate, scope=_core.coerce_scope(scope))
        )
        return cast(m.DecayResult, self._client.request("graph.decay", body))

    def settings(self, *, scope: ScopeArg = None) -> m.GraphSettings:
        """Graph reasoning settings: default recall strategy, decay rates, entity cap."""
        scope_fields = (_core.coerce_scope(scope) or self._client.scope or m.Scope()).model_dump()
        body = m.GraphSettingsQuery(**drop_none(**scope_fields))
        return cast(m.GraphSettings, self._client.request("graph.settings", body))

    def update_settings(
        self,
        *,
        recall_strategy: m.RecallStrategy | None = None,
        decay_rate: float | None = None,
        max_entities: int | None = None,
        scope: ScopeArg = None,
    ) -> m.GraphSettings:
        """Change only the settings given."""
        body = m.GraphSettingsRequest(
            **drop_none(
                recall_strategy=recall_strategy,
                decay_rate=decay_rate,
                max_entities=max_entities,
                scope=_core.coerce_scope(scope),
            )
        )
        return cast(m.GraphSettings, self._client.request("graph.update_settings", body))


def export_request(include_embeddings: bool | None, scope: ScopeArg) -> m.ExportRequest:
    return m.ExportRequest(
        **drop_none(include_embeddings=include_embeddings, scope=_core.coerce_scope(scope))
    )


def import_query(scope: ScopeArg, default: m.Scope | None) -> m.ImportQuery:
    chosen = _core.coerce_scope(scope) or default or m.Scope()
    # user_id only filters inside a workspace; an import fills the whole workspace, so it is not sent.
    return m.ImportQuery(**drop_none(tenant_id=chosen.tenant_id, project_id=chosen.project_id))


class Workspace:
    """Move a whole workspace: export it as a versioned JSON Lines file, import such a file into another.

    Both run on the server as background jobs. `export`, `export_to` and `import_` start the job, wait for it
    (polling jobs/status every `poll_interval` seconds, at most `timeout` seconds in all, None: no limit) and
    hand over the records, the file or the report; `start_export`, `download_export` and `start_import` are
    the single steps, for callers that follow the job themselves (`jobs.wait`, `jobs.status`)."""

    def __init__(self, client: Cairn) -> None:
        self._client = client

    def export(
        self,
        *,
        include_embeddings: bool | None = None,
        scope: ScopeArg = None,
        timeout: float | None = DEFAULT_JOB_TIMEOUT,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
    ) -> Iterator[dict[str, Any]]:
        """Every record of the workspace as a dict (header first, trailer last), read from the finished
        export's download line by line. The job starts when iteration starts. A failed job raises
        JobFailedError, a slow one JobTimeoutError; a download cut short raises APIConnectionError (a missing
        trailer is detected)."""
        job_id = self._exported(include_embeddings, scope, timeout, poll_interval)
        for _, record in self._lines(job_id, scope):
            yield record

    def export_to(
        self,
        path: _core.ExportTarget,
        *,
        include_embeddings: bool | None = None,
        scope: ScopeArg = None,
        timeout: float | None = DEFAULT_JOB_TIMEOUT,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
    ) -> dict[str, int]:
        """Export the workspace and write the file to `path` (a path, or a binary file object) as the server
        wrote it; returns the trailer's count per record kind. A path is written under a temporary name
        first, so a download that breaks off leaves no file behind."""
        job_id = self._exported(include_embeddings, scope, timeout, poll_interval)
        return self.download_export(job_id, path, scope=scope)

    def start_export(
        self, *, include_embeddings: bool | None = None, scope: ScopeArg = None
    ) -> m.JobAccepted:
        """Queue an export job and return at once (202). Once `jobs.wait(job_id)` returns (its result:
        `models.ExportJobResult`), fetch the file with `download_export` before it expires."""
        body = export_request(include_embeddings, scope)
        return cast(m.JobAccepted, self._client.request("workspace.export", body))

    def download_export(
        self, job_id: str, path: _core.ExportTarget, *, scope: ScopeArg = None
    ) -> dict[str, int]:
        """Write the file of a succeeded export job to `path` (a path or a binary file object); returns the
        trailer's counts. Retried like any read until the download starts. ConflictError EXPORT_NOT_READY
        while the job runs, BadRequestError EXPORT_EXPIRED (410) once the server deleted the file,
        NotFoundError JOB_NOT_FOUND for anything but an export job of the scope's workspace."""
        with _core.ExportWriter(path) as writer:
            for raw, record in self._lines(job_id, scope):
                writer.write(raw, record)
        return writer.counts

    def _exported(
        self, include_embeddings: bool | None, scope: ScopeArg, timeout: float | None, poll_interval: float
    ) -> str:
        accepted = self.start_export(include_embeddings=include_embeddings, scope=scope)
        self._client.jobs.wait(
            accepted.job_id,
            timeout=timeout,
            poll_interval=poll_interval,
            scope=_core.job_scope(_core.coerce_scope(scope), self._client.scope),
        )
        return accepted.job_id

    def _lines(self, job_id: str, scope: ScopeArg) -> Iterator[tuple[bytes, dict[str, Any]]]:
        client = self._client
        body = m.ExportDownloadRequest(**drop_none(id=job_id, scope=_core.coerce_scope(scope)))
        prepared = _core.prepare("workspace.download_export", body, default_scope=client.scope)
        url = f"{client.base_url}/{prepared.path}"
        response = client._send(prepared, stream=True)
        try:
            _core.check_export_response(prepared.operation, response)
            request_id = response.headers.get("X-Request-Id")
            splitter = _core.LineSplitter()
            last: dict[str, Any] | None = None
            try:
                for chunk in response.iter_bytes():
                    for raw in splitter.feed(chunk):
                        last = _core.export_record(raw, request_id=request_id)
                        yield raw, last
            except httpx.HTTPError as exc:
                raise _core.connection_error(exc, url=url) from exc
            # Every line the server writes ends in a newline: a fragment left over is a line cut in two.
            if splitter.rest() or last is None or last["kind"] != "trailer":
                raise _core.export_cut_short(url)
        finally:
            response.close()

    def import_(
        self,
        source: _core.ImportSource,
        *,
        scope: ScopeArg = None,
        timeout: float | None = DEFAULT_JOB_TIMEOUT,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
    ) -> m.ImportReport:
        """Import an export file (its bytes, a path to it, or its records) into the scope's workspace, wait
        for the import job and return its report.

        The server imports all or nothing and skips rows that already exist, so importing the same file twice
        changes nothing: that is why a failed upload (5xx, lost connection) is simply sent again. A body whose
        first line is no export header raises BadRequestError IMPORT_FILE_INVALID at once; a bad line further
        on fails the job: JobFailedError with code IMPORT_FILE_INVALID and the line in `details["line"]`."""
        accepted = self.start_import(source, scope=scope)
        job = self._client.jobs.wait(
            accepted.job_id,
            timeout=timeout,
            poll_interval=poll_interval,
            scope=_core.job_scope(_core.coerce_scope(scope), self._client.scope),
        )
        return _core.import_report(job)

    def start_import(self, source: _core.ImportSource, *, scope: ScopeArg = None) -> m.JobAccepted:
        """Upload an export file and return at once (202) with the import job; its result, once
        `jobs.wait(job_id)` returns, reads as `models.ImportReport.model_validate(job.result)`."""
        client = self._client
        prepared = _core.prepare(
            "workspace.import", import_query(scope, client.scope), default_scope=client.scope
        )
        response = client._send(prepared, content=_core.import_body(source))
        return cast(m.JobAccepted, _core.parse_response(prepared.operation, response))


class Keys:
    """Your own API keys (the calling key must be admin-scoped): make restricted ones, list, revoke them."""

    def __init__(self, client: Cairn) -> None:
        self._client = client

    def create(
        self,
        name: str | None = None,
        *,
        key_scope: m.KeyScope | None = None,
        pinned: bool | None = None,
        expires_in_days: int | None = None,
        scope: ScopeArg = None,
    ) -> m.KeyCreateResult:
        """A new key for your user (server default scope: write), never stronger than the calling key;
        `.secret` is in this answer only. pinned=True confines it to the workspace `scope` resolves to.

        Not idempotent: a retry after a lost answer can leave an extra key, which `list()` shows."""
        body = m.KeyCreateRequest(
            **drop_none(
                name=name,
                key_scope=key_scope,
                pinned=pinned,
                expires_in_days=expires_in_days,
                scope=_core.coerce_scope(scope),
            )
        )
        return cast(m.KeyCreateResult, self._client.request("keys.create", body))

    def list(self, *, include_inactive: bool | None = None) -> m.KeyListResult:
        """Your keys, newest first, never their secrets; include_inactive adds revoked and expired ones."""
        body = m.KeyListRequest(**drop_none(include_inactive=include_inactive))
        return cast(m.KeyListResult, self._client.request("keys.list", body))

    def revoke(self, id: str) -> m.KeyRevokeResult:
        """Revoke one of your keys (again is fine); any other id raises NotFoundError KEY_NOT_FOUND."""
        body = m.KeyRevokeRequest(id=id)
        return cast(m.KeyRevokeResult, self._client.request("keys.revoke", body))


class Jobs:
    """Background jobs of the workspace (import, export, community refresh, backfill): where each one got,
    and what it produced."""

    def __init__(self, client: Cairn) -> None:
        self._client = client

    def status(self, id: str, *, scope: ScopeArg = None) -> m.Job:
        """One job: status, phase and progress (done of total), its result once succeeded, or its error's code
        and class once failed. Another workspace's job raises NotFoundError JOB_NOT_FOUND."""
        body = m.JobStatusRequest(**drop_none(id=id, scope=_core.coerce_scope(scope)))
        return cast(m.Job, self._client.request("jobs.status", body))

    def list(
        self, *, kind: str | None = None, limit: int | None = None, scope: ScopeArg = None
    ) -> m.JobListResult:
        """The workspace's jobs, newest first (server default 20, at most 100), optionally of one kind."""
        body = m.JobListRequest(**drop_none(kind=kind, limit=limit, scope=_core.coerce_scope(scope)))
        return cast(m.JobListResult, self._client.request("jobs.list", body))

    def wait(
        self,
        id: str,
        *,
        timeout: float | None = DEFAULT_JOB_TIMEOUT,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
        scope: ScopeArg = None,
    ) -> m.Job:
        """Poll `status(id)` until the job ends and return it succeeded (its `result`). A failed job raises
        JobFailedError with the error's `code` and `error_class`; one still running after `timeout` seconds
        (None: no limit) raises JobTimeoutError, and goes on (wait again). Polls come after 0.2 s, doubling up
        to every `poll_interval` seconds."""
        poll = _core.JobPoll(timeout=timeout, poll_interval=poll_interval)
        while True:
            job = self.status(id, scope=scope)
            if _core.job_finished(job):
                return job
            self._client._sleep(poll.next_delay(job))


class Sessions:
    """Conversations recorded turn by turn: each turn is a memory of the session (search, context and the
    graph see it) with its role, speaker, index and the time it was said."""

    def __init__(self, client: Cairn) -> None:
        self._client = client

    def start(
        self,
        *,
        title: str | None = None,
        client: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        scope: ScopeArg = None,
    ) -> m.SessionStartResult:
        body = m.SessionStartRequest(
            **drop_none(title=title, client=client, metadata=metadata, scope=_core.coerce_scope(scope))
        )
        return cast(m.SessionStartResult, self._client.request("sessions.start", body))

    def checkpoint(
        self,
        session_id: str,
        content: str,
        *,
        role: m.TurnRole | None = None,
        kind: m.TurnKind | None = None,
        speaker: str | None = None,
        said_at: datetime | None = None,
        turn_index: int | None = None,
        token_count: int | None = None,
        is_meaningful: bool | None = None,
        metadata: Mapping[str, Any] | None = None,
        scope: ScopeArg = None,
    ) -> m.CheckpointResult:
        """Record one turn. Sending a turn_index again with the same content is a safe retry."""
        body = m.CheckpointRequest(
            **drop_none(
                session_id=session_id,
                content=content,
                role=role,
                kind=kind,
                speaker=speaker,
                said_at=said_at,
                turn_index=turn_index,
                token_count=token_count,
                is_meaningful=is_meaningful,
                metadata=metadata,
                scope=_core.coerce_scope(scope),
            )
        )
        return cast(m.CheckpointResult, self._client.request("sessions.checkpoint", body))

    def add_turns(
        self, session_id: str, turns: Sequence[m.Turn | Mapping[str, Any]], *, scope: ScopeArg = None
    ) -> m.TurnsResult:
        """Record up to 500 turns at once, in order (a chat client uploading a conversation)."""
        body = m.TurnsRequest(
            **drop_none(
                session_id=session_id,
                turns=[t if isinstance(t, m.Turn) else m.Turn(**t) for t in turns],
                scope=_core.coerce_scope(scope),
            )
        )
        return cast(m.TurnsResult, self._client.request("sessions.turns", body))

    def end(
        self, session_id: str, *, status: Literal["closed", "compacted"] | None = None, scope: ScopeArg = None
    ) -> m.SessionEndResult:
        """End the session: its summary becomes a memory, its transcript a snapshot."""
        body = m.SessionEndRequest(
            **drop_none(session_id=session_id, status=status, scope=_core.coerce_scope(scope))
        )
        return cast(m.SessionEndResult, self._client.request("sessions.end", body))

    def snapshot(self, session_id: str, *, scope: ScopeArg = None) -> m.SnapshotResult:
        """The session's transcript as Markdown, turns in order."""
        scope_fields = (_core.coerce_scope(scope) or self._client.scope or m.Scope()).model_dump()
        body = m.SnapshotQuery(session_id=session_id, **drop_none(**scope_fields))
        return cast(m.SnapshotResult, self._client.request("sessions.snapshot", body))


class Skills:
    """Skill files: instructions an agent loads, by path; context/get returns the ones matching its query."""

    def __init__(self, client: Cairn) -> None:
        self._client = client

    def upsert(self, path: str, content: str, *, scope: ScopeArg = None) -> m.SkillUpsertResult:
        body = m.SkillUpsertRequest(**drop_none(path=path, content=content, scope=_core.coerce_scope(scope)))
        return cast(m.SkillUpsertResult, self._client.request("skills.upsert", body))

    def list(self, *, limit: int | None = None, scope: ScopeArg = None) -> m.SkillListResult:
        body = m.SkillListRequest(**drop_none(limit=limit, scope=_core.coerce_scope(scope)))
        return cast(m.SkillListResult, self._client.request("skills.list", body))

    def delete(self, path: str, *, scope: ScopeArg = None) -> m.SkillDeleteResult:
        body = m.SkillDeleteRequest(**drop_none(path=path, scope=_core.coerce_scope(scope)))
        return cast(m.SkillDeleteResult, self._client.request("skills.delete", body))

    def promote(
        self,
        session_id: str,
        *,
        path: str,
        title: str,
        procedure_key: str,
        snapshot_id: str | None = None,
        max_steps: int | None = None,
        scope: ScopeArg = None,
    ) -> m.SkillPromoteResult:
        """A procedure file from a session's snapshot (its transcript as it stands when none is named)."""
        body = m.SkillPromoteRequest(
            **drop_none(
                session_id=session_id,
                snapshot_id=snapshot_id,
                path=path,
                title=title,
                procedure_key=procedure_key,
                max_steps=max_steps,
                scope=_core.coerce_scope(scope),
            )
        )
        return cast(m.SkillPromoteResult, self._client.request("skills.promote", body))
