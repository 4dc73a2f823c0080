"""gunicorn settings used by `make run` and the Procfile."""

import os
from typing import cast

from prometheus_client import multiprocess

bind = os.environ.get("BIND", "127.0.0.1:8000")
workers = int(os.environ.get("WEB_CONCURRENCY", "2"))
timeout = 60
graceful_timeout = 20


def post_worker_init(worker: object) -> None:
    # Load the local embedding model in the background so the first semantic search does not wait for it.
    from django.conf import settings

    if settings.EMBEDDING_MODEL.startswith("local/"):
        from retrieval.embeddings import LocalEmbedder, get_embedder

        # A local/ model name always builds a LocalEmbedder.
        cast(LocalEmbedder, get_embedder()).ready(load_in_background=True)


# --- /metrics across gunicorn workers ---
# Each worker is its own process: prometheus_client's multiprocess mode keeps their samples in files under
# this directory, set here in the master so every worker inherits it, and emptied at start so a dead run's
# counts go.
_multiproc_dir = os.environ.setdefault(
    "PROMETHEUS_MULTIPROC_DIR", os.path.join(os.path.dirname(os.path.dirname(__file__)), "var", "prometheus")
)


def on_starting(server: object) -> None:
    import shutil

    shutil.rmtree(_multiproc_dir, ignore_errors=True)
    os.makedirs(_multiproc_dir, exist_ok=True)


def child_exit(server: object, worker: object) -> None:
    # prometheus_client is imported when this file loads, never here: gunicorn calls child_exit from its
    # signal handler, and a second signal (Ctrl-C twice, SIGTERM during shutdown) arriving in the middle of
    # an import left a half-initialised module and an ImportError traceback on the way out.
    multiprocess.mark_process_dead(worker.pid)  # type: ignore[attr-defined]
