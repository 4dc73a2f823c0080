"""retrieval_metrics' primary key carries workspace_id (tenancy.citus_sql), like every workspace table's."""

from django.db import migrations

from tenancy.citus_sql import workspace_primary_key


class Migration(migrations.Migration):
    dependencies = [("rollout", "0002_rollout_rls")]

    operations = [workspace_primary_key("retrieval_metrics")]
