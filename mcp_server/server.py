"""Cairn as an MCP server: the memory tools an agent needs, over stdio or streamable HTTP (`manage.py mcp`).

Each tool is the SDK API's handler without HTTP around it: the same API-key check (format, rate limit,
unknown, revoked, expired — tenancy.auth.SdkKeyAuth), the same request schemas and so the same limits and
error codes, the same workspace resolution from the key and the scope, the same RLS transaction and the same
services. A failure comes back as a tool error whose text starts with the API's error code (e.g.
`MEMORY_NOT_FOUND: …`).

Django's ORM is synchronous: every tool runs its database work on one dedicated thread (asgiref's
thread-sensitive executor), so the server keeps one connection and the event loop never blocks on Postgres.
"""

from __future__ import annotations

import ipaddress
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Any, Literal, TypeVar

from asgiref.sync import sync_to_async
from django.core.serializers.json import DjangoJSONEncoder
from django.db import close_old_connections
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, TextContent
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from config.errors import ApiError
from config.schemas import ScopeIn, StrictIn, Trimmed, scope_field
from config.validation import api_error_from_validation
from graphsvc import selectors as graph_selectors
from graphsvc.facts import audience_for, entity_lookup, entity_not_found, facts_recall
from graphsvc.schemas import (
    CommunitiesOut,
    Direction,
    EdgeTypes,
    EntitiesOut,
    FactsOut,
    StatsOut,
    TraverseOut,
)
from graphsvc.traverse import graph_traverse
from mcp_server import answers
from memories import supersession
from memories.api import supersession_answer
from memories.schemas import AddIn, ForgetIn, ForgetOut, ResolveIn, ResolveOut
from memories.selectors import MemoryScope, memory_scope
from pipeline import services as pipeline
from pipeline.outcomes import add_outcome_data
from retrieval import context, search
from retrieval.embeddings import embed_query
from retrieval.schemas import ContextIn, ContextOut, SearchIn, SearchOut
from tenancy.access import authorize
from tenancy.auth import SdkCaller, SdkKeyAuth
from tenancy.policy import READ, WRITE, allows, declare, declared_role, forbidden
from tenancy.rls import is_statement_timeout, sdk_call_limits, statement_timeout_error, workspace_context

logger = logging.getLogger("cairn.mcp")

T = TypeVar("T", bound=BaseModel)
INSTRUCTIONS = (
    "Cairn is this agent's long-term memory. Before answering, call get_context with what the user asks: its "
    "text is the rules, memories (with their ids) and known facts that matter, ready to read. Store durable "
    "facts, decisions and preferences with add_memory; remove wrong ones with forget_memory (by id). "
    "graph_facts and graph_traverse read the entity graph (who works on what, what uses what); "
    "graph_entities, "
    "graph_communities and graph_stats show what it holds. Every tool answers in text; the full JSON is its "
    "structured content."
)
CONTEXT_ENDPOINT = "mcp/get_context"  # how retrieval metrics tell MCP calls from HTTP ones


@dataclass(frozen=True)
class McpSettings:
    """What the server was started with: a key (optional over HTTP, where each request may bring its own), the
    default scope of every tool call, and whether a request without its own key may act with the startup key
    (stdio and a loopback HTTP bind only: on any other address that would hand the key's power to anyone who
    reaches the port)."""

    api_key: str | None = None
    default_scope: Mapping[str, str] = field(default_factory=dict)
    startup_key_for_anonymous: bool = True


LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


def is_loopback(host: str) -> bool:
    try:
        return host in LOOPBACK_HOSTS or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def caller_for_key(api_key: str | None) -> SdkCaller:
    """The SDK API's key check, in its order: missing → format → rate limit → unknown → revoked → expired."""
    return SdkKeyAuth().caller_for_header(f"Bearer {api_key}" if api_key else "")


