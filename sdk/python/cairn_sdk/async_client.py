"""The asyncio client: `AsyncCairn()` reads CAIRN_API_KEY and CAIRN_BASE_URL; the methods of `Cairn`,
awaited."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, cast

import httpx

from cairn_sdk import _core
from cairn_sdk import models as m
from cairn_sdk._core import DEFAULT_JOB_TIMEOUT, DEFAULT_POLL_INTERVAL, UNSET, RetryPolicy, drop_none
from cairn_sdk.client import MemoryTypes, ScopeArg, Strings, context_fields, export_request, import_query


class AsyncCairn:
    """Asyncio client of Cairn's SDK API.

    >>> cairn = AsyncCairn()                              # CAIRN_API_KEY, CAIRN_BASE_URL
    >>> await cairn.memories.add("We deploy on Fridays", tags=["deploy"])
    >>> print((await cairn.context.get("how do we deploy?")).context)

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
        http_client: httpx.AsyncClient | None = None,
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
        self._http = http_client or httpx.AsyncClient(timeout=timeout)
        self._headers = _core.client_headers(self.api_key, headers)
        self._sleep = asyncio.sleep
        self.memories = AsyncMemories(self)
        self.context = AsyncContext(self)
        self.graph = AsyncGraph(self)
        self.workspace = AsyncWorkspace(self)
        self.keys = AsyncKeys(self)
        self.jobs = AsyncJobs(self)
        self.sessions = AsyncSessions(self)
        self.skills = AsyncSkills(self)

    def with_scope(self, scope: ScopeArg = None, **fields: str | None) -> AsyncCairn:
        """A client sharing this one's connection pool, with another default scope (e.g. per end user)."""
        clone = copy.copy(self)
        clone.scope = _core.coerce_scope(scope) or (m.Scope(**drop_none(**fields)) if fields else None)
        clone._owns_http = False
        clone.memories, clone.context, clone.graph = (
            AsyncMemories(clone),
            AsyncContext(clone),
            AsyncGraph(clone),
        )
        clone.workspace = AsyncWorkspace(clone)
        clone.keys = AsyncKeys(clone)
        clone.jobs = AsyncJobs(clone)
        clone.sessions = AsyncSessions(clone)
        clone.skills = AsyncSkills(clone)
        return clone

    async def close(self) -> None:
        if self._owns_http:
            await self._http.aclose()

    async def __aenter__(self) -> AsyncCairn:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def health(self) -> m.Health:
        return cast(m.Health, await self.request("health"))

    async def request(
        self, operation: str, body: m.RequestModel | None = None, *, idempotency_key: str | None = None
    ) -> Any:
        """Call one operation of `cairn_sdk.operations.OPERATIONS` with retries; return its response model."""
        prepared = _core.prepare(operation, body, default_scope=self.scope, idempotency_key=idempotency_key)
        return _core.parse_response(prepared.operation, await self._send(prepared))

    async def _send(
        self, prepared: _core.PreparedRequest, *, content: bytes | Path | None = None, stream: bool = False
    ) -> httpx.Response:
        """Send with retries; the final answer (success or not). With stream=True the caller must close it."""
        url = f"{self.base_url}/{prepared.path}"
        attempt = 0
        while True:
            try:
                headers = {**self._headers, **prepared.headers}
                data: bytes | AsyncIterator[bytes] | None
                if isinstance(content, Path):
                    # AsyncClient only streams async iterables; giving the length keeps the upload unchunked
                    # (the server checks Content-Length against its upload limit before reading).
                    data = _file_chunks(content)
                    headers["Content-Length"] = str(content.stat().st_size)
                else:
                    data = content
                request = self._http.build_request(
                    prepared.method,
                    url,
                    json=prepared.json if prepared.method != "GET" and data is None else None,
                    content=data,
                    params=prepared.params,
                    headers=headers,
                )
                response = await self._http.send(request, stream=stream)
                if stream and response.status_code >= 300:
                    await response.aread()  # the error envelope (and Retry-After details) is small
            except httpx.HTTPError as exc:
                delay = _core.connection_retry_delay(attempt=attempt, policy=self.retry)
                if delay is None:
                    raise _core.connection_error(exc, url=url) from exc
            else:
                delay = _core.retry_delay(response, attempt=attempt, policy=self.retry)
                if delay is None:
                    return response
                await response.aclose()
            await self._sleep(delay)
            attempt += 1


