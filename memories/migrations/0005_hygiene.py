# Memory hygiene: importance, superseded_by, settings, admission counters, consolidation runs.

import django.db.models.deletion
import uuid
from django.db import migrations, models

from tenancy.rls_sql import enable_workspace_rls


class Migration(migrations.Migration):

    dependencies = [
        ('memories', '0004_pipeline_rls'),
        ('tenancy', '0002_extensions_and_rate_limits'),
    ]

    operations = [
        migrations.AddField(
            model_name='memory',
            name='importance',
            field=models.FloatField(default=0.5),
        ),
        migrations.AddField(
            model_name='memory',
            name='superseded_by',
            field=models.UUIDField(blank=True, null=True),
        ),
        migrations.CreateModel(
            name='MemorySettings',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('redact_credentials', models.BooleanField(default=True)),
                ('scrub_at_rest', models.BooleanField(default=False)),
                ('admission_enabled', models.BooleanField(default=False)),
                ('admission_threshold', models.FloatField(blank=True, null=True)),
                ('importance_weight', models.FloatField(blank=True, null=True)),
                ('updated_at', models.DateTimeField()),
                ('workspace', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='tenancy.workspace')),
            ],
            options={
                'db_table': 'memory_settings',
            },
        ),
        migrations.CreateModel(
            name='AdmissionCount',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('admitted', models.BooleanField()),
                ('reason', models.CharField(max_length=32)),
                ('count', models.BigIntegerField(default=0)),
                ('last_at', models.DateTimeField()),
                ('workspace', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='tenancy.workspace')),
            ],
            options={
                'db_table': 'admission_counts',
                'constraints': [models.UniqueConstraint(fields=('workspace', 'admitted', 'reason'), name='admission_counts_unique')],
            },
        ),
        migrations.CreateModel(
            name='ConsolidationRun',
            fields=[
                ('id', models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False)),
                ('user_id', models.CharField(blank=True, max_length=120, null=True)),
                ('project_id', models.CharField(blank=True, max_length=240, null=True)),
                ('input_count', models.IntegerField()),
                ('merged_count', models.IntegerField()),
                ('superseded_count', models.IntegerField()),
                ('conflicted_count', models.IntegerField()),
                ('model', models.CharField(blank=True, max_length=160, null=True)),
                ('metadata', models.JSONField(blank=True, null=True)),
                ('created_at', models.DateTimeField()),
                ('workspace', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='tenancy.workspace')),
            ],
            options={
                'db_table': 'consolidation_runs',
                'indexes': [models.Index(fields=['workspace', '-created_at'], name='consolidation_runs_recent')],
            },
        ),
        # The new tables hold workspace data: same row-level security as every other tenant table.
        enable_workspace_rls("memory_settings"),
        enable_workspace_rls("admission_counts"),
        enable_workspace_rls("consolidation_runs"),
    ]
