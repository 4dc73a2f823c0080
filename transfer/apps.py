from django.apps import AppConfig


class TransferConfig(AppConfig):
    name = "transfer"
    default_auto_field = "django.db.models.BigAutoField"
