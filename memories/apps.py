from django.apps import AppConfig


class MemoriesConfig(AppConfig):
    name = "memories"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.backends.signals import connection_created

        from config.dbloaders import fast_timestamps_ensure
        from memories import lookups  # noqa: F401  (registers field__like)

        connection_created.connect(fast_timestamps_ensure, dispatch_uid="cairn-fast-timestamps")
