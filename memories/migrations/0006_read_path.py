"""Read path: BM25 postings and the session-neighbour index.

memory_lexemes holds one row per (memory, lexeme) of the memory's search_tsv, with its term frequency and the
memory's length (distinct lexemes). BM25 needs document frequencies, and `search_tsv @@ query` cannot use the GIN index here: the
RLS policy's predicate is not leakproof, so PostgreSQL evaluates it before `@@` and scans every row of the
workspace. A btree on (workspace_id, lexeme) is an ordinary equality lookup that works under the policy.

Triggers keep the postings in step with search_tsv (content, tags, category) and delete them with the memory, in
the writer's transaction and workspace. No foreign key: Django's test flush truncates the tables it knows without
CASCADE, and a table it does not know referencing memories would make that fail. Existing memories are indexed workspace by
workspace (each inside its own workspace setting, since both tables FORCE row-level security).
"""

from django.db import migrations

from tenancy.rls_sql import enable_workspace_rls

# Content counts fully, tags and category half (search_tsv weights them A and B), so a word in the text outranks
# the same word in a tag, as ts_rank did.
_POSTINGS_OF = """
    SELECT {workspace}, {memory}, t.lexeme,
           coalesce((SELECT sum(CASE w WHEN 'A' THEN 1.0 ELSE 0.5 END) FROM unnest(t.weights) w), 1.0),
           greatest(1, length({tsv}))
    FROM unnest({tsv}) t
"""

CREATE_SQL = f"""
CREATE TABLE memory_lexemes (
    workspace_id bigint NOT NULL,
    memory_id uuid NOT NULL,
    lexeme text NOT NULL,
    tf real NOT NULL,
    doc_len integer NOT NULL,
    PRIMARY KEY (memory_id, lexeme)
);
-- Each lexeme's postings in impact order (more occurrences, then shorter memories first): search reads a bounded
-- head of each list, and counts document frequencies from the same index.
CREATE INDEX memory_lexemes_ws_lexeme ON memory_lexemes (workspace_id, lexeme, tf DESC, doc_len) INCLUDE (memory_id);

CREATE FUNCTION memory_lexemes_sync() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        IF NEW.search_tsv IS NOT DISTINCT FROM OLD.search_tsv THEN
            RETURN NULL;
        END IF;
        DELETE FROM memory_lexemes WHERE memory_id = OLD.id;
    END IF;
    INSERT INTO memory_lexemes (workspace_id, memory_id, lexeme, tf, doc_len)
    {_POSTINGS_OF.format(workspace="NEW.workspace_id", memory="NEW.id", tsv="NEW.search_tsv")};
    RETURN NULL;
END
$$;

CREATE TRIGGER memory_lexemes_sync AFTER INSERT OR UPDATE OF content, tags, category ON memories
    FOR EACH ROW EXECUTE FUNCTION memory_lexemes_sync();

CREATE FUNCTION memory_lexemes_drop() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM memory_lexemes WHERE memory_id = OLD.id;
    RETURN NULL;
END
$$;

CREATE TRIGGER memory_lexemes_drop AFTER DELETE ON memories FOR EACH ROW EXECUTE FUNCTION memory_lexemes_drop();

-- Consecutive memories of one conversation (metadata.sessionId): the hybrid ranking looks up each candidate's
-- neighbours in its session.
CREATE INDEX memories_ws_session ON memories (workspace_id, (metadata ->> 'sessionId'), created_at, id)
    WHERE deleted_at IS NULL AND metadata ? 'sessionId';
"""

DROP_SQL = """
DROP INDEX IF EXISTS memories_ws_session;
DROP TRIGGER IF EXISTS memory_lexemes_drop ON memories;
DROP FUNCTION IF EXISTS memory_lexemes_drop();
DROP TRIGGER IF EXISTS memory_lexemes_sync ON memories;
DROP FUNCTION IF EXISTS memory_lexemes_sync();
DROP TABLE IF EXISTS memory_lexemes;
"""


def backfill_postings(apps, schema_editor) -> None:
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT id FROM workspaces ORDER BY id")
        for (workspace_id,) in cursor.fetchall():
            cursor.execute("SELECT set_config('app.workspace_id', %s, true)", [str(workspace_id)])
            cursor.execute(
                "INSERT INTO memory_lexemes (workspace_id, memory_id, lexeme, tf, doc_len) "
                + _POSTINGS_OF.format(workspace="m.workspace_id", memory="m.id", tsv="m.search_tsv").replace(
                    "FROM unnest(m.search_tsv) t", "FROM memories m, unnest(m.search_tsv) t"
                )
                + " WHERE m.workspace_id = %s",
                [workspace_id],
            )
        cursor.execute("SELECT set_config('app.workspace_id', '', true)")
        # Planner statistics now rather than at autovacuum's next pass: without them the first searches guess.
        cursor.execute("ANALYZE memory_lexemes")


class Migration(migrations.Migration):
    dependencies = [("memories", "0004_pipeline_rls"), ("tenancy", "0002_extensions_and_rate_limits")]

    operations = [
        migrations.RunSQL(CREATE_SQL, DROP_SQL),
        enable_workspace_rls("memory_lexemes"),
        migrations.RunPython(backfill_postings, migrations.RunPython.noop),
    ]
