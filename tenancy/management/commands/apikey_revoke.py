import uuid
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from tenancy import services
from tenancy.models import ApiKey
from tenancy.policy import OPERATOR, declare


@declare(OPERATOR)
class Command(BaseCommand):
    help = "Revoke an API key by its id (see apikey_list)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("key_id")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            key_id = uuid.UUID(options["key_id"])
        except ValueError:
            raise CommandError("key_id must be the key's id as printed by apikey_list") from None
        key = ApiKey.objects.filter(pk=key_id).first()
        if key is None:
            raise CommandError(f"No API key {key_id}")
        services.api_key_revoke(api_key=key)
        self.stdout.write(f"revoked {key.prefix}…{key.last4}")