def _validated(schema: type[T], payload: dict[str, Any]) -> T:
    try:
        return schema.model_validate(payload)
    except ValidationError as exc:
        raise api_error_from_validation(exc.errors()) from None


def _resolve(caller: SdkCaller, scope: ScopeIn, *, role: str) -> tuple[int, MemoryScope]:
    return authorize(caller, scope, role=role), memory_scope(scope)


def _json_ready(data: Any) -> Any:
    return json.loads(json.dumps(data, cls=DjangoJSONEncoder))


def tool_error_text(error: ApiError) -> str:
    text = f"{error.code}: {error.message}"
    if error.details:
        text += "\n" + json.dumps(error.details, cls=DjangoJSONEncoder)
    return text


# --- the tools' synchronous bodies (run on the database thread) ---------------------------------------------


@declare(WRITE)
def add_memory_sync(*, caller: SdkCaller, payload: dict[str, Any], role: str) -> dict[str, Any]:
    body = _validated(AddIn, payload)
    workspace_id, scope = _resolve(caller, body.scope, role=role)
    with workspace_context(workspace_id):
        # Admission control applies here as on memories/add: agents behind MCP add just as freely.
        outcome = pipeline.memory_add_admitted_flow(
            workspace_id=workspace_id,
            scope=scope,
            content=body.content,
            type=body.type,
            layer=body.layer,
            tags=body.tags,
            paths=body.paths,
            category=body.category,
            metadata=body.metadata,
            embedding_model=body.embeddingModel,
        )
        return add_outcome_data(workspace_id=workspace_id, outcome=outcome)[1]


@declare(READ)
def search_memories_sync(*, caller: SdkCaller, payload: dict[str, Any], role: str) -> dict[str, Any]:
    body = _validated(SearchIn, payload)
    workspace_id, scope = _resolve(caller, body.scope, role=role)
    with workspace_context(workspace_id):
        data = search.memory_search_answer(workspace_id=workspace_id, scope=scope, body=body)
    return SearchOut.model_validate(data).model_dump(mode="json")


@declare(WRITE)
def forget_memory_sync(*, caller: SdkCaller, payload: dict[str, Any], role: str) -> dict[str, Any]:
    body = _validated(ForgetIn, payload)
    workspace_id, scope = _resolve(caller, body.scope, role=role)
    with workspace_context(workspace_id):
        memory = pipeline.memory_forget_flow(workspace_id=workspace_id, scope=scope, memory_id=body.id)
    return ForgetOut(id=str(memory.id), deleted=True, message="Memory forgotten.").model_dump(mode="json")


@declare(WRITE)
def resolve_memories_sync(*, caller: SdkCaller, payload: dict[str, Any], role: str) -> dict[str, Any]:
    body = _validated(ResolveIn, payload)
    workspace_id, scope = _resolve(caller, body.scope, role=role)
    with workspace_context(workspace_id):
        resolution = supersession.memory_resolve(
            workspace_id=workspace_id,
            scope=scope,
            memory_id=body.memoryId,
            other_memory_id=body.otherMemoryId,
            action=body.action,
            actor=f"user:{caller.user.pk}",
            note=body.note,
        )
        data = supersession_answer(workspace_id=workspace_id, resolution=resolution)
    return ResolveOut.model_validate(data).model_dump(mode="json")


@declare(READ)
def get_context_sync(*, caller: SdkCaller, payload: dict[str, Any], role: str) -> dict[str, Any]:
    body = _validated(ContextIn, payload)
    workspace_id, scope = _resolve(caller, body.scope, role=role)
    request = context.context_request_from(body, endpoint=CONTEXT_ENDPOINT)
    with workspace_context(workspace_id):
        data = context.context_get(workspace_id=workspace_id, scope=scope, request=request)
    data.pop("_graph_ids", None)
    data.pop("_tiers", None)
    data.pop("_rules", None)
    return ContextOut.model_validate(data).model_dump(mode="json")


