"""Send every query to the runtime role (`app`) and every migration to the owner (`default`)."""

from typing import Any


class RuntimeRoleRouter:
    def db_for_read(self, model: type, **hints: Any) -> str:
        return "app"

    def db_for_write(self, model: type, **hints: Any) -> str:
        return "app"

    def allow_relation(self, obj1: Any, obj2: Any, **hints: Any) -> bool:
        return True

    def allow_migrate(self, db: str, app_label: str, model_name: str | None = None, **hints: Any) -> bool:
        return db == "default"
