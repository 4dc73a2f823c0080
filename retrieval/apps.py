import logging
import sys
from typing import Any

from django.apps import AppConfig

logger = logging.getLogger("cairn.pipeline")


def _embedder_warm(**_: Any) -> None:
    """django-q2 `post_spawn` (in each new worker, after the fork): load the local model before the first job.

    Otherwise the first embedding batch of every worker, and of every replacement after a recycle or a crash,
    spends its time (and its JOB_TIMEOUT_SECONDS) loading weights while its jobs wait."""
    from retrieval.embeddings import get_embedder

    try:
        get_embedder().embed(["warm up"])
    except Exception:  # noqa: BLE001 - the first job reports an unavailable model as a retryable failure
        logger.warning("could not load the local embedding model at worker start", exc_info=True)


class RetrievalConfig(AppConfig):
    name = "retrieval"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.backends.signals import connection_created

        from retrieval.vectors import search_settings_ensure

        connection_created.connect(search_settings_ensure, dispatch_uid="cairn-hnsw-session")
        _blas_threads_limit()
        if len(sys.argv) > 1 and sys.argv[1] == "qcluster":
            _model_libraries_preload()


def _blas_threads_limit() -> None:
    """numpy's BLAS (ranking's vector arithmetic, entity and community centroids) on BLAS_THREADS threads.

    The arrays here are small (tens of candidates × 384 floats): extra BLAS threads finish no sooner, then
    spin waiting for the next call, which nearly tripled the CPU a context/get costs under load. Processes
    scale by process count instead, like the embedding model's threads."""
    import numpy  # noqa: F401 - the BLAS library must be loaded for its threads to be set
    from django.conf import settings
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=settings.BLAS_THREADS, user_api="blas")


def _model_libraries_preload() -> None:
    """Import the model libraries once, before django-q2 forks its workers (as ops does with litellm): ~6 s
    per worker otherwise for torch, paid again by every replacement. Only the imports: neither runtime starts
    threads until it computes, which the workers do after the fork (_embedder_warm). The ONNX model needs
    torch only to build its graph, once per machine."""
    from django.conf import settings

    from retrieval.embeddings import LOCAL_PREFIX, ONNX_INT8_MODEL

    if not settings.EMBEDDING_MODEL.startswith(LOCAL_PREFIX):
        return
    try:
        if settings.EMBEDDING_MODEL == ONNX_INT8_MODEL:
            import onnxruntime  # noqa: F401
            import tokenizers  # noqa: F401
        else:
            import sentence_transformers  # noqa: F401
            import torch  # noqa: F401
    except ImportError:
        pass
    from django_q.signals import post_spawn

    post_spawn.connect(_embedder_warm, dispatch_uid="cairn-embedder-warm")