# The entity graph's tools: the same functions and limits as graph/facts, graph/traverse, graph/entities,
# graph/communities and graph/stats, for the end user the scope names.
EdgeClass = Literal["semantic", "temporal", "causal", "entity"]


class FactsArgs(StrictIn):
    query: Annotated[str, Trimmed(500)] | None = Field(None, description="Words to find entities by.")
    entity: Annotated[str, Trimmed(512)] | None = Field(None, description="One entity by name or alias.")
    maxHops: int = Field(2, ge=1, le=3, description="Hops from the seed entities, 1–3 (default 2).")
    limit: int = Field(10, ge=1, le=100, description="Most facts, 1–100 (default 10).")
    at: datetime | None = Field(None, description="Facts as they were valid at this time.")
    edgeClasses: list[EdgeClass] | None = Field(None, max_length=4, description="Only these edge classes.")
    edgeTypes: EdgeTypes = Field(None, max_length=20, description="Only these relations.")
    direction: Direction = Field("both", description="out, in or both.")
    scope: ScopeIn = scope_field()

    @model_validator(mode="after")
    def _query_or_entity(self) -> FactsArgs:
        if not self.query and not self.entity:
            raise ValueError("send query or entity")
        return self


class TraverseArgs(StrictIn):
    startEntity: Annotated[str, Trimmed(512)] = Field(description="Entity to start from, by name or alias.")
    edgeTypes: EdgeTypes = Field(None, max_length=20, description="Only these relations.")
    direction: Direction = Field("both", description="out, in or both.")
    maxHops: int = Field(2, ge=1, le=3, description="Hops, 1–3 (default 2).")
    limit: int = Field(20, ge=1, le=100, description="Most nodes, 1–100 (default 20).")
    at: datetime | None = Field(None, description="The graph as it was at this time.")
    scope: ScopeIn = scope_field()


class EntitiesArgs(StrictIn):
    query: Annotated[str, Trimmed(500)] | None = Field(None, description="Search by name, alias or summary.")
    entity: Annotated[str, Trimmed(512)] | None = Field(None, description="One entity, in detail.")
    type: Annotated[str, Trimmed(32)] | None = Field(None, description="Only this entity type.")
    limit: int = Field(20, ge=1, le=100, description="Most entities, 1–100 (default 20).")
    scope: ScopeIn = scope_field()


class CommunitiesArgs(StrictIn):
    limit: int = Field(20, ge=1, le=200, description="Most communities, 1–200 (default 20).")
    scope: ScopeIn = scope_field()


class ScopedArgs(StrictIn):
    scope: ScopeIn = scope_field()


@declare(READ)
def graph_facts_sync(*, caller: SdkCaller, payload: dict[str, Any], role: str) -> dict[str, Any]:
    body = _validated(FactsArgs, payload)
    workspace_id, scope = _resolve(caller, body.scope, role=role)
    with workspace_context(workspace_id):
        data = facts_recall(
            workspace_id=workspace_id,
            scope=scope,
            query=body.query,
            entity=body.entity,
            max_hops=body.maxHops,
            limit=body.limit,
            at=body.at,
            edge_classes=body.edgeClasses,
            edge_types=body.edgeTypes,
            direction=body.direction,
            embed=embed_query,
        )
    return FactsOut.model_validate(data).model_dump(mode="json")


@declare(READ)
def graph_traverse_sync(*, caller: SdkCaller, payload: dict[str, Any], role: str) -> dict[str, Any]:
    body = _validated(TraverseArgs, payload)
    workspace_id, scope = _resolve(caller, body.scope, role=role)
    with workspace_context(workspace_id):
        data = graph_traverse(
            workspace_id=workspace_id,
            scope=scope,
            start_entity=body.startEntity,
            edge_types=body.edgeTypes,
            direction=body.direction,
            max_hops=body.maxHops,
            limit=body.limit,
            at=body.at,
        )
    return TraverseOut.model_validate(data).model_dump(mode="json")


