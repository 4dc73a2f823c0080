"""Every memory that supports an entity fact, with RLS like the rest of the graph. Existing facts get their one
recorded source as evidence (with that memory's userId), and the edge foreign key is followed by the database
itself, because facts are deleted in raw SQL."""

import django.db.models.deletion
from django.db import migrations, models

from tenancy.rls_sql import enable_workspace_rls, for_each_workspace_sql

BACKFILL = """
INSERT INTO graph_fact_evidence (workspace_id, edge_id, memory_id, user_id, evidence_text, created_at)
SELECT e.workspace_id, e.id, e.evidence_memory_id, m.user_id, e.evidence_text, e.created_at
FROM graph_edges e LEFT JOIN memories m ON m.workspace_id = e.workspace_id AND m.id = e.evidence_memory_id
WHERE e.workspace_id = ws AND e.origin = 'llm_entity' AND e.evidence_memory_id IS NOT NULL
ON CONFLICT DO NOTHING
"""

CASCADE = """
ALTER TABLE graph_fact_evidence ADD CONSTRAINT graph_fact_evidence_edge_fk FOREIGN KEY (edge_id)
    REFERENCES graph_edges(id) ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED
"""


class Migration(migrations.Migration):

    dependencies = [
        ('graphsvc', '0015_mapping_insert_fresh_function'),
        ('tenancy', '0003_key_scope_pin_invitations'),
    ]

    operations = [
        migrations.CreateModel(
            name='GraphFactEvidence',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('memory_id', models.UUIDField()),
                ('user_id', models.CharField(blank=True, max_length=120, null=True)),
                ('evidence_text', models.TextField(blank=True, null=True)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('edge', models.ForeignKey(db_constraint=False, db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='graphsvc.graphedge')),
                ('workspace', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='tenancy.workspace')),
            ],
            options={
                'db_table': 'graph_fact_evidence',
                'indexes': [models.Index(fields=['workspace', 'memory_id'], name='graph_fact_evidence_memory')],
                'constraints': [models.UniqueConstraint(fields=('workspace', 'edge', 'memory_id'), name='graph_fact_evidence_unique')],
            },
        ),
        enable_workspace_rls("graph_fact_evidence"),
        migrations.RunSQL(
            sql=CASCADE, reverse_sql="ALTER TABLE graph_fact_evidence DROP CONSTRAINT graph_fact_evidence_edge_fk"
        ),
        migrations.RunSQL(sql=for_each_workspace_sql(BACKFILL), reverse_sql=migrations.RunSQL.noop),
    ]
