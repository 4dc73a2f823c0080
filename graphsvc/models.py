"""One property graph per workspace: nodes, edges and memory ↔ node links. All workspace data."""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from pgvector.django import VectorField

from tenancy.models import Workspace, WorkspaceRow


class GraphNode(WorkspaceRow):
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, db_index=False, related_name="+")
    node_type = models.CharField(max_length=32)
    node_key = models.CharField(max_length=600)
    label = models.CharField(max_length=300)
    metadata = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    # Entity nodes (Zeph): node_key is the canonical (normalised) name, label the latest surface form.
    summary = models.TextField(null=True, blank=True)
    embedding = VectorField(null=True, blank=True)
    embedding_model = models.CharField(max_length=160, null=True, blank=True)
    first_seen_at = models.DateTimeField(null=True, blank=True)
    last_seen_at = models.DateTimeField(null=True, blank=True)
    mention_count = models.IntegerField(default=0, db_default=0)
    # How sure the graph is that this entity is one real thing, resolved right (graphsvc.entities
    # confidence_after); NULL on the nodes of the memory graph.
    confidence = models.FloatField(null=True, blank=True)
    # Set by eviction on an entity with no current fact unseen for the retention: kept with its history, out
    # of graph/entities lists and graph/stats counts; its next mention clears it.
    archived_at = models.DateTimeField(null=True, blank=True)
    # An entity's community is a row of GraphCommunityMember, not a column here (migration 0011).

    class Meta:
        db_table = "graph_nodes"
        constraints = [
            models.UniqueConstraint(
                fields=["workspace", "node_type", "node_key"], name="graph_nodes_unique_key"
            )
        ]
        # The few nodes with a vector (entities), by workspace and model: the exact nearest-entity scan of a
        # small workspace and the "has it any entity vectors" probe read this, never the memory nodes.
        indexes = [
            models.Index(
                fields=["workspace", "embedding_model"],
                name="graph_nodes_embedded",
                condition=Q(embedding__isnull=False),
            )
        ]

    @property
    def ref(self) -> str:
        return f"{self.node_type}:{self.node_key}"


class GraphEdge(WorkspaceRow):
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
        CONSOLIDATION = "consolidation"
        # The update detector (memories.updates) and a person resolving a conflict; see SupersessionDecision.
        HEURISTIC = "heuristic"

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, db_index=False, related_name="+")
    # Deterministic edges are per evidence memory (`m:<memory>:<type>:<from>:<to>`), relationship edges one
    # per directed pair and type (`r:<type>:<from>:<to>`); unique among edges that are not invalidated.
    edge_key = models.CharField(max_length=200)
    # The database's foreign keys to graph_nodes, and superseded_by's, are (workspace_id, x) ->
    # (workspace_id, id) (tenancy.citus_sql).
    from_node = models.ForeignKey(
        GraphNode, on_delete=models.CASCADE, related_name="+", db_index=False, db_constraint=False
    )
    to_node = models.ForeignKey(
        GraphNode, on_delete=models.CASCADE, related_name="+", db_index=False, db_constraint=False
    )
    # For entity facts this is the relation (a lowercased verb phrase).
    edge_type = models.CharField(max_length=128)
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
    # The fact that replaced this one (bi-temporal invalidation) and what the LLM said about the edge.
    # In the database a trigger clears the reference when the replacing edge is deleted (ON DELETE SET NULL
    # would null workspace_id too, part of the composite key).
    superseded_by = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        db_index=False,
        db_constraint=False,
    )
    metadata = models.JSONField(null=True, blank=True)

    class Meta:
        db_table = "graph_edges"
        constraints = [
            models.UniqueConstraint(
                fields=["workspace", "edge_key"],
                condition=Q(expired_at__isnull=True),
                name="graph_edges_active_key",
            )
        ]
        indexes = [
            models.Index(fields=["workspace", "from_node", "edge_type"], name="graph_edges_from"),
            models.Index(fields=["workspace", "to_node", "edge_type"], name="graph_edges_to"),
            models.Index(fields=["workspace", "evidence_memory_id"], name="graph_edges_evidence"),
            models.Index(
                fields=["workspace", "expires_at"],
                name="graph_edges_expiry",
                condition=Q(expires_at__isnull=False),
            ),
        ]