@declare(READ)
def graph_entities_sync(*, caller: SdkCaller, payload: dict[str, Any], role: str) -> dict[str, Any]:
    body = _validated(EntitiesArgs, payload)
    workspace_id, scope = _resolve(caller, body.scope, role=role)
    audience = audience_for(scope)
    with workspace_context(workspace_id):
        if body.entity:
            found = entity_lookup(workspace_id=workspace_id, name=body.entity, audience=audience)
            if found is None:
                raise entity_not_found(workspace_id=workspace_id, name=body.entity, audience=audience)
            detail = graph_selectors.entity_detail(
                workspace_id=workspace_id, node_id=found.node_id, audience=audience
            )
            data = {"entities": [detail], "nextCursor": None}
        else:
            data = graph_selectors.entities_list(
                workspace_id=workspace_id,
                query=body.query,
                entity_type=body.type,
                limit=body.limit,
                cursor_id=None,
                audience=audience,
            )
    return EntitiesOut.model_validate(data).model_dump(mode="json")


@declare(READ)
def graph_communities_sync(*, caller: SdkCaller, payload: dict[str, Any], role: str) -> dict[str, Any]:
    body = _validated(CommunitiesArgs, payload)
    workspace_id, scope = _resolve(caller, body.scope, role=role)
    with workspace_context(workspace_id):
        data = graph_selectors.communities_list(
            workspace_id=workspace_id, limit=body.limit, audience=audience_for(scope)
        )
    return CommunitiesOut.model_validate(data).model_dump(mode="json")


@declare(READ)
def graph_stats_sync(*, caller: SdkCaller, payload: dict[str, Any], role: str) -> dict[str, Any]:
    body = _validated(ScopedArgs, payload)
    workspace_id, scope = _resolve(caller, body.scope, role=role)
    with workspace_context(workspace_id):
        data = graph_selectors.entity_graph_stats(workspace_id=workspace_id, audience=audience_for(scope))
    return StatsOut.model_validate(data).model_dump(mode="json")


# Every tool and the body it runs: the body declares the role the tool needs (tests check each tool has one).
TOOL_BODIES: dict[str, Callable[..., dict[str, Any]]] = {
    "get_context": get_context_sync,
    "add_memory": add_memory_sync,
    "search_memories": search_memories_sync,
    "forget_memory": forget_memory_sync,
    "resolve_memories": resolve_memories_sync,
    "graph_facts": graph_facts_sync,
    "graph_traverse": graph_traverse_sync,
    "graph_entities": graph_entities_sync,
    "graph_communities": graph_communities_sync,
    "graph_stats": graph_stats_sync,
}
# How each tool's JSON reads as text for a model (mcp_server.answers); the JSON is the structured content.
TOOL_TEXT: dict[str, Callable[[dict[str, Any]], str]] = {
    "get_context": answers.context_text,
    "add_memory": answers.added_text,
    "search_memories": answers.search_text,
    "forget_memory": answers.forgotten_text,
    "resolve_memories": answers.resolved_text,
    "graph_facts": answers.facts_text,
    "graph_traverse": answers.traverse_text,
    "graph_entities": answers.entities_text,
    "graph_communities": answers.communities_text,
    "graph_stats": answers.stats_text,
}


# --- the server ---------------------------------------------------------------------------------------------


class ScopeArg(BaseModel):
    model_config = ConfigDict(extra="forbid")  # a misspelt scope field must fail, not widen the read

    tenantId: str | None = Field(
        None, description="SDK-tenant workspace under your own (provisioned on first use)."
    )
    userId: str | None = Field(
        None, description="End user: reads see shared memories plus theirs; writes are theirs."
    )
    projectId: str | None = Field(None, description="Project, e.g. github.com/owner/repo.")


ScopeParam = Annotated[
    ScopeArg | None,
    Field(
        description="Overrides the server's default scope field by field: {tenantId?, userId?, projectId?}."
    ),
]


