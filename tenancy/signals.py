"""Every user gets a personal workspace the moment the user exists, however the user was created."""

from typing import Any

from django.contrib.auth import get_user_model
from django.db.models.signals import post_save
from django.dispatch import receiver

from tenancy.services import personal_workspace_ensure


@receiver(post_save, sender=get_user_model())
def create_personal_workspace(sender: type, instance: Any, created: bool, **kwargs: Any) -> None:
    if created:
        personal_workspace_ensure(user=instance)
