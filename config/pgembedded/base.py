"""PostgreSQL backend that starts the embedded server on first connection (used when DATABASE_URL is
unset)."""

from typing import Any

from django.db.backends.postgresql import base

from config.embedded_db import ensure_embedded_postgres


class DatabaseWrapper(base.DatabaseWrapper):
    def get_connection_params(self) -> dict[str, Any]:
        server = ensure_embedded_postgres()
        params = super().get_connection_params()
        params["host"] = server.socket_dir
        params["port"] = server.port
        return params
