"""Every key of the memories tables carries workspace_id (tenancy.citus_sql): primary keys (id, workspace_id),
the per-memory unique constraints and the foreign keys to memories by (workspace_id, memory_id). The postings
triggers delete by (workspace_id, memory_id), the memory's own key. The same schema serves a single PostgreSQL
and Citus, where these tables are distributed by workspace_id."""

import django.db.models.deletion
from django.db import migrations, models

from tenancy.citus_sql import workspace_foreign_key, workspace_primary_key

LEXEME_TRIGGERS_SQL = """
CREATE OR REPLACE FUNCTION memory_lexemes_sync() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        IF NEW.search_tsv IS NOT DISTINCT FROM OLD.search_tsv THEN
            RETURN NULL;
        END IF;
        DELETE FROM memory_lexemes WHERE workspace_id = OLD.workspace_id AND memory_id = OLD.id;
    END IF;
    INSERT INTO memory_lexemes (workspace_id, memory_id, lexeme, tf, doc_len)
    SELECT NEW.workspace_id, NEW.id, t.lexeme,
           coalesce((SELECT sum(CASE w WHEN 'A' THEN 1.0 ELSE 0.5 END) FROM unnest(t.weights) w), 1.0),
           greatest(1, length(NEW.search_tsv))
    FROM unnest(NEW.search_tsv) t;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION memory_lexemes_drop() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM memory_lexemes WHERE workspace_id = OLD.workspace_id AND memory_id = OLD.id;
    RETURN NULL;
END
$$;
"""

LEXEME_TRIGGERS_REVERSE_SQL = """
CREATE OR REPLACE FUNCTION memory_lexemes_sync() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        IF NEW.search_tsv IS NOT DISTINCT FROM OLD.search_tsv THEN
            RETURN NULL;
        END IF;
        DELETE FROM memory_lexemes WHERE memory_id = OLD.id;
    END IF;
    INSERT INTO memory_lexemes (workspace_id, memory_id, lexeme, tf, doc_len)
    SELECT NEW.workspace_id, NEW.id, t.lexeme,
           coalesce((SELECT sum(CASE w WHEN 'A' THEN 1.0 ELSE 0.5 END) FROM unnest(t.weights) w), 1.0),
           greatest(1, length(NEW.search_tsv))
    FROM unnest(NEW.search_tsv) t;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION memory_lexemes_drop() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM memory_lexemes WHERE memory_id = OLD.id;
    RETURN NULL;
END
$$;
"""


class Migration(migrations.Migration):
    dependencies = [
        ("memories", "0013_supersession_decisions"),
        ("tenancy", "0003_key_scope_pin_invitations"),
    ]

    operations = [
        # The single-column foreign keys to memories go first: memories' primary key cannot change under them.
        migrations.AlterField(
            model_name="memoryembedding",
            name="memory",
            field=models.ForeignKey(
                db_constraint=False,
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="embeddings",
                to="memories.memory",
            ),
        ),
        migrations.AlterField(
            model_name="pipelinejob",
            name="memory",
            field=models.ForeignKey(
                db_constraint=False,
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="jobs",
                to="memories.memory",
            ),
        ),
        migrations.AlterField(
            model_name="sessionsnapshot",
            name="session",
            field=models.ForeignKey(
                db_constraint=False,
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="memories.memorysession",
            ),
        ),
        migrations.RemoveConstraint(model_name="memoryembedding", name="memory_embeddings_unique"),
        migrations.AddConstraint(
            model_name="memoryembedding",
            constraint=models.UniqueConstraint(
                fields=("workspace", "memory", "model"), name="memory_embeddings_unique"
            ),
        ),
        migrations.RemoveConstraint(model_name="pipelinejob", name="pipeline_jobs_unique"),
        migrations.AddConstraint(
            model_name="pipelinejob",
            constraint=models.UniqueConstraint(fields=("workspace", "memory", "kind"), name="pipeline_jobs_unique"),
        ),
        workspace_primary_key("memories"),
        workspace_primary_key("idempotency_records"),
        workspace_primary_key("memory_embeddings"),
        workspace_primary_key("pipeline_jobs"),
        workspace_primary_key("pipeline_errors"),
        workspace_primary_key("memory_settings"),
        workspace_primary_key("admission_counts"),
        workspace_primary_key("consolidation_runs"),
        workspace_primary_key("memory_sessions"),
        workspace_primary_key("session_snapshots"),
        workspace_primary_key("skill_files"),
        workspace_primary_key("memory_supersessions"),
        migrations.RunSQL(
            sql="ALTER TABLE memory_lexemes DROP CONSTRAINT memory_lexemes_pkey, "
            "ADD CONSTRAINT memory_lexemes_pkey PRIMARY KEY (workspace_id, memory_id, lexeme)",
            reverse_sql="ALTER TABLE memory_lexemes DROP CONSTRAINT memory_lexemes_pkey, "
            "ADD CONSTRAINT memory_lexemes_pkey PRIMARY KEY (memory_id, lexeme)",
        ),
        workspace_foreign_key(
            "memory_embeddings", "memory_id", references="memories", name="memory_embeddings_memory_fk"
        ),
        workspace_foreign_key("pipeline_jobs", "memory_id", references="memories", name="pipeline_jobs_memory_fk"),
        workspace_foreign_key(
            "session_snapshots", "session_id", references="memory_sessions", name="session_snapshots_session_fk"
        ),
        migrations.RunSQL(sql=LEXEME_TRIGGERS_SQL, reverse_sql=LEXEME_TRIGGERS_REVERSE_SQL),
    ]
