from django.apps import AppConfig


class PipelineConfig(AppConfig):
    name = "pipeline"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from pipeline import background, graph_jobs

        # Every process loads every app: the web process that queues these jobs and the worker that runs them
        # both know the kinds.
        background.job_kind_register(graph_jobs.COMMUNITIES_REFRESH_KIND, graph_jobs.communities_refresh_run)
        background.job_kind_register(graph_jobs.BACKFILL_KIND, graph_jobs.graph_backfill_run)
