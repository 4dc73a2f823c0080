from django.db import migrations

from tenancy.rls_sql import enable_workspace_rls


class Migration(migrations.Migration):
    dependencies = [("memories", "0001_initial"), ("tenancy", "0002_extensions_and_rate_limits")]

    operations = [
        migrations.RunSQL(
            """
            CREATE FUNCTION cairn_array_text(text[]) RETURNS text
                LANGUAGE sql IMMUTABLE PARALLEL SAFE
                AS $$ SELECT coalesce(array_to_string($1, ' '), '') $$
            """,
            "DROP FUNCTION cairn_array_text(text[])",
        ),
        migrations.RunSQL(
            """
            ALTER TABLE memories ADD COLUMN search_tsv tsvector GENERATED ALWAYS AS (
                setweight(to_tsvector('english'::regconfig, content), 'A')
                || setweight(to_tsvector('english'::regconfig, cairn_array_text(tags)), 'B')
                || setweight(to_tsvector('english'::regconfig, coalesce(category, '')), 'B')
            ) STORED
            """,
            "ALTER TABLE memories DROP COLUMN search_tsv",
        ),
        migrations.RunSQL(
            "CREATE INDEX memories_search_tsv ON memories USING gin (search_tsv)",
            "DROP INDEX memories_search_tsv",
        ),
        enable_workspace_rls("memories"),
        enable_workspace_rls("idempotency_records"),
    ]