def _drop_none(**fields: Any) -> dict[str, Any]:
    return {name: value for name, value in fields.items() if value is not None}


def build_server(settings: McpSettings) -> MCPServer:
    server = MCPServer("cairn", instructions=INSTRUCTIONS, version="0.1.0")

    def merged_scope(scope: ScopeArg | None) -> dict[str, Any]:
        given = scope.model_dump(exclude_none=True) if scope is not None else {}
        return {**settings.default_scope, **given}

    async def run(ctx: Context | None, tool: str, payload: dict[str, Any]) -> CallToolResult:
        """The tool's body on the database thread; its answer as text for the model and as structured JSON."""
        body = TOOL_BODIES[tool]
        key = settings.api_key if settings.startup_key_for_anonymous else None
        headers = ctx.headers if ctx is not None else None
        authorization = (headers or {}).get("authorization", "")
        if authorization.lower().startswith("bearer "):
            key = authorization[7:].strip()

        role = declared_role(body)
        if role is None:
            raise RuntimeError(f"MCP tool body {body.__name__} declared no role")

        def call() -> dict[str, Any]:
            close_old_connections()
            try:
                caller = caller_for_key(key)
                # The key's scope first, as on the SDK routes: a read key is refused a write before anything
                # else.
                if not allows(caller.key_scope, role):
                    raise forbidden(role, caller.key_scope)
                with sdk_call_limits(role=role):
                    return body(caller=caller, payload=payload, role=role)
            except ApiError as exc:
                raise ToolError(tool_error_text(exc)) from None
            except Exception as exc:
                if is_statement_timeout(exc):
                    with sdk_call_limits(role=role):
                        raise ToolError(tool_error_text(statement_timeout_error())) from None
                logger.exception("MCP tool %s failed", body.__name__)
                raise ToolError("INTERNAL_ERROR: Something went wrong on our side.") from None
            finally:
                close_old_connections()

        data = await sync_to_async(call, thread_sensitive=True)()
        return CallToolResult(content=[TextContent(text=TOOL_TEXT[tool](data))], structured_content=data)

    @server.tool(
        description="The rules, memories and known facts to put in front of your next step: all active "
        "rules, then the memories ranked for `query` (each with its id and why it is there), then what the "
        "entity graph knows about what the query names. Text to read; the full JSON is the structured "
        "content."
    )
    async def get_context(
        ctx: Context,
        query: Annotated[
            str | None, Field(description="What you are about to do or were asked, ≤ 500 chars.")
        ] = None,
        limit: Annotated[
            int | None, Field(description="Long-term memories to return, 1–50 (default 5).")
        ] = None,
        strategy: Annotated[
            Literal["lexical", "semantic", "hybrid", "auto"] | None,
            Field(description="Ranking: lexical, semantic, hybrid (also graph expansion) or auto."),
        ] = None,
        graph_depth: Annotated[
            int | None, Field(description="Hops of graph expansion, 0–2 (default 1).")
        ] = None,
        graph_limit: Annotated[
            int | None, Field(description="Most memories graph expansion adds, 1–50.")
        ] = None,
        include_rules: Annotated[
            bool | None, Field(description="Include active rules (default true).")
        ] = None,
        token_budget: Annotated[
            int | None,
            Field(
                description="Your context budget in tokens; known facts take about 4 % of it (default 4000)."
            ),
        ] = None,
        fact_edge_classes: Annotated[
            list[EdgeClass] | None, Field(description="Known facts only of these classes.")
        ] = None,
        fact_direction: Annotated[
            Direction | None,
            Field(description="Facts out of (out), into (in) or around (both) the entities."),
        ] = None,
        scope: ScopeParam = None,
    ) -> CallToolResult:
        payload = _drop_none(
            query=query,
            limit=limit,
            strategy=strategy,
            graphDepth=graph_depth,
            graphLimit=graph_limit,
            includeRules=include_rules,
            tokenBudget=token_budget,
            factEdgeClasses=fact_edge_classes,
            factDirection=fact_direction,
        )
        return await run(ctx, "get_context", {**payload, "scope": merged_scope(scope)})

    @server.tool(description="Store a memory: a durable fact, decision, rule, preference or skill.")
    async def add_memory(
        ctx: Context,
        content: Annotated[str, Field(description="The memory, 1–8000 chars, one self-contained statement.")],
        type: Annotated[
            Literal["rule", "decision", "fact", "note", "skill"] | None,
            Field(description="Kind of memory (default note)."),
        ] = None,
        layer: Annotated[
            Literal["rule", "working", "long_term"] | None,
            Field(description="working expires in 24 h; default long_term (rule for type rule)."),
        ] = None,
        tags: Annotated[list[str] | None, Field(description="Up to 50 tags.")] = None,
        paths: Annotated[list[str] | None, Field(description="Up to 100 file paths it is about.")] = None,
        category: Annotated[str | None, Field(description="Category, ≤ 120 chars.")] = None,
        metadata: Annotated[dict[str, Any] | None, Field(description="Any JSON object up to 16 KB.")] = None,
        scope: ScopeParam = None,
    ) -> CallToolResult:
        payload = _drop_none(
            content=content,
            type=type,
            layer=layer,
            tags=tags,
            paths=paths,
            category=category,
            metadata=metadata,
        )
        return await run(ctx, "add_memory", {**payload, "scope": merged_scope(scope)})

    @server.tool(description="Search memories by words (lexical), meaning (semantic) or both (hybrid).")
    async def search_memories(
        ctx: Context,
        query: Annotated[str, Field(description="What to look for, 1–500 chars.")],
        limit: Annotated[int | None, Field(description="1–50 (default 10).")] = None,
        strategy: Annotated[
            Literal["lexical", "semantic", "hybrid"] | None,
            Field(description="Default hybrid (lexical while the workspace has no vectors yet)."),
        ] = None,
        type: Annotated[
            Literal["rule", "decision", "fact", "note", "skill"] | None, Field(description="Only this type.")
        ] = None,
        layer: Annotated[
            Literal["rule", "working", "long_term"] | None, Field(description="Only this layer.")
        ] = None,
        scope: ScopeParam = None,
    ) -> CallToolResult:
        payload = _drop_none(query=query, limit=limit, strategy=strategy, type=type, layer=layer)
        return await run(ctx, "search_memories", {**payload, "scope": merged_scope(scope)})

    @server.tool(description="Forget a memory by id (it stops appearing in context and search).")
    async def forget_memory(
        ctx: Context,
        id: Annotated[str, Field(description="The memory id, as returned by add_memory or search_memories.")],
        scope: ScopeParam = None,
    ) -> CallToolResult:
        return await run(ctx, "forget_memory", {"id": id, "scope": merged_scope(scope)})

    @server.tool(
        description="Say which of two memories is current: supersedes (memory_id replaces other_memory_id, "
        "which leaves context and search), not_conflict (both stand), restates, or revert (undo the decision "
        "on the pair). Use it when get_context lists a conflict and the user tells you which side holds."
    )
    async def resolve_memories(
        ctx: Context,
        action: Annotated[
            Literal["supersedes", "not_conflict", "restates", "revert"], Field(description="The decision.")
        ],
        memory_id: Annotated[str, Field(description="The current memory (for supersedes).")],
        other_memory_id: Annotated[str, Field(description="The other memory of the pair.")],
        note: Annotated[str | None, Field(description="Why, kept with the decision.")] = None,
        scope: ScopeParam = None,
    ) -> CallToolResult:
        payload = _drop_none(action=action, memoryId=memory_id, otherMemoryId=other_memory_id, note=note)
        return await run(ctx, "resolve_memories", {**payload, "scope": merged_scope(scope)})

    @server.tool(description="Facts from the entity graph about what `query` (or one `entity`) reaches.")
    async def graph_facts(
        ctx: Context,
        query: Annotated[str | None, Field(description="Words to find entities by.")] = None,
        entity: Annotated[str | None, Field(description="One entity by name or alias.")] = None,
        max_hops: Annotated[
            int | None, Field(description="Hops from the matched entities, 1–3 (default 2).")
        ] = None,
        limit: Annotated[int | None, Field(description="Most facts, 1–100 (default 10).")] = None,
        at: Annotated[str | None, Field(description="ISO 8601 time: facts as they were valid then.")] = None,
        edge_classes: Annotated[list[EdgeClass] | None, Field(description="Only these edge classes.")] = None,
        edge_types: Annotated[
            list[str] | None, Field(description='Only these relations ("works on" or works_on).')
        ] = None,
        direction: Annotated[
            Direction | None, Field(description="out (what it does), in (what points at it) or both.")
        ] = None,
        scope: ScopeParam = None,
    ) -> CallToolResult:
        payload = _drop_none(
            query=query,
            entity=entity,
            maxHops=max_hops,
            limit=limit,
            at=at,
            edgeClasses=edge_classes,
            edgeTypes=edge_types,
            direction=direction,
        )
        return await run(ctx, "graph_facts", {**payload, "scope": merged_scope(scope)})

    @server.tool(description="Walk the entity graph from one entity along typed edges (e.g. works_on, uses).")
    async def graph_traverse(
        ctx: Context,
        start_entity: Annotated[str, Field(description="Entity to start from, by name or alias.")],
        edge_types: Annotated[
            list[str] | None, Field(description='Only these relations ("works on" or works_on).')
        ] = None,
        direction: Annotated[
            Direction | None, Field(description="out (what it does), in (what points at it) or both.")
        ] = None,
        max_hops: Annotated[int | None, Field(description="Hops, 1–3 (default 2).")] = None,
        limit: Annotated[int | None, Field(description="Most nodes, 1–100 (default 20).")] = None,
        at: Annotated[str | None, Field(description="ISO 8601 time: the graph as it was then.")] = None,
        scope: ScopeParam = None,
    ) -> CallToolResult:
        payload = _drop_none(
            startEntity=start_entity,
            edgeTypes=edge_types,
            direction=direction,
            maxHops=max_hops,
            limit=limit,
            at=at,
        )
        return await run(ctx, "graph_traverse", {**payload, "scope": merged_scope(scope)})

    @server.tool(
        description="Entities of the graph: search by `query`, show one `entity` with its aliases, facts and "
        "merges, or list the newest; `type` keeps one type (person, tool, project …)."
    )
    async def graph_entities(
        ctx: Context,
        query: Annotated[str | None, Field(description="Words of a name, alias or summary.")] = None,
        entity: Annotated[str | None, Field(description="One entity by name or alias, in detail.")] = None,
        type: Annotated[str | None, Field(description="Only this type: person, tool, project …")] = None,
        limit: Annotated[int | None, Field(description="Most entities, 1–100 (default 20).")] = None,
        scope: ScopeParam = None,
    ) -> CallToolResult:
        payload = _drop_none(query=query, entity=entity, type=type, limit=limit)
        return await run(ctx, "graph_entities", {**payload, "scope": merged_scope(scope)})

    @server.tool(description="Communities of related entities, largest first, with their summaries.")
    async def graph_communities(
        ctx: Context,
        limit: Annotated[int | None, Field(description="Most communities, 1–200 (default 20).")] = None,
        scope: ScopeParam = None,
    ) -> CallToolResult:
        return await run(ctx, "graph_communities", {**_drop_none(limit=limit), "scope": merged_scope(scope)})

    @server.tool(
        description="What the entity graph holds: entities by type, facts, communities, top relations."
    )
    async def graph_stats(ctx: Context, scope: ScopeParam = None) -> CallToolResult:
        return await run(ctx, "graph_stats", {"scope": merged_scope(scope)})

    return server
