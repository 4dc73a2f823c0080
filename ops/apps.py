import sys

from django.apps import AppConfig


class OpsConfig(AppConfig):
    name = "ops"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The worker cluster proves it is alive by writing a heartbeat row that /readyz reads; only the qcluster
        # command starts the beat (web processes and other commands must not look like workers).
        if len(sys.argv) > 1 and sys.argv[1] == "qcluster":
            from ops.heartbeat import heartbeat_start

            heartbeat_start()
