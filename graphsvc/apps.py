from django.apps import AppConfig


class GraphsvcConfig(AppConfig):
    name = "graphsvc"
    default_auto_field = "django.db.models.BigAutoField"
