"""One property graph per workspace (DESIGN.md): nodes, edges and memory ↔ node links. All workspace data."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from tenancy.models import Workspace


class GraphNode(models.Model):
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, db_index=False, related_name="+")
    node_type = models.CharField(max_length=32)
    node_key = models.CharField(max_length=600)
    label = models.CharField(max_length=300)
    metadata = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "graph_nodes"
        constraints = [
            models.UniqueConstraint(fields=["workspace", "node_type", "node_key"], name="graph_nodes_unique_key")
        ]

    @property
    def ref(self) -> str:
        return f"{self.node_type}:{self.node_key}"


class GraphEdge(models.Model):
    class EdgeClass(models.TextChoices):
        SEMANTIC = "semantic"
        TEMPORAL = "temporal"
        CAUSAL = "causal"
        ENTITY = "entity"

    class Origin(models.TextChoices):
        MAPPING = "mapping"
        SIMILARITY = "similarity"
        LLM_PAIRWISE = "llm_pairwise"
        LLM_SEMANTIC = "llm_semantic"
        LLM_ENTITY = "llm_entity"
        MANUAL = "manual"

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, db_index=False, related_name="+")
    # Deterministic edges are per evidence memory (`m:<memory>:<type>:<from>:<to>`), relationship edges one per
    # directed pair and type (`r:<type>:<from>:<to>`); unique among edges that are not invalidated.
    edge_key = models.CharField(max_length=200)
    from_node = models.ForeignKey(GraphNode, on_delete=models.CASCADE, related_name="+", db_index=False)
    to_node = models.ForeignKey(GraphNode, on_delete=models.CASCADE, related_name="+", db_index=False)
    edge_type = models.CharField(max_length=64)
    edge_class = models.CharField(max_length=16, choices=EdgeClass.choices, default=EdgeClass.SEMANTIC)
    weight = models.FloatField(default=1.0)
    confidence = models.FloatField(default=1.0)
    fact = models.TextField(null=True, blank=True)
    evidence_memory_id = models.UUIDField(null=True, blank=True)
    evidence_text = models.TextField(null=True, blank=True)
    origin = models.CharField(max_length=16, choices=Origin.choices, default=Origin.MAPPING)
    valid_from = models.DateTimeField(null=True, blank=True)
    valid_to = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    expired_at = models.DateTimeField(null=True, blank=True)
    # Working-layer edges expire with their memory; NULL = permanent.
    expires_at = models.DateTimeField(null=True, blank=True)
    last_observed_at = models.DateTimeField(null=True, blank=True)
    retrieval_count = models.IntegerField(default=0)
    last_retrieved_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "graph_edges"
        constraints = [
            models.UniqueConstraint(
                fields=["workspace", "edge_key"], condition=Q(expired_at__isnull=True), name="graph_edges_active_key"
            )
        ]
        indexes = [
            models.Index(fields=["workspace", "from_node", "edge_type"], name="graph_edges_from"),
            models.Index(fields=["workspace", "to_node", "edge_type"], name="graph_edges_to"),
            models.Index(fields=["workspace", "evidence_memory_id"], name="graph_edges_evidence"),
            models.Index(fields=["workspace", "expires_at"], name="graph_edges_expiry",
                         condition=Q(expires_at__isnull=False)),
        ]


class MemoryNodeLink(models.Model):
    class Role(models.TextChoices):
        SELF = "self"
        TYPE = "type"
        SCOPE = "scope"
        SUBJECT = "subject"
        CATEGORY = "category"
        TAG = "tag"
        MENTIONS = "mentions"

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, db_index=False, related_name="+")
    memory_id = models.UUIDField()
    node = models.ForeignKey(GraphNode, on_delete=models.CASCADE, related_name="+", db_index=False)
    role = models.CharField(max_length=16, choices=Role.choices)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "memory_node_links"
        constraints = [
            models.UniqueConstraint(fields=["workspace", "memory_id", "node", "role"], name="memory_node_links_unique")
        ]
        # (node, id): expansion reads the newest links of a hub node without sorting all of them.
        indexes = [models.Index(fields=["workspace", "node", "id"], name="memory_node_links_node_id")]
