from django.db import migrations

from tenancy.rls_sql import enable_workspace_rls


class Migration(migrations.Migration):
    dependencies = [("rollout", "0001_initial"), ("tenancy", "0002_extensions_and_rate_limits")]

    operations = [
        enable_workspace_rls("rollout_configs"),
        enable_workspace_rls("retrieval_policies"),
        enable_workspace_rls("retrieval_metrics"),
    ]
