from django.apps import AppConfig


class McpServerConfig(AppConfig):
    name = "mcp_server"
    default_auto_field = "django.db.models.BigAutoField"
