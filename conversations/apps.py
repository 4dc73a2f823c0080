from django.apps import AppConfig


class ConversationsConfig(AppConfig):
    """Sessions (conversations recorded turn by turn) and skill files. Their tables are the memories app's
    (retrieval reads them); the writes that go through the memory pipeline live here."""

    name = "conversations"
    default_auto_field = "django.db.models.BigAutoField"
