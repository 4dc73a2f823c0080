from django.db import migrations


def create_extensions(apps, schema_editor):
    with schema_editor.connection.cursor() as cursor:
        for name, what in (("vector", "pgvector ≥ 0.8"), ("pg_trgm", "pg_trgm (contrib)")):
            cursor.execute("SELECT 1 FROM pg_extension WHERE extname = %s", [name])
            if cursor.fetchone():
                continue
            try:
                cursor.execute(f"CREATE EXTENSION IF NOT EXISTS {name}")
            except Exception as exc:  # noqa: BLE001 - re-raised with what to do
                raise RuntimeError(
                    f"Cairn needs the PostgreSQL extension '{name}' ({what}) and could not create it: {exc}. "
                    f"Install it on the server and run CREATE EXTENSION {name}; as a superuser in this database."
                ) from exc


class Migration(migrations.Migration):
    dependencies = [("tenancy", "0001_initial")]

    operations = [
        migrations.RunPython(create_extensions, migrations.RunPython.noop),
        # Keyed by API-key hash before the key is looked up, so it holds no workspace data. Unlogged: counters
        # are worth nothing after a crash and this keeps the per-request upsert off the WAL.
        migrations.RunSQL(
            """
            CREATE UNLOGGED TABLE rate_limit_counters (
                bucket varchar(64) NOT NULL,
                window_start bigint NOT NULL,
                hits integer NOT NULL,
                PRIMARY KEY (bucket, window_start)
            )
            """,
            "DROP TABLE rate_limit_counters",
        ),
    ]
