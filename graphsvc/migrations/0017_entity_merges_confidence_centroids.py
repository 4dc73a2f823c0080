"""Entities can be fixed by hand and say how sure they are: the history of merges and splits (RLS like every
graph table), a confidence per entity (existing ones from how often they were mentioned, as the resolver
would have moved it), a centroid per community for context/get, and a partial index over the nodes that
carry a vector."""

import django.db.models.deletion
import pgvector.django.vector
from django.db import migrations, models

from tenancy.rls_sql import enable_workspace_rls, for_each_workspace_sql

ENTITY_TYPES = "('person','tool','concept','project','language','file','config','organization','event')"

# 0.5 for a first mention, a fifth of the way to 1 for each further one (graphsvc.entities confidence_after).
CONFIDENCE_BACKFILL = f"""
UPDATE graph_nodes SET confidence = round((1 - 0.5 * power(0.8, greatest(mention_count - 1, 0)))::numeric, 4)
WHERE workspace_id = ws AND node_type IN {ENTITY_TYPES} AND confidence IS NULL
"""


class Migration(migrations.Migration):

    dependencies = [
        ('graphsvc', '0016_fact_evidence'),
        ('tenancy', '0003_key_scope_pin_invitations'),
    ]

    operations = [
        migrations.CreateModel(
            name='GraphEntityMerge',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('kind', models.CharField(choices=[('merge', 'Merge'), ('split', 'Split')], max_length=8)),
                ('survivor_id', models.BigIntegerField()),
                ('merged_id', models.BigIntegerField()),
                ('merged_name', models.CharField(max_length=300)),
                ('snapshot', models.JSONField(default=dict)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('undone_at', models.DateTimeField(blank=True, null=True)),
            ],
            options={
                'db_table': 'graph_entity_merges',
            },
        ),
        migrations.AddField(
            model_name='graphcommunity',
            name='centroid',
            field=pgvector.django.vector.VectorField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='graphcommunity',
            name='centroid_model',
            field=models.CharField(blank=True, max_length=160, null=True),
        ),
        migrations.AddField(
            model_name='graphnode',
            name='confidence',
            field=models.FloatField(blank=True, null=True),
        ),
        migrations.AddIndex(
            model_name='graphnode',
            index=models.Index(condition=models.Q(('embedding__isnull', False)), fields=['workspace', 'embedding_model'], name='graph_nodes_embedded'),
        ),
        migrations.AddField(
            model_name='graphentitymerge',
            name='workspace',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='tenancy.workspace'),
        ),
        migrations.AddIndex(
            model_name='graphentitymerge',
            index=models.Index(fields=['workspace', 'survivor_id'], name='graph_entity_merges_survivor'),
        ),
        migrations.AddIndex(
            model_name='graphentitymerge',
            index=models.Index(fields=['workspace', 'merged_id'], name='graph_entity_merges_merged'),
        ),
        migrations.AddIndex(
            model_name='graphcommunity',
            index=models.Index(condition=models.Q(('summary', ''), _negated=True), fields=['workspace'], name='graph_communities_summarised'),
        ),
        enable_workspace_rls("graph_entity_merges"),
        migrations.RunSQL(sql=for_each_workspace_sql(CONFIDENCE_BACKFILL), reverse_sql=migrations.RunSQL.noop),
    ]
