"""A hostile customer's input on the trust boundaries: pinned keys managing keys, patterns that would cost
seconds, sign-in lockouts aimed at someone else, import files probing other workspaces, numbers sent as
strings, oversized headers, MCP error text and look-alike characters against the LLM data fence. Each case is
refused (or handled) with a stable answer, and the workspace keeps answering.

The rest of the hostile suite is tests/test_hostile_input.py and tests/test_hostile_input_import.py.
"""

from __future__ import annotations

from typing import Any

from django.test import Client

from memories.services import glob_to_like
from tenancy import services as tenancy_services
from tests.conftest import SdkClient


def bulk_preview(api: SdkClient, pattern: str) -> dict[str, Any]:
    return api.ok("memories/bulk-forget", {"filters": {"pattern": pattern}, "dryRun": True})


# --- keys ---------------------------------------------------------------------------------------------------


def test_it_keeps_a_pinned_key_from_minting_an_unpinned_one(personas):
    pinned = SdkClient(
        Client(),
        tenancy_services.api_key_create(user=personas.alice, scope="admin", workspace=personas.acme).raw_key,
    )
    pinned.error("keys/create", {"keyScope": "admin"}, status=403, code="KEY_PINNED")
    made = pinned.ok("keys/create", {"keyScope": "read", "pinned": True}, status=201)
    assert made["key"]["pinnedWorkspace"]["id"] == personas.acme.id
    listed = pinned.ok("keys/list", {})["keys"]
    assert listed and all(key["pinnedWorkspace"]["id"] == personas.acme.id for key in listed)
    # alice's unpinned persona key is not the pinned key's to revoke, nor to see.
    others = [key for key in personas.alice_api.ok("keys/list", {})["keys"] if key["pinnedWorkspace"] is None]
    pinned.error("keys/revoke", {"id": others[0]["id"]}, status=404, code="KEY_NOT_FOUND")


# --- patterns -----------------------------------------------------------------------------------------------


def test_it_handles_a_500_star_glob_and_other_star_heavy_patterns(alice_api):
    body = "x" * 7990
    big = [alice_api.add(f"{body} {n}") for n in range(3)]
    small = alice_api.add("deploy on friday")
    every = {memory["id"] for memory in [*big, small]}

    def matched(pattern: str) -> set[str]:
        return {memory["id"] for memory in bulk_preview(alice_api, pattern)["memories"]}

    assert matched("*" * 500) == every
    assert matched("*x" * 249 + "*") == {memory["id"] for memory in big}
    assert matched("*x" * 249 + "*y") == set()
    assert matched("*?*" * 166) == {memory["id"] for memory in big}  # at least 166 characters
    assert matched("*" * 250 + "deploy" + "*" * 244) == {small["id"]}
    assert alice_api.ok("memories/list", {})["memories"]


def test_it_turns_a_glob_into_a_like_pattern_with_star_runs_collapsed():
    assert glob_to_like("*" * 500) == "%"
    assert glob_to_like("a**b?*") == "a%b_%"
    assert glob_to_like("100%_\\*") == "100\\%\\_\\\\%"


# --- sign-in ------------------------------------------------------------------------------------------------


def test_it_keeps_the_owner_signing_in_while_strangers_guess_the_password(personas, settings):
    settings.SIGNIN_FAILURE_LIMIT = 2

    def sign_in(password: str, address: str) -> int:
        client = Client(REMOTE_ADDR=address)
        return client.post("/accounts/login/", {"username": "alice", "password": password}).status_code

    for address in ("203.0.113.1", "203.0.113.2"):
        sign_in("guess", address)
        assert sign_in("guess", address) == 429
    assert sign_in("pw-alice", "198.51.100.7") == 302
