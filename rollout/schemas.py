"""Schemas of the graph/* status routes."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from ninja import Schema
from pydantic import Field

from config.schemas import ScopeIn, StrictIn, scope_field


class StatusIn(StrictIn):
    topNodesLimit: int = Field(10, ge=1, le=50, description="How many hub nodes to list, 1–50 (default 10).")
    scope: ScopeIn = scope_field()


class CountsOut(Schema):
    nodes: int = Field(description="Graph nodes in the workspace.")
    edges: int = Field(description="All edges, including expired and invalidated ones.")
    memoryLinks: int = Field(description="Memory ↔ node links.")
    activeEdges: int = Field(description="Edges neither expired nor invalidated.")
    expiredEdges: int = Field(description="Edges past expires_at or invalidated (kept until eviction).")
    orphanNodes: int = Field(description="Nodes with no link and no active edge.")


class TopNodeOut(Schema):
    nodeType: str = Field(description="memory, memory_type, repo, user, category, topic, condition or an entity type.")
    nodeKey: str = Field(description="Key of the node within its type.")
    label: str = Field(description="Display label.")
    memoryLinks: int = Field(description="Memories linked to the node.")
    outboundEdges: int = Field(description="Active edges from the node.")
    inboundEdges: int = Field(description="Active edges to the node.")
    degree: int = Field(description="Sum of the three.")


class ErrorItemOut(Schema):
    code: str = Field(description="Error code, e.g. EMBEDDING_FAILED or GRAPH_MAPPING_SYNC_FAILED.")
    message: str | None = Field(description="What failed.")
    source: str = Field(description="Where: mapping, pipeline:embed, pipeline:similarity, alarm.")
    memoryId: str | None = Field(description="The memory concerned, if any.")
    timestamp: datetime = Field(description="When.")


class PipelineCountsOut(Schema):
    queued: int = Field(description="Jobs waiting (including retries waiting for their backoff).")
    processing: int = Field(description="Jobs a worker is running.")
    succeeded: int = Field(description="Jobs done.")
    deadLetter: int = Field(description="Jobs that failed 5 times; see recentErrors.")
    oldestQueuedAgeSeconds: float | None = Field(description="Age of the oldest queued job; null when none.")


class VectorsOut(Schema):
    model: str = Field(description="Embedding model searches use.")
    vectors: int = Field(description="Stored vectors of that model in the workspace.")
    accessPath: Literal["exact", "hnsw"] = Field(description="exact scan (small workspaces) or an HNSW index.")


class StatusOut(Schema):
    health: Literal["ok", "degraded"] = Field(description="degraded when jobs are dead-lettered or errors are recent.")
    counts: CountsOut = Field(description="Graph size.")
    topConnectedNodes: list[TopNodeOut] = Field(description="Hub nodes, highest degree first.")
    pipeline: PipelineCountsOut = Field(description="Background job counts.")
    vectors: VectorsOut = Field(description="Vector search state.")
    recentErrors: list[ErrorItemOut] = Field(description="Latest failures, newest first (at most 20).")
    sampledAt: datetime = Field(description="When these numbers were read.")


class StatusQuery(Schema):
    topNodesLimit: int = Field(10, ge=1, le=50, description="How many hub nodes to list, 1–50 (default 10).")
    tenantId: str | None = Field(None, max_length=120, description="As scope.tenantId.")
    userId: str | None = Field(None, max_length=120, description="As scope.userId.")
    projectId: str | None = Field(None, max_length=240, description="As scope.projectId.")

    def scope(self) -> ScopeIn:
        return ScopeIn(tenantId=self.tenantId, userId=self.userId, projectId=self.projectId)
