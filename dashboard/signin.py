"""How many wrong passwords a sign-in gets before it pauses (django-axes' AXES_FAILURE_LIMIT callable).

Failures count per (account, address): SIGNIN_FAILURE_LIMIT wrong passwords for one account from one address
pause that pair for the cool-off, and nothing else, so someone who knows a username cannot lock its owner out
of their own browser from elsewhere. Two slower limits cover what a per-pair count misses:

- an account guessed at from many addresses: once it has SIGNIN_ACCOUNT_FAILURE_LIMIT failures within
  SIGNIN_ACCOUNT_WINDOW_MINUTES, every address gets one wrong password for it per cool-off instead of the
  pair limit; an address that has not failed for it (the owner's, usually) still signs in with the right one;
- one address trying many accounts: SIGNIN_ADDRESS_FAILURE_LIMIT failures from it within the cool-off pause
  it for every account.

The counts come from axes' failure log (AXES_ENABLE_ACCESS_FAILURE_LOG), one row per wrong password.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from axes.helpers import get_client_username
from axes.models import AccessFailureLog
from django.conf import settings
from django.http import HttpRequest
from django.utils import timezone

# Returned for an address past its own limit: any failure count reaches it, so every account is paused there.
PAUSED = 0
# Once an account is past its limit: one wrong password per address and cool-off.
ONE_TRY = 1


def failure_limit(request: HttpRequest, credentials: dict[str, Any] | None) -> int:
    now = timezone.now()
    address = getattr(request, "axes_ip_address", None)
    if address is not None:
        from_address = AccessFailureLog.objects.filter(
            ip_address=address, attempt_time__gte=now - settings.AXES_COOLOFF_TIME
        ).count()
        if from_address >= settings.SIGNIN_ADDRESS_FAILURE_LIMIT:
            return PAUSED
    username = get_client_username(request, credentials)
    if username:
        since = now - timedelta(minutes=settings.SIGNIN_ACCOUNT_WINDOW_MINUTES)
        for_account = AccessFailureLog.objects.filter(username=username, attempt_time__gte=since).count()
        if for_account >= settings.SIGNIN_ACCOUNT_FAILURE_LIMIT:
            return ONE_TRY
    return int(settings.SIGNIN_FAILURE_LIMIT)
