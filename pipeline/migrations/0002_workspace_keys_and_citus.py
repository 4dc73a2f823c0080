"""The last steps of one schema for a single PostgreSQL and Citus.

background_jobs' primary key carries workspace_id like every workspace table's (tenancy.citus_sql). The
row-level-security policies compare workspace_id with the setting directly instead of through a scalar subquery,
which Citus refuses in a policy on a distributed table (the setting is STABLE, so an index on workspace_id still
serves it). Then, only on a database with the citus extension, the tables are distributed: `workspaces` a
reference table, every workspace table by workspace_id colocated with memories, the mapping function delegated
by its workspace (tenancy.citus_sql.distribute_workspace_tables). Existing rows are copied into the shards.
"""

from django.db import migrations

from tenancy.citus_sql import distribute_workspace_tables, undistribute_workspace_tables, workspace_primary_key
from tenancy.rls_sql import WORKSPACE_SETTING

_POLICIES = """
DO $$
DECLARE t text;
BEGIN
    FOR t IN SELECT tablename FROM pg_policies
             WHERE schemaname = 'public' AND policyname = tablename || '_workspace_isolation' LOOP
        EXECUTE format('ALTER POLICY %I ON %I USING ({check}) WITH CHECK ({check})',
                       t || '_workspace_isolation', t);
    END LOOP;
END $$
"""


class Migration(migrations.Migration):
    dependencies = [
        ("pipeline", "0001_background_jobs"),
        ("memories", "0014_workspace_keys"),
        ("graphsvc", "0020_workspace_keys"),
        ("rollout", "0003_workspace_keys"),
    ]

    operations = [
        workspace_primary_key("background_jobs"),
        migrations.RunSQL(
            sql=_POLICIES.format(check=f"workspace_id = {WORKSPACE_SETTING}".replace("'", "''")),
            reverse_sql=_POLICIES.format(check=f"workspace_id = (SELECT {WORKSPACE_SETTING})".replace("'", "''")),
        ),
        migrations.RunPython(distribute_workspace_tables, undistribute_workspace_tables),
    ]
