from django.apps import AppConfig


class RolloutAppConfig(AppConfig):
    name = "rollout"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.models.signals import post_migrate

        # After migrate, not at import: ready() must not touch the database (it also runs for commands that
        # have no database yet), and post_migrate runs on the database just migrated, test databases included.
        post_migrate.connect(purge_schedule_ensure, sender=self)


def purge_schedule_ensure(using: str = "default", **kwargs: object) -> None:
    from rollout.services import metrics_purge_schedule_ensure

    metrics_purge_schedule_ensure(using=using)
