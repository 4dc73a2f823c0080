from django.apps import AppConfig


class TransferConfig(AppConfig):
    name = "transfer"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from pipeline import background
        from transfer import jobs

        # Every process loads every app: the web process that queues these jobs and the worker that runs
        # them both know the kinds.
        background.job_kind_register(
            jobs.IMPORT_KIND, jobs.workspace_import_run, sweep=jobs.transfer_files_sweep
        )
        background.job_kind_register(jobs.EXPORT_KIND, jobs.workspace_export_run)
