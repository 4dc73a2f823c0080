"""gunicorn settings used by `make run` and the Procfile."""

import os

bind = os.environ.get("BIND", "127.0.0.1:8000")
workers = int(os.environ.get("WEB_CONCURRENCY", "2"))
timeout = 60
graceful_timeout = 20


def post_worker_init(worker: object) -> None:
    # Load the local embedding model in the background so the first semantic search does not wait for it.
    from django.conf import settings

    if settings.EMBEDDING_MODEL.startswith("local/"):
        from memories.embeddings import get_embedder

        get_embedder().ready(load_in_background=True)
