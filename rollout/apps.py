from django.apps import AppConfig


class RolloutConfig(AppConfig):
    name = "rollout"
    default_auto_field = "django.db.models.BigAutoField"
