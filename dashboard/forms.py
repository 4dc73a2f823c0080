"""Dashboard form input, validated like the SDK API and the tenancy services validate it."""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.conf import settings

from memories.models import Memory
from tenancy import policy
from tenancy.models import Membership, UserSettings


class ApiKeyCreateForm(forms.Form):
    name = forms.CharField(max_length=100, required=False, strip=True)
    expires_in_days = forms.IntegerField(min_value=1)
    scope = forms.ChoiceField(
        choices=[(s, s) for s in policy.KEY_SCOPES], initial=policy.DEFAULT_KEY_SCOPE, required=False
    )
    # A workspace id the user belongs to (checked by the service), or empty for an unpinned key.
    pin = forms.IntegerField(required=False, min_value=1)

    def clean_expires_in_days(self) -> int:
        # Read at request time: the limit is a setting, and a class attribute would freeze it at import.
        days = self.cleaned_data["expires_in_days"]
        if days > settings.API_KEY_MAX_EXPIRY_DAYS:
            raise forms.ValidationError(
                f"Keys expire within {settings.API_KEY_MAX_EXPIRY_DAYS} days at most."
            )
        return days

    def clean_scope(self) -> str:
        return self.cleaned_data["scope"] or policy.DEFAULT_KEY_SCOPE


class MemberAddForm(forms.Form):
    identifier = forms.CharField(max_length=254, strip=True, label="Username or e-mail")
    role = forms.ChoiceField(choices=Membership.Role.choices, initial=Membership.Role.MEMBER)


class MemberRoleForm(forms.Form):
    role = forms.ChoiceField(choices=Membership.Role.choices)


class RoutingModeForm(forms.Form):
    mode = forms.ChoiceField(choices=UserSettings.RoutingMode.choices)
    active_org = forms.CharField(max_length=39, required=False, strip=True)


class OwnerMappingForm(forms.Form):
    owner = forms.CharField(max_length=60, strip=True, label="GitHub owner")
    org = forms.CharField(max_length=39, strip=True, label="Organization slug")


class MemorySearchForm(forms.Form):
    q = forms.CharField(max_length=500, required=False, strip=True)
    strategy = forms.ChoiceField(
        choices=[("lexical", "lexical"), ("semantic", "semantic"), ("hybrid", "hybrid")], required=False
    )
    # Filters: exact values; "-" means none (a shared memory, a memory of no project).
    user_id = forms.CharField(max_length=120, required=False, strip=True)
    project_id = forms.CharField(max_length=240, required=False, strip=True)
    type = forms.ChoiceField(choices=[("", "any"), *Memory.Type.choices], required=False)
    layer = forms.ChoiceField(choices=[("", "any"), *Memory.Layer.choices], required=False)
    tag = forms.CharField(max_length=100, required=False, strip=True)
    session = forms.CharField(max_length=200, required=False, strip=True)
    cursor = forms.CharField(max_length=400, required=False)


class MemoryEditForm(forms.Form):
    """The dashboard's edit form; memories.schemas.EditIn validates what it sends, as for the SDK."""

    content = forms.CharField(widget=forms.Textarea, strip=True, max_length=8000)
    type = forms.ChoiceField(choices=Memory.Type.choices)
    layer = forms.ChoiceField(choices=Memory.Layer.choices)
    tags = forms.CharField(required=False, strip=True, max_length=4000, help_text="Comma-separated.")
    category = forms.CharField(required=False, strip=True, max_length=120)
    metadata = forms.CharField(widget=forms.Textarea, required=False, strip=True, max_length=20000)

    def clean_tags(self) -> list[str]:
        raw = self.cleaned_data.get("tags") or ""
        return [tag.strip() for tag in raw.split(",") if tag.strip()]

    def clean_metadata(self) -> dict[str, Any] | None:
        raw = self.cleaned_data.get("metadata") or ""
        if not raw:
            return None
        try:
            value = json.loads(raw, parse_constant=_refuse_constant)
        except json.JSONDecodeError as error:
            raise forms.ValidationError(
                f"Metadata must be a JSON object: {error.msg} at {error.pos}."
            ) from None
        except (ValueError, RecursionError):
            # NaN and Infinity are not JSON; a nesting deeper than the parser follows is refused the same way.
            raise forms.ValidationError(
                "Metadata must be a JSON object of plain values, nested a few levels at most."
            ) from None
        if not isinstance(value, dict):
            raise forms.ValidationError('Metadata must be a JSON object, like {"speaker": "Lena"}.')
        return value


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")
