import sys

from django.apps import AppConfig


class OpsConfig(AppConfig):
    name = "ops"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from config import tracing

        worker = len(sys.argv) > 1 and sys.argv[1] == "qcluster"
        # Off (and nothing imported) unless OTEL_EXPORTER_OTLP_ENDPOINT is set; before the WSGI handler loads
        # its middleware, which the Django instrumentation adds to.
        if tracing.tracing_configure(service_name="cairn-worker" if worker else "cairn"):
            tracing.job_signals_connect()
        # The worker cluster proves it is alive by writing a heartbeat row that /readyz reads; only the
        # qcluster command starts the beat (web processes and other commands must not look like workers).
        if len(sys.argv) > 1 and sys.argv[1] == "qcluster":
            from ops.heartbeat import heartbeat_start

            heartbeat_start()
            # Import litellm once here, before django-q2 forks its workers: each worker (and each replacement
            # of a dead one) inherits it instead of spending seconds of its first job's timeout importing it.
            # On two busy cores that import alone ran past a 5 s JOB_TIMEOUT_SECONDS in the fault tests.
            import litellm  # noqa: F401
