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

import inspect
import ipaddress
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, TypeVar

from asgiref.sync import sync_to_async
from django.core.serializers.json import DjangoJSONEncoder
from django.db import close_old_connections
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp_types import CallToolResult, TextContent
from pydantic import BaseModel, ConfigDict, Field, ValidationError, WithJsonSchema

from config.errors import ApiError
from config.schemas import ScopeIn
from config.validation import api_error_from_validation
from conversations import answers as conversation_answers
from conversations.schemas import (
    CheckpointIn,
    SessionEndIn,
    SessionSnapshotIn,
    SessionStartIn,
    SkillListIn,
    SkillPromoteIn,
    SkillUpsertIn,
)
from graphsvc import selectors as graph_selectors
from graphsvc.facts import audience_for, entity_lookup, entity_not_found, facts_recall
from graphsvc.schemas import (
    CommunitiesIn,
    CommunitiesOut,
    EntitiesIn,
    EntitiesOut,
    FactsIn,
    FactsOut,
    ScopedIn,
    StatsOut,
    TraverseIn,
    TraverseOut,
)
from graphsvc.traverse import graph_traverse
from mcp_server import answers
from memories import supersession
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


def tool_error_text(error: ApiError) -> str:
    text = f"{error.code}: {error.message}"
    if error.details:
        text += "\n" + json.dumps(error.details, cls=DjangoJSONEncoder)
    return text


INTERNAL_ERROR = ApiError(500, "INTERNAL_ERROR", "Something went wrong on our side.")


def tool_error_result(error: ApiError) -> CallToolResult:
    """A failed call as the tool's own result (isError), its text starting with the API's code. Raising
    ToolError instead would put the SDK's "Error executing tool <name>: " in front of it."""
    return CallToolResult(content=[TextContent(text=tool_error_text(error))], is_error=True)


_JSON_TYPE_OF = {"integer": "an integer", "number": "a number", "boolean": "true or false"}


def _json_type_problem(schema: Mapping[str, Any], value: Any) -> str | None:
    """What `value` should have been, when the schema wants an integer, a number or a boolean and the value
    is another JSON type ("1", true or 1.0 for an integer): the SDK's lax validation would coerce it, the
    API's routes refuse it. None when the value is of a type the schema allows, or the schema names none of
    those."""
    options = schema.get("anyOf") or [schema]
    wanted = {str(option.get("type")) for option in options if isinstance(option, Mapping)}
    scalar = wanted & set(_JSON_TYPE_OF)
    if not scalar:
        return None
    if value is None and "null" in wanted:
        return None
    if isinstance(value, bool):
        fits = "boolean" in wanted
    elif isinstance(value, int):
        fits = bool(wanted & {"integer", "number"})
    elif isinstance(value, float):
        fits = "number" in wanted
    else:
        fits = bool(wanted - {"null"} - scalar)  # a string or object, where the schema allows another type
    return None if fits else " or ".join(_JSON_TYPE_OF[kind] for kind in sorted(scalar))


