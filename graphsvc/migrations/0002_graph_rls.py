from django.db import migrations

from tenancy.rls_sql import enable_workspace_rls


class Migration(migrations.Migration):
    dependencies = [("graphsvc", "0001_initial"), ("tenancy", "0002_extensions_and_rate_limits")]

    operations = [
        enable_workspace_rls("graph_nodes"),
        enable_workspace_rls("graph_edges"),
        enable_workspace_rls("memory_node_links"),
    ]