class GraphFactEvidence(WorkspaceRow):
    """One memory that supports an entity fact. A fact lives while it has evidence: forgetting a memory
    removes its support only, and the fact ends when none is left. The memory's end user is kept here so a
    caller sees a fact only when at least one of its memories is theirs or shared."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, db_index=False, related_name="+")
    # The database follows this key (ON DELETE CASCADE, added by the migration): facts are deleted in raw SQL.
    edge = models.ForeignKey(
        GraphEdge, on_delete=models.CASCADE, related_name="+", db_index=False, db_constraint=False
    )
    memory_id = models.UUIDField()
    # The supporting memory's userId (None: a shared memory).
    user_id = models.CharField(max_length=120, null=True, blank=True)
    evidence_text = models.TextField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "graph_fact_evidence"
        constraints = [
            models.UniqueConstraint(
                fields=["workspace", "edge", "memory_id"], name="graph_fact_evidence_unique"
            )
        ]
        indexes = [models.Index(fields=["workspace", "memory_id"], name="graph_fact_evidence_memory")]


class MemoryNodeLink(WorkspaceRow):
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
    node = models.ForeignKey(
        GraphNode, on_delete=models.CASCADE, related_name="+", db_index=False, db_constraint=False
    )
    role = models.CharField(max_length=16, choices=Role.choices)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "memory_node_links"
        constraints = [
            models.UniqueConstraint(
                fields=["workspace", "memory_id", "node", "role"], name="memory_node_links_unique"
            )
        ]
        # (node, id): expansion reads the newest links of a hub node without sorting all of them.
        indexes = [models.Index(fields=["workspace", "node", "id"], name="memory_node_links_node_id")]


ENTITY_TYPES = ("person", "tool", "concept", "project", "language", "file", "config", "organization", "event")


class GraphEntityAlias(WorkspaceRow):
    """A surface form (normalised) that resolves to an entity node."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, db_index=False, related_name="+")
    node = models.ForeignKey(
        GraphNode, on_delete=models.CASCADE, related_name="aliases", db_index=False, db_constraint=False
    )
    alias = models.CharField(max_length=600)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "graph_entity_aliases"
        constraints = [
            models.UniqueConstraint(fields=["workspace", "alias", "node"], name="graph_entity_aliases_unique")
        ]
        indexes = [models.Index(fields=["workspace", "node"], name="graph_entity_aliases_node")]


class GraphEntityTerm(WorkspaceRow):
    """A word of an entity's name, alias (weight 1) or summary (weight 2), kept by database triggers
    (migration 0007). Seed search looks words up here by b-tree equality and prefix range: under row-level
    security only leakproof operators reach an index, and text comparison is leakproof where `@@` and trigram
    `%` are not."""

    pk = models.CompositePrimaryKey("workspace", "term", "node", "weight")
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, db_index=False, related_name="+")
    # The constraint (ON DELETE CASCADE in the database: entities are also deleted in raw SQL) is migration
    # 0007's.
    node = models.ForeignKey(
        GraphNode, on_delete=models.CASCADE, db_index=False, db_constraint=False, related_name="+"
    )
    term = models.CharField(max_length=64, db_collation="C")
    weight = models.SmallIntegerField()

    class Meta:
        db_table = "graph_entity_terms"
        indexes = [models.Index(fields=["workspace", "node"], name="graph_entity_terms_node")]


