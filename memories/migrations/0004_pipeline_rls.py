from django.db import migrations

from tenancy.rls_sql import enable_workspace_rls


class Migration(migrations.Migration):
    dependencies = [("memories", "0003_pipeline")]

    operations = [
        enable_workspace_rls("memory_embeddings"),
        enable_workspace_rls("pipeline_jobs"),
        enable_workspace_rls("pipeline_errors"),
    ]