async def _file_chunks(path: Path, size: int = 65_536) -> AsyncIterator[bytes]:
    with path.open("rb") as file:
        while chunk := await asyncio.to_thread(file.read, size):
            yield chunk


class AsyncMemories:
    def __init__(self, client: AsyncCairn) -> None:
        self._client = client

    async def add(
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
        return cast(m.AddResult, await self._client.request("memories.add", body, idempotency_key=key))

    async def search(
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
        return cast(m.SearchResult, await self._client.request("memories.search", body))

    async def list(
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
        return cast(m.ListResult, await self._client.request("memories.list", body))

    async def iter(
        self,
        *,
        type: m.MemoryType | None = None,
        layer: m.MemoryLayer | None = None,
        tags: str | None = None,
        page_size: int | None = None,
        include_superseded: bool | None = None,
        scope: ScopeArg = None,
    ) -> AsyncIterator[m.Memory]:
        """Every matching memory, newest first, fetched in pages of `page_size` (server default 20)."""
        cursor: str | None = None
        while True:
            page = await self.list(
                type=type,
                layer=layer,
                tags=tags,
                limit=page_size,
                cursor=cursor,
                include_superseded=include_superseded,
                scope=scope,
            )
            for memory in page.memories:
                yield memory
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    async def edit(
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
        return cast(m.EditResult, await self._client.request("memories.edit", m.EditRequest(**fields)))

    async def forget(self, id: str, *, scope: ScopeArg = None) -> m.ForgetResult:
        body = m.ForgetRequest(**drop_none(id=id, scope=_core.coerce_scope(scope)))
        return cast(m.ForgetResult, await self._client.request("memories.forget", body))

    async def resolve(
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
        return cast(m.ResolveResult, await self._client.request("memories.resolve", body))

    async def decisions(
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
        return cast(m.DecisionsResult, await self._client.request("memories.decisions", body))

    async def bulk_forget(
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
        return cast(m.BulkForgetResult, await self._client.request("memories.bulk_forget", body))

    async def vacuum(self, *, scope: ScopeArg = None) -> m.VacuumResult:
        body = m.VacuumRequest(**drop_none(scope=_core.coerce_scope(scope)))
        return cast(m.VacuumResult, await self._client.request("memories.vacuum", body))

    async def consolidate(
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
        return cast(m.ConsolidateResult, await self._client.request("memories.consolidate", body))

    async def settings(self, *, scope: ScopeArg = None) -> m.MemorySettings:
        """The workspace's hygiene settings: credential scrubbing, admission control, importance weight."""
        scope_fields = (_core.coerce_scope(scope) or self._client.scope or m.Scope()).model_dump()
        body = m.MemorySettingsQuery(**drop_none(**scope_fields))
        return cast(m.MemorySettings, await self._client.request("memories.settings", body))

    async def update_settings(
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
        return cast(m.MemorySettings, await self._client.request("memories.update_settings", body))


class AsyncContext:
    def __init__(self, client: AsyncCairn) -> None:
        self._client = client

    async def get(
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
        return cast(m.ContextResult, await self._client.request("context.get", body))


class AsyncGraph:
    def __init__(self, client: AsyncCairn) -> None:
        self._client = client

    async def trace(
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
        return cast(m.TraceResult, await self._client.request("graph.trace", body))

    async def status(self, *, top_nodes_limit: int | None = None, scope: ScopeArg = None) -> m.StatusResult:
        body = m.StatusRequest(**drop_none(top_nodes_limit=top_nodes_limit, scope=_core.coerce_scope(scope)))
        return cast(m.StatusResult, await self._client.request("graph.status", body))

    async def rollout(self, *, window_hours: int | None = None, scope: ScopeArg = None) -> m.RolloutResult:
        scope_fields = (_core.coerce_scope(scope) or self._client.scope or m.Scope()).model_dump()
        body = m.RolloutQuery(**drop_none(window_hours=window_hours, **scope_fields))
        return cast(m.RolloutResult, await self._client.request("graph.rollout", body))

    async def set_rollout(self, mode: m.RolloutMode, *, scope: ScopeArg = None) -> m.RolloutResult:
        body = m.RolloutSetRequest(**drop_none(mode=mode, scope=_core.coerce_scope(scope)))
        return cast(m.RolloutResult, await self._client.request("graph.set_rollout", body))

    async def update_rollout(
        self,
        *,
        mode: m.RolloutMode | None = None,
        autopilot_enabled: bool | None = None,
        scope: ScopeArg = None,
    ) -> m.RolloutResult:
        body = m.RolloutPatchRequest(
            **drop_none(mode=mode, autopilot_enabled=autopilot_enabled, scope=_core.coerce_scope(scope))
        )
        return cast(m.RolloutResult, await self._client.request("graph.update_rollout", body))

    async def extraction(self, *, scope: ScopeArg = None) -> m.ExtractionState:
        """LLM extraction of the workspace: on/off, daily token budget, today's usage, entities and
        facts built."""
        scope_fields = (_core.coerce_scope(scope) or self._client.scope or m.Scope()).model_dump()
        body = m.ExtractionQuery(**drop_none(**scope_fields))
        return cast(m.ExtractionState, await self._client.request("graph.extraction", body))

    async def update_extraction(
        self, *, daily_token_budget: int | None, scope: ScopeArg = None
    ) -> m.ExtractionState:
        """Set the workspace's daily LLM token budget, at most the server's ceiling (above it: BadRequestError
        TOKEN_BUDGET_ABOVE_CEILING); None goes back to the server's default budget."""
        body = m.ExtractionSettingsRequest(
            **drop_none(scope=_core.coerce_scope(scope)), daily_token_budget=daily_token_budget
        )
        return cast(m.ExtractionState, await self._client.request("graph.update_extraction", body))

    async def facts(
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
        return cast(m.FactsResult, await self._client.request("graph.facts", body))

    async def traverse(
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
        return cast(m.TraverseResult, await self._client.request("graph.traverse", body))

    async def entities(
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
        return cast(m.EntitiesResult, await self._client.request("graph.entities", body))

    async def merge_entities(
        self, into: str, entities: Strings, *, scope: ScopeArg = None
    ) -> m.EntityMergeResult:
        """Fold `entities` (1-10, by name or alias) into `into`: their aliases, mentions and facts move to it
        and duplicate facts merge. Each merge is recorded (`merges`); `split_entity(into, merge_id=...)`
        undoes one. Admin; a name your end user may not see raises NotFoundError ENTITY_NOT_FOUND, naming one
        entity twice BadRequestError MERGE_SAME_ENTITY."""
        body = m.EntityMergeRequest(
            **drop_none(into=into, entities=entities, scope=_core.coerce_scope(scope))
        )
        return cast(m.EntityMergeResult, await self._client.request("graph.merge_entities", body))

    async def split_entity(
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
        return cast(m.EntitySplitResult, await self._client.request("graph.split_entity", body))

    async def communities(
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
            accepted = await self.refresh_communities(scope=scope)
            await self._client.jobs.wait(
                accepted.job_id,
                timeout=timeout,
                poll_interval=poll_interval,
                scope=_core.job_scope(_core.coerce_scope(scope), self._client.scope),
            )
        body = m.CommunitiesRequest(**drop_none(limit=limit, scope=_core.coerce_scope(scope)))
        return cast(m.CommunitiesResult, await self._client.request("graph.communities", body))

    async def refresh_communities(self, *, scope: ScopeArg = None) -> m.JobAccepted:
        """Start a community refresh (detection, then up to 200 model summaries) as a background job and
        return at once (202); follow `job_id` with `jobs.wait` or `jobs.status` (phases detect, summarize).
        A refresh already queued or running is answered with its own job. Admin."""
        body = m.CommunitiesRequest(**drop_none(refresh=True, scope=_core.coerce_scope(scope)))
        return cast(m.JobAccepted, await self._client.request("graph.communities", body))

    async def backfill(self, *, limit: int | None = None, scope: ScopeArg = None) -> m.JobAccepted:
        """Start LLM extraction for the memories that never had it (at most `limit`, server default and
        maximum 2,000, oldest first) as a background job and return at once (202); follow `job_id` with
        `jobs.wait` or `jobs.status` (phase extract; result `{"memories": n, "more": bool}`: run again while
        `more`). A backfill already queued or running is answered with its own job. Admin; ConflictError
        LLM_NOT_CONFIGURED when the server has no extraction model."""
        body = m.BackfillRequest(**drop_none(limit=limit, scope=_core.coerce_scope(scope)))
        return cast(m.JobAccepted, await self._client.request("graph.backfill", body))

    async def stats(self, *, scope: ScopeArg = None) -> m.GraphStats:
        """Entity graph counts: entities by type, current, invalidated and decayed facts, last eviction."""
        body = m.ScopedRequest(**drop_none(scope=_core.coerce_scope(scope)))
        return cast(m.GraphStats, await self._client.request("graph.stats", body))

    async def clear(self, *, confirm: str, scope: ScopeArg = None) -> m.ClearResult:
        """Delete the entity graph; confirm must be "delete entity graph"."""
        body = m.ClearRequest(**drop_none(confirm=confirm, scope=_core.coerce_scope(scope)))
        return cast(m.ClearResult, await self._client.request("graph.clear", body))

    async def decay(
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
        return cast(m.DecayResult, await self._client.request("graph.decay", body))

    async def settings(self, *, scope: ScopeArg = None) -> m.GraphSettings:
        """Graph reasoning settings: default recall strategy, decay rates, entity cap."""
        scope_fields = (_core.coerce_scope(scope) or self._client.scope or m.Scope()).model_dump()
        body = m.GraphSettingsQuery(**drop_none(**scope_fields))
        return cast(m.GraphSettings, await self._client.request("graph.settings", body))

    async def update_settings(
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
        return cast(m.GraphSettings, await self._client.request("graph.update_settings", body))


class AsyncWorkspace:
    """Move a whole workspace: export it as a versioned JSON Lines file, import such a file into another.

    Background jobs on the server, as with `Cairn.workspace`: `export`, `export_to` and `import_` start the
    job and wait for it; `start_export`, `download_export` and `start_import` are the single steps."""

    def __init__(self, client: AsyncCairn) -> None:
        self._client = client

    async def export(
        self,
        *,
        include_embeddings: bool | None = None,
        scope: ScopeArg = None,
        timeout: float | None = DEFAULT_JOB_TIMEOUT,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
    ) -> AsyncIterator[dict[str, Any]]:
        """Every record of the workspace (`async for`), header first, trailer last; the job starts when
        iteration starts. See `Cairn.workspace.export`."""
        job_id = await self._exported(include_embeddings, scope, timeout, poll_interval)
        async for _, record in self._lines(job_id, scope):
            yield record

    async def export_to(
        self,
        path: _core.ExportTarget,
        *,
        include_embeddings: bool | None = None,
        scope: ScopeArg = None,
        timeout: float | None = DEFAULT_JOB_TIMEOUT,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
    ) -> dict[str, int]:
        """Export the workspace and write the file to `path` (a path or a binary file object); returns the
        trailer's counts. A download that breaks off leaves no file at a path."""
        job_id = await self._exported(include_embeddings, scope, timeout, poll_interval)
        return await self.download_export(job_id, path, scope=scope)

    async def start_export(
        self, *, include_embeddings: bool | None = None, scope: ScopeArg = None
    ) -> m.JobAccepted:
        """Queue an export job and return at once (202); see `Cairn.workspace.start_export`."""
        body = export_request(include_embeddings, scope)
        return cast(m.JobAccepted, await self._client.request("workspace.export", body))

    async def download_export(
        self, job_id: str, path: _core.ExportTarget, *, scope: ScopeArg = None
    ) -> dict[str, int]:
        """Write the file of a succeeded export job to `path`; returns the trailer's counts. See
        `Cairn.workspace.download_export`."""
        with _core.ExportWriter(path) as writer:
            async for raw, record in self._lines(job_id, scope):
                writer.write(raw, record)
        return writer.counts

    async def _exported(
        self, include_embeddings: bool | None, scope: ScopeArg, timeout: float | None, poll_interval: float
    ) -> str:
        accepted = await self.start_export(include_embeddings=include_embeddings, scope=scope)
        await self._client.jobs.wait(
            accepted.job_id,
            timeout=timeout,
            poll_interval=poll_interval,
            scope=_core.job_scope(_core.coerce_scope(scope), self._client.scope),
        )
        return accepted.job_id

    async def _lines(self, job_id: str, scope: ScopeArg) -> AsyncIterator[tuple[bytes, dict[str, Any]]]:
        client = self._client
        body = m.ExportDownloadRequest(**drop_none(id=job_id, scope=_core.coerce_scope(scope)))
        prepared = _core.prepare("workspace.download_export", body, default_scope=client.scope)
        url = f"{client.base_url}/{prepared.path}"
        response = await client._send(prepared, stream=True)
        try:
            _core.check_export_response(prepared.operation, response)
            request_id = response.headers.get("X-Request-Id")
            splitter = _core.LineSplitter()
            last: dict[str, Any] | None = None
            try:
                async for chunk in response.aiter_bytes():
                    for raw in splitter.feed(chunk):
                        last = _core.export_record(raw, request_id=request_id)
                        yield raw, last
            except httpx.HTTPError as exc:
                raise _core.connection_error(exc, url=url) from exc
            # Every line the server writes ends in a newline: a fragment left over is a line cut in two.
            if splitter.rest() or last is None or last["kind"] != "trailer":
                raise _core.export_cut_short(url)
        finally:
            await response.aclose()

    async def import_(
        self,
        source: _core.ImportSource,
        *,
        scope: ScopeArg = None,
        timeout: float | None = DEFAULT_JOB_TIMEOUT,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
    ) -> m.ImportReport:
        """Import an export file (bytes, a path, or records) into the scope's workspace, wait for the job and
        return its report; safe to retry, as the server skips rows that exist. See `Cairn.workspace.import_`.

        Records may come from `export()` directly only after collecting them (`[r async for r in ...]`)."""
        accepted = await self.start_import(source, scope=scope)
        job = await self._client.jobs.wait(
            accepted.job_id,
            timeout=timeout,
            poll_interval=poll_interval,
            scope=_core.job_scope(_core.coerce_scope(scope), self._client.scope),
        )
        return _core.import_report(job)

    async def start_import(self, source: _core.ImportSource, *, scope: ScopeArg = None) -> m.JobAccepted:
        """Upload an export file and return at once (202) with the import job; see
        `Cairn.workspace.start_import`."""
        client = self._client
        prepared = _core.prepare(
            "workspace.import", import_query(scope, client.scope), default_scope=client.scope
        )
        response = await client._send(prepared, content=_core.import_body(source))
        return cast(m.JobAccepted, _core.parse_response(prepared.operation, response))


class AsyncKeys:
    """Your own API keys (the calling key must be admin-scoped): make restricted ones, list, revoke them."""

    def __init__(self, client: AsyncCairn) -> None:
        self._client = client

    async def create(
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
        return cast(m.KeyCreateResult, await self._client.request("keys.create", body))

    async def list(self, *, include_inactive: bool | None = None) -> m.KeyListResult:
        """Your keys, newest first, never their secrets; include_inactive adds revoked and expired ones."""
        body = m.KeyListRequest(**drop_none(include_inactive=include_inactive))
        return cast(m.KeyListResult, await self._client.request("keys.list", body))

    async def revoke(self, id: str) -> m.KeyRevokeResult:
        """Revoke one of your keys (again is fine); any other id raises NotFoundError KEY_NOT_FOUND."""
        body = m.KeyRevokeRequest(id=id)
        return cast(m.KeyRevokeResult, await self._client.request("keys.revoke", body))


class AsyncJobs:
    """Background jobs of the workspace (import, export, community refresh, backfill): where each one got,
    and what it produced."""

    def __init__(self, client: AsyncCairn) -> None:
        self._client = client

    async def status(self, id: str, *, scope: ScopeArg = None) -> m.Job:
        """One job: status, phase and progress (done of total), its result once succeeded, or its error's code
        and class once failed. Another workspace's job raises NotFoundError JOB_NOT_FOUND."""
        body = m.JobStatusRequest(**drop_none(id=id, scope=_core.coerce_scope(scope)))
        return cast(m.Job, await self._client.request("jobs.status", body))

    async def list(
        self, *, kind: str | None = None, limit: int | None = None, scope: ScopeArg = None
    ) -> m.JobListResult:
        """The workspace's jobs, newest first (server default 20, at most 100), optionally of one kind."""
        body = m.JobListRequest(**drop_none(kind=kind, limit=limit, scope=_core.coerce_scope(scope)))
        return cast(m.JobListResult, await self._client.request("jobs.list", body))

    async def wait(
        self,
        id: str,
        *,
        timeout: float | None = DEFAULT_JOB_TIMEOUT,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
        scope: ScopeArg = None,
    ) -> m.Job:
        """Poll `status(id)` until the job ends and return it succeeded; JobFailedError when it failed,
        JobTimeoutError after `timeout` seconds (None: no limit). See `Cairn.jobs.wait`."""
        poll = _core.JobPoll(timeout=timeout, poll_interval=poll_interval)
        while True:
            job = await self.status(id, scope=scope)
            if _core.job_finished(job):
                return job
            await self._client._sleep(poll.next_delay(job))


class AsyncSessions:
    """Conversations recorded turn by turn: each turn is a memory of the session (search, context and the
    graph see it) with its role, speaker, index and the time it was said."""

    def __init__(self, client: AsyncCairn) -> None:
        self._client = client

    async def start(
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
        return cast(m.SessionStartResult, await self._client.request("sessions.start", body))

    async def checkpoint(
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
        return cast(m.CheckpointResult, await self._client.request("sessions.checkpoint", body))

    async def add_turns(
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
        return cast(m.TurnsResult, await self._client.request("sessions.turns", body))

    async def end(
        self, session_id: str, *, status: Literal["closed", "compacted"] | None = None, scope: ScopeArg = None
    ) -> m.SessionEndResult:
        """End the session: its summary becomes a memory, its transcript a snapshot."""
        body = m.SessionEndRequest(
            **drop_none(session_id=session_id, status=status, scope=_core.coerce_scope(scope))
        )
        return cast(m.SessionEndResult, await self._client.request("sessions.end", body))

    async def snapshot(self, session_id: str, *, scope: ScopeArg = None) -> m.SnapshotResult:
        """The session's transcript as Markdown, turns in order."""
        scope_fields = (_core.coerce_scope(scope) or self._client.scope or m.Scope()).model_dump()
        body = m.SnapshotQuery(session_id=session_id, **drop_none(**scope_fields))
        return cast(m.SnapshotResult, await self._client.request("sessions.snapshot", body))


class AsyncSkills:
    """Skill files: instructions an agent loads, by path; context/get returns the ones matching its query."""

    def __init__(self, client: AsyncCairn) -> None:
        self._client = client

    async def upsert(self, path: str, content: str, *, scope: ScopeArg = None) -> m.SkillUpsertResult:
        body = m.SkillUpsertRequest(**drop_none(path=path, content=content, scope=_core.coerce_scope(scope)))
        return cast(m.SkillUpsertResult, await self._client.request("skills.upsert", body))

    async def list(self, *, limit: int | None = None, scope: ScopeArg = None) -> m.SkillListResult:
        body = m.SkillListRequest(**drop_none(limit=limit, scope=_core.coerce_scope(scope)))
        return cast(m.SkillListResult, await self._client.request("skills.list", body))

    async def delete(self, path: str, *, scope: ScopeArg = None) -> m.SkillDeleteResult:
        body = m.SkillDeleteRequest(**drop_none(path=path, scope=_core.coerce_scope(scope)))
        return cast(m.SkillDeleteResult, await self._client.request("skills.delete", body))

    async def promote(
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
        return cast(m.SkillPromoteResult, await self._client.request("skills.promote", body))