class CairnMCPServer(MCPServer):
    """MCPServer whose own refusals (arguments that fail a tool's input schema, an unknown tool, a crash
    outside a tool's body) also begin with a code, as the tools' errors do, and whose integer, number and
    boolean arguments are taken only as those JSON types, as the API's request bodies are."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> Any:
        tool = next((tool for tool in await self.list_tools() if tool.name == name), None)
        properties = (tool.input_schema.get("properties") or {}) if tool is not None else {}
        for field_name, value in (arguments or {}).items():
            schema = properties.get(field_name)
            problem = _json_type_problem(schema, value) if isinstance(schema, Mapping) else None
            if problem is not None:
                return tool_error_result(
                    ApiError(
                        400,
                        "INVALID_REQUEST",
                        f"{field_name} must be {problem}, as that JSON type (not {type(value).__name__}).",
                        details={"issues": [{"field": field_name, "message": f"must be {problem}"}]},
                    )
                )
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError:
            logger.exception("MCP tool %s raised outside its body", name)
            return tool_error_result(INTERNAL_ERROR)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, ValidationError):
                return tool_error_result(api_error_from_validation(cause.errors()))
            if name not in {tool.name for tool in await self.list_tools()}:
                return tool_error_result(
                    ApiError(
                        404, "TOOL_NOT_FOUND", f"There is no tool named {name[:80]!r}; list_tools names them."
                    )
                )
            message = str(exc).removeprefix(f"Error executing tool {name}: ")
            return tool_error_result(ApiError(400, "INVALID_REQUEST", message))


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
        data = supersession.resolution_answer(workspace_id=workspace_id, resolution=resolution)
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


# The entity graph's tools: the same functions, schemas and limits as graph/facts, graph/traverse,
# graph/entities, graph/communities and graph/stats, for the end user the scope names.


@declare(READ)
def graph_facts_sync(*, caller: SdkCaller, payload: dict[str, Any], role: str) -> dict[str, Any]:
    body = _validated(FactsIn, payload)
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
            strategy=body.strategy,
            embed=embed_query,
        )
    return FactsOut.model_validate(data).model_dump(mode="json")


@declare(READ)
def graph_traverse_sync(*, caller: SdkCaller, payload: dict[str, Any], role: str) -> dict[str, Any]:
    body = _validated(TraverseIn, payload)
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
    body = _validated(EntitiesIn, payload)
    workspace_id, scope = _resolve(caller, body.scope, role=role)
    audience = audience_for(scope)
    cursor_id = graph_selectors.entities_cursor_id(body.cursor)
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
                cursor_id=cursor_id,
                audience=audience,
            )
    return EntitiesOut.model_validate(data).model_dump(mode="json")


@declare(READ)
def graph_communities_sync(*, caller: SdkCaller, payload: dict[str, Any], role: str) -> dict[str, Any]:
    body = _validated(CommunitiesIn, payload)
    if body.refresh:
        # graph/communities's refresh starts an admin job; the tool only reads (its argument is not offered).
        raise ApiError(400, "INVALID_REQUEST", "get_communities only lists; refresh with graph/communities.")
    workspace_id, scope = _resolve(caller, body.scope, role=role)
    with workspace_context(workspace_id):
        data = graph_selectors.communities_list(
            workspace_id=workspace_id, limit=body.limit, audience=audience_for(scope)
        )
    return CommunitiesOut.model_validate(data).model_dump(mode="json")


@declare(READ)
def graph_stats_sync(*, caller: SdkCaller, payload: dict[str, Any], role: str) -> dict[str, Any]:
    body = _validated(ScopedIn, payload)
    workspace_id, scope = _resolve(caller, body.scope, role=role)
    with workspace_context(workspace_id):
        data = graph_selectors.entity_graph_stats(workspace_id=workspace_id, audience=audience_for(scope))
    return StatsOut.model_validate(data).model_dump(mode="json")


# Sessions and skill files: the same answers as sessions/* and skills/files/* (conversations.answers).


@declare(WRITE)
def start_session_sync(*, caller: SdkCaller, payload: dict[str, Any], role: str) -> dict[str, Any]:
    body = _validated(SessionStartIn, payload)
    workspace_id, scope = _resolve(caller, body.scope, role=role)
    with workspace_context(workspace_id):
        return conversation_answers.session_start_answer(workspace_id=workspace_id, scope=scope, body=body)[1]


@declare(WRITE)
def record_turn_sync(*, caller: SdkCaller, payload: dict[str, Any], role: str) -> dict[str, Any]:
    body = _validated(CheckpointIn, payload)
    workspace_id, scope = _resolve(caller, body.scope, role=role)
    with workspace_context(workspace_id):
        return conversation_answers.session_checkpoint_answer(
            workspace_id=workspace_id, scope=scope, body=body
        )[1]


@declare(WRITE)
def end_session_sync(*, caller: SdkCaller, payload: dict[str, Any], role: str) -> dict[str, Any]:
    body = _validated(SessionEndIn, payload)
    workspace_id, scope = _resolve(caller, body.scope, role=role)
    with workspace_context(workspace_id):
        return conversation_answers.session_end_answer(workspace_id=workspace_id, scope=scope, body=body)[1]


@declare(READ)
def session_transcript_sync(*, caller: SdkCaller, payload: dict[str, Any], role: str) -> dict[str, Any]:
    body = _validated(SessionSnapshotIn, payload)
    workspace_id, scope = _resolve(caller, body.scope, role=role)
    with workspace_context(workspace_id):
        return conversation_answers.session_snapshot_answer(
            workspace_id=workspace_id, scope=scope, session_id=body.sessionId
        )[1]


@declare(WRITE)
def save_skill_file_sync(*, caller: SdkCaller, payload: dict[str, Any], role: str) -> dict[str, Any]:
    body = _validated(SkillUpsertIn, payload)
    workspace_id, scope = _resolve(caller, body.scope, role=role)
    with workspace_context(workspace_id):
        return conversation_answers.skill_upsert_answer(workspace_id=workspace_id, scope=scope, body=body)[1]


@declare(READ)
def list_skill_files_sync(*, caller: SdkCaller, payload: dict[str, Any], role: str) -> dict[str, Any]:
    body = _validated(SkillListIn, payload)
    workspace_id, scope = _resolve(caller, body.scope, role=role)
    with workspace_context(workspace_id):
        return conversation_answers.skill_list_answer(workspace_id=workspace_id, scope=scope, body=body)[1]


@declare(WRITE)
def promote_session_sync(*, caller: SdkCaller, payload: dict[str, Any], role: str) -> dict[str, Any]:
    body = _validated(SkillPromoteIn, payload)
    workspace_id, scope = _resolve(caller, body.scope, role=role)
    with workspace_context(workspace_id):
        return conversation_answers.skill_promote_answer(workspace_id=workspace_id, scope=scope, body=body)[1]


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
    "start_session": start_session_sync,
    "record_turn": record_turn_sync,
    "end_session": end_session_sync,
    "session_transcript": session_transcript_sync,
    "save_skill_file": save_skill_file_sync,
    "list_skill_files": list_skill_files_sync,
    "promote_session": promote_session_sync,
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
    "start_session": answers.session_started_text,
    "record_turn": answers.turn_text,
    "end_session": answers.session_ended_text,
    "session_transcript": answers.transcript_text,
    "save_skill_file": answers.skill_file_text,
    "list_skill_files": answers.skill_files_text,
    "promote_session": answers.skill_file_text,
}


# Each tool's arguments: the request schema of the route it mirrors, less the fields it does not offer
# (graph/communities's refresh starts an admin job; the tool only reads). One source: a field added to a route
# is an argument of its tool, with the same limits and default.
TOOL_SCHEMAS: dict[str, tuple[type[BaseModel], frozenset[str]]] = {
    "get_context": (ContextIn, frozenset()),
    "add_memory": (AddIn, frozenset()),
    "search_memories": (SearchIn, frozenset()),
    "forget_memory": (ForgetIn, frozenset()),
    "resolve_memories": (ResolveIn, frozenset()),
    "graph_facts": (FactsIn, frozenset()),
    "graph_traverse": (TraverseIn, frozenset()),
    "graph_entities": (EntitiesIn, frozenset()),
    "graph_communities": (CommunitiesIn, frozenset({"refresh"})),
    "graph_stats": (ScopedIn, frozenset()),
    "start_session": (SessionStartIn, frozenset()),
    "record_turn": (CheckpointIn, frozenset()),
    "end_session": (SessionEndIn, frozenset()),
    "session_transcript": (SessionSnapshotIn, frozenset()),
    "save_skill_file": (SkillUpsertIn, frozenset()),
    "list_skill_files": (SkillListIn, frozenset()),
    "promote_session": (SkillPromoteIn, frozenset()),
}
TOOL_DESCRIPTIONS = {
    "get_context": "The rules, memories and known facts to put in front of your next step: all active rules, "
    "then the memories ranked for `query` (each with its id and why it is there), then what the entity graph "
    "knows about what the query names. Text to read; the full JSON is the structured content.",
    "add_memory": "Store a memory: a durable fact, decision, rule, preference or skill.",
    "search_memories": "Search memories by words (lexical), meaning (semantic) or both (hybrid).",
    "forget_memory": "Forget a memory by id (it stops appearing in context and search).",
    "resolve_memories": "Say which of two memories is current: supersedes (memory_id replaces "
    "other_memory_id, which leaves context and search), not_conflict (both stand), restates, or revert (undo "
    "the decision on the pair). Use it when get_context lists a conflict and the user tells you which side "
    "holds.",
    "graph_facts": "Facts from the entity graph about what `query` (or one `entity`) reaches.",
    "graph_traverse": "Walk the entity graph from one entity along typed edges (e.g. works_on, uses).",
    "graph_entities": "Entities of the graph: search by `query`, show one `entity` with its aliases, facts "
    "and merges, or list the newest; `type` keeps one type (person, tool, project …).",
    "graph_communities": "Communities of related entities, largest first, with their summaries.",
    "graph_stats": "What the entity graph holds: entities by type, facts, communities, top relations.",
    "start_session": "Start recording a conversation or a task as a session; record its turns with "
    "record_turn.",
    "record_turn": "Record one turn of a session: it becomes a memory that search and get_context find, with "
    "who said it (role, speaker) and when (said_at).",
    "end_session": "End a session: its summary is stored as a memory, its transcript as a snapshot.",
    "session_transcript": "A session's transcript as Markdown, turns in order.",
    "save_skill_file": "Write a skill file (instructions loaded by path); replaces the file at that path.",
    "list_skill_files": "The skill files of this scope, newest change first.",
    "promote_session": "Turn a session into a reusable procedure skill file (its steps, in order) at `path`.",
}


@dataclass(frozen=True)
class ToolArgument:
    field: str  # the request schema's field (camelCase)
    annotation: Any  # for the tool's signature: any value, with the field's JSON schema
    default: Any  # the route's plain default, None (the route decides), or inspect.Parameter.empty (required)


def _snake(name: str) -> str:
    return "".join(f"_{ch.lower()}" if ch.isupper() else ch for ch in name)


def _inlined(node: Any, defs: dict[str, Any]) -> Any:
    """A JSON schema with its local $refs replaced by what they point to (a tool's schema stands alone)."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            return _inlined(
                {**defs[ref.removeprefix("#/$defs/")], **{k: v for k, v in node.items() if k != "$ref"}}, defs
            )
        return {key: _inlined(value, defs) for key, value in node.items()}
    if isinstance(node, list):
        return [_inlined(item, defs) for item in node]
    return node


