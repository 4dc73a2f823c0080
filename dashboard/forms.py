"""Dashboard form input, validated like the SDK API and the tenancy services validate it."""

from __future__ import annotations

from django import forms
from django.conf import settings

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
    user_id = forms.CharField(max_length=120, required=False, strip=True)
    project_id = forms.CharField(max_length=240, required=False, strip=True)
    cursor = forms.CharField(max_length=400, required=False)
