"""Background jobs (workspace import and export, and later kinds), one row per job with RLS like every table of
workspace data, and the hourly sweep that deletes export and upload files past EXPORT_RETENTION_HOURS."""

import uuid
from datetime import timedelta

import django.db.models.deletion
from django.db import migrations, models
from django.utils import timezone

from tenancy.rls_sql import enable_workspace_rls

SWEEP_SCHEDULE_NAME = "background-jobs-sweep"
SWEEP_TASK = "pipeline.tasks.background_jobs_sweep"


def sweep_schedule_create(apps, schema_editor):
    Schedule = apps.get_model("django_q", "Schedule")
    if not Schedule.objects.using(schema_editor.connection.alias).filter(name=SWEEP_SCHEDULE_NAME).exists():
        Schedule.objects.using(schema_editor.connection.alias).create(
            name=SWEEP_SCHEDULE_NAME,
            func=SWEEP_TASK,
            schedule_type="H",
            repeats=-1,
            next_run=timezone.now() + timedelta(hours=1),
        )


def sweep_schedule_delete(apps, schema_editor):
    Schedule = apps.get_model("django_q", "Schedule")
    Schedule.objects.using(schema_editor.connection.alias).filter(name=SWEEP_SCHEDULE_NAME).delete()


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('tenancy', '0003_key_scope_pin_invitations'),
        ('django_q', '0019_alter_task_options_alter_ormq_key_alter_ormq_lock_and_more'),
    ]

    operations = [
        migrations.CreateModel(
            name='BackgroundJob',
            fields=[
                ('id', models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False)),
                ('kind', models.CharField(max_length=32)),
                ('status', models.CharField(choices=[('queued', 'Queued'), ('running', 'Running'), ('succeeded', 'Succeeded'), ('failed', 'Failed')], default='queued', max_length=16)),
                ('phase', models.CharField(blank=True, default='', max_length=32)),
                ('done', models.BigIntegerField(default=0)),
                ('total', models.BigIntegerField(blank=True, null=True)),
                ('params', models.JSONField(blank=True, default=dict)),
                ('result', models.JSONField(blank=True, null=True)),
                ('error_code', models.CharField(blank=True, max_length=64, null=True)),
                ('error_class', models.CharField(blank=True, max_length=64, null=True)),
                ('error_details', models.JSONField(blank=True, null=True)),
                ('attempts', models.SmallIntegerField(default=0)),
                ('created_by', models.CharField(blank=True, default='', max_length=120)),
                ('created_at', models.DateTimeField()),
                ('started_at', models.DateTimeField(blank=True, null=True)),
                ('finished_at', models.DateTimeField(blank=True, null=True)),
                ('updated_at', models.DateTimeField()),
                ('workspace', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='tenancy.workspace')),
            ],
            options={
                'db_table': 'background_jobs',
                'indexes': [models.Index(fields=['workspace', '-created_at'], name='background_jobs_recent')],
            },
        ),
        enable_workspace_rls("background_jobs"),
        migrations.RunPython(sweep_schedule_create, sweep_schedule_delete),
    ]