def tool_arguments(
    schema: type[BaseModel], *, excluded: frozenset[str] = frozenset()
) -> dict[str, ToolArgument]:
    """The arguments of the tool that mirrors the route of `schema`, by snake_case name. The signature takes
    any value (the MCP library's own check would answer its own message, not the route's error code); the
    JSON schema a model reads is the field's."""
    document = schema.model_json_schema()
    defs = document.get("$defs", {})
    arguments = {}
    for name, info in schema.model_fields.items():
        if name == "scope" or name in excluded:
            continue
        shown = _inlined(document["properties"][name], defs)
        default: Any
        if info.is_required():
            default = inspect.Parameter.empty
        else:
            # The route's default where it has a plain one (shown to the model as it is), else None: left out
            # of the body, so the route's own default (a factory's, the workspace's setting) applies.
            default = info.get_default(call_default_factory=False)
            default = default if isinstance(default, bool | int | float | str) else None
        arguments[_snake(name)] = ToolArgument(
            field=name, annotation=Annotated[Any, WithJsonSchema(shown)], default=default
        )
    return arguments


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


def build_server(settings: McpSettings) -> MCPServer:
    server = CairnMCPServer("cairn", instructions=INSTRUCTIONS, version="0.1.0")

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

        def call() -> dict[str, Any] | CallToolResult:
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
                return tool_error_result(exc)
            except Exception as exc:
                if is_statement_timeout(exc):
                    with sdk_call_limits(role=role):
                        return tool_error_result(statement_timeout_error())
                logger.exception("MCP tool %s failed", body.__name__)
                return tool_error_result(INTERNAL_ERROR)
            finally:
                close_old_connections()

        data = await sync_to_async(call, thread_sensitive=True)()
        if isinstance(data, CallToolResult):
            return data
        return CallToolResult(content=[TextContent(text=TOOL_TEXT[tool](data))], structured_content=data)

    def register(name: str, description: str) -> None:
        """The tool `name`, its arguments the fields of its route's request schema (TOOL_SCHEMAS): each
        argument's JSON schema is the field's own (type, limits, default, description), snake_case named; the
        values are validated once, by that schema, in the tool's body, so the tool answers the route's error
        codes."""
        schema, excluded = TOOL_SCHEMAS[name]
        arguments = tool_arguments(schema, excluded=excluded)

        async def tool(ctx: Context, **given: Any) -> CallToolResult:
            scope = given.pop("scope", None)
            payload = {arguments[arg].field: value for arg, value in given.items() if value is not None}
            return await run(ctx, name, {**payload, "scope": merged_scope(scope)})

        parameters = [inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=Context)]
        parameters += [
            inspect.Parameter(arg, inspect.Parameter.KEYWORD_ONLY, annotation=a.annotation, default=a.default)
            for arg, a in arguments.items()
        ]
        parameters.append(
            inspect.Parameter("scope", inspect.Parameter.KEYWORD_ONLY, annotation=ScopeParam, default=None)
        )
        tool.__signature__ = inspect.Signature(parameters, return_annotation=CallToolResult)  # type: ignore[attr-defined]
        tool.__annotations__ = {p.name: p.annotation for p in parameters} | {"return": CallToolResult}
        tool.__name__ = name
        server.tool(name=name, description=description)(tool)

    for name, description in TOOL_DESCRIPTIONS.items():
        register(name, description)

    return server