class GraphCommunity(WorkspaceRow):
    """A group of entities found by label propagation; the fingerprint tells whether membership changed."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, db_index=False, related_name="+")
    name = models.CharField(max_length=300)
    summary = models.TextField(default="", blank=True)
    fingerprint = models.CharField(max_length=64)
    # The mean of the members' entity vectors of centroid_model (any dimension, like graph_nodes.embedding),
    # recomputed when summaries are: context/get matches a query against it.
    centroid = VectorField(null=True, blank=True)
    centroid_model = models.CharField(max_length=160, null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "graph_communities"
        constraints = [
            models.UniqueConstraint(fields=["workspace", "name"], name="graph_communities_unique_name")
        ]
        # The communities context/get may quote (those with a summary): found without reading the others.
        indexes = [
            models.Index(fields=["workspace"], name="graph_communities_summarised", condition=~Q(summary=""))
        ]


class GraphCommunityMember(WorkspaceRow):
    """Which community an entity is in (at most one). A narrow table of its own: a community run that regroups
    every entity writes 100k three-integer rows here instead of updating 100k wide graph_nodes rows (each
    update rewrote the row and added entries to all of graph_nodes' indexes, two of them GIN).

    No foreign-key constraints in the database: a run inserts up to every entity in one statement, and a
    per-row RI check (locking each entity's and community's row) cost more than the insert. Deleting an entity
    or a community deletes its memberships through statement-level triggers (migration 0011), which the
    raw-SQL deletes fire as well; on_delete covers ORM deletes."""

    pk = models.CompositePrimaryKey("workspace", "node")
    workspace = models.ForeignKey(
        Workspace, on_delete=models.CASCADE, db_index=False, db_constraint=False, related_name="+"
    )
    node = models.ForeignKey(
        GraphNode, on_delete=models.CASCADE, db_index=False, db_constraint=False, related_name="+"
    )
    community = models.ForeignKey(
        GraphCommunity, on_delete=models.CASCADE, db_index=False, db_constraint=False, related_name="+"
    )

    class Meta:
        db_table = "graph_community_members"
        indexes = [models.Index(fields=["community"], name="graph_community_members_cid")]


class GraphEntityMerge(WorkspaceRow):
    """One merge or split of entities, kept as history and as what undoing a merge needs.

    merge: `merged_id` (gone) was folded into `survivor_id`; `snapshot` holds the merged entity's row, its
    aliases and mentions, and every fact the merge moved, deduplicated or ended, with their values before.
    split: `merged_id` is the new entity that took aliases and facts from `survivor_id`. Neither id is a
    foreign key: the record outlives both entities (eviction, a later merge)."""

    class Kind(models.TextChoices):
        MERGE = "merge"
        SPLIT = "split"

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, db_index=False, related_name="+")
    kind = models.CharField(max_length=8, choices=Kind.choices)
    survivor_id = models.BigIntegerField()
    merged_id = models.BigIntegerField()
    merged_name = models.CharField(max_length=300)
    snapshot = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)
    undone_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "graph_entity_merges"
        indexes = [
            models.Index(fields=["workspace", "survivor_id"], name="graph_entity_merges_survivor"),
            models.Index(fields=["workspace", "merged_id"], name="graph_entity_merges_merged"),
        ]


class GraphSettings(WorkspaceRow):
    """Per-workspace graph settings (one row, created on first write; absent = defaults)."""

    workspace = models.OneToOneField(Workspace, on_delete=models.CASCADE, primary_key=True, related_name="+")
    # Tokens (prompt + completion) per UTC day for LLM extraction; NULL = no limit.
    llm_daily_token_budget = models.BigIntegerField(null=True, blank=True)
    # Fact recall: "bfs" or "spreading" (spreading activation), used when a request does not choose.
    recall_strategy = models.CharField(max_length=16, default="bfs", db_default="bfs")
    # Confidence decay per day since a fact was last observed; NULL = GRAPH_DECAY_RATE. decay_rates: per
    # relation.
    decay_rate = models.FloatField(null=True, blank=True)
    decay_rates = models.JSONField(default=dict, db_default={})
    # Eviction keeps at most this many entities (fewest active edges, then least recently seen, go first).
    max_entities = models.IntegerField(null=True, blank=True)
    # What the last eviction removed, for graph/status.
    last_eviction = models.JSONField(null=True, blank=True)
    communities_run_at = models.DateTimeField(null=True, blank=True)
    retrieval_decay_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "graph_settings"


class LlmUsage(WorkspaceRow):
    """One row per LLM call: what it cost and whether it worked, per workspace, memory and job."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, db_index=False, related_name="+")
    memory_id = models.UUIDField(null=True, blank=True)
    job_id = models.BigIntegerField(null=True, blank=True)
    purpose = models.CharField(max_length=32)
    model = models.CharField(max_length=160)
    prompt_tokens = models.IntegerField(default=0)
    completion_tokens = models.IntegerField(default=0)
    cost_usd = models.FloatField(default=0.0)
    ok = models.BooleanField(default=True)
    error_code = models.CharField(max_length=64, null=True, blank=True)
    duration_ms = models.IntegerField(default=0)
    created_at = models.DateTimeField()

    class Meta:
        db_table = "llm_usage"
        indexes = [
            models.Index(fields=["workspace", "created_at"], name="llm_usage_ws_created"),
            models.Index(
                fields=["workspace", "job_id"], name="llm_usage_ws_job", condition=Q(job_id__isnull=False)
            ),
        ]
