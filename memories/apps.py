import sys

from django.apps import AppConfig
from django.conf import settings


class MemoriesConfig(AppConfig):
    name = "memories"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        if "qcluster" in sys.argv[1:2] and _uses_litellm():
            # Importing litellm takes seconds on a busy machine; a worker that did it inside its first job would
            # spend that job's time limit on the import. The cluster imports it once, before forking workers.
            import litellm  # noqa: F401


def _uses_litellm() -> bool:
    embedding_model = getattr(settings, "EMBEDDING_MODEL", "")
    return bool(getattr(settings, "GRAPH_LLM_MODEL", "")) or not embedding_model.startswith("local/")
