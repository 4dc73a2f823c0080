"""SQL for row-level security on tables that hold workspace data, used by every app's migrations."""

from django.db import migrations

WORKSPACE_SETTING = "nullif(current_setting('app.workspace_id', true), '')::bigint"


def enable_workspace_rls(table: str) -> migrations.RunSQL:
    """ENABLE + FORCE RLS and one policy for reads and writes: an unset workspace sees and writes nothing."""
    policy = f"{table}_workspace_isolation"
    return migrations.RunSQL(
        sql=[
            f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY",
            f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY",
            # No scalar subquery around the setting: Citus refuses one in a policy on a distributed table.
            f"CREATE POLICY {policy} ON {table} USING (workspace_id = {WORKSPACE_SETTING}) "
            f"WITH CHECK (workspace_id = {WORKSPACE_SETTING})",
        ],
        reverse_sql=[
            f"DROP POLICY IF EXISTS {policy} ON {table}",
            f"ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY",
            f"ALTER TABLE {table} DISABLE ROW LEVEL SECURITY",
        ],
    )


def for_each_workspace_sql(statement: str) -> str:
    """A DO block that runs `statement` once per workspace, inside that workspace's RLS context: FORCE RLS
    applies to the owner running a migration too, so a data migration must visit the workspaces one by one.
    The statement names the workspace `ws`; the workspaces table has no RLS, so it says which ones there
    are."""
    return f"""
DO $$
DECLARE ws bigint;
BEGIN
    -- On Citus the workspace must reach the shards (a placeholder setting elsewhere).
    SET LOCAL citus.propagate_set_commands = 'local';
    FOR ws IN SELECT id FROM workspaces LOOP
        -- SET LOCAL rather than set_config(): on Citus only a SET reaches the workers.
        EXECUTE format('SET LOCAL app.workspace_id = %s', ws);
        {statement};
    END LOOP;
    PERFORM set_config('app.workspace_id', '', true);
END $$
"""
