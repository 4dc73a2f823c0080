from django.apps import AppConfig


class TenancyConfig(AppConfig):
    name = "tenancy"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.backends.signals import connection_created
        from django.db.models.signals import post_migrate

        from tenancy import checks, signals  # noqa: F401
        from tenancy.rls import statement_timeout_ceiling_ensure

        post_migrate.connect(grant_runtime_role, sender=self)
        connection_created.connect(statement_timeout_ceiling_ensure, dispatch_uid="cairn-statement-timeout")


def grant_runtime_role(using: str = "default", **kwargs: object) -> None:
    """Give the runtime role data access (never DDL) to every table, after every migrate, test databases too.

    Row-level security still decides which rows it sees in the tables that hold workspace data.
    """
    from django.conf import settings
    from django.db import connections

    role = connections["default"].ops.quote_name(settings.APP_DB_ROLE)
    with connections[using].cursor() as cursor:
        cursor.execute(f"GRANT USAGE ON SCHEMA public TO {role}")
        cursor.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {role}")
        cursor.execute(f"GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA public TO {role}")
