"""The conflict card in a real Chromium at both sizes: which side is current, keep newer / keep older / both
stand, and the duplicates group with its merge; screenshots under test-artifacts/browser/."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client, override_settings

from memories.models import Memory
from tenancy import services
from tenancy.rls import workspace_context
from tests.conftest import SdkClient, make_user
from tests.dashboard.browser import (  # noqa: F401 - browser is a fixture
    SIZES,
    browser,
    screenshot,
    session_cookie,
    sideways_overflow,
    signed_in_page,
)
from tests.dashboard.test_views import relate
from tests.memories.helpers import backdate, run_jobs

API = "github.com/demo/api"
FRIDAY = "We deploy the api to production every Friday afternoon with a blue-green deploy."
TUESDAY = "Production deploys of the api happen on Tuesday mornings now, after two bad weekends."
SECRETS_OLD = "Secrets live in AWS Secrets Manager; never in committed .env files."
SECRETS_NEW = "Secrets are kept in AWS Secrets Manager; never in committed .env files."


@dataclass
class Seeded:
    url: str
    ws: int
    ids: dict[str, str]
    session: str


@pytest.fixture(scope="module")
def seeded(django_db_setup: Any, django_db_blocker: Any) -> Iterator[Seeded]:
    from pytest_django.live_server_helper import LiveServer

    fast = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    with django_db_blocker.unblock(), override_settings(RATE_LIMIT_REQUESTS=1_000_000, PASSWORD_HASHERS=fast):
        try:
            alice = make_user("alice")
            acme = services.org_create(owner=alice, slug="acme", name="Acme")
            key = services.api_key_create(user=alice, scope="admin", workspace=acme).raw_key
            agent = SdkClient(Client(), key)
            ids = {}
            for text in (FRIDAY, TUESDAY, SECRETS_OLD, SECRETS_NEW):
                body = {"content": text, "type": "decision", "scope": {"projectId": API}}
                ids[text] = agent.ok("memories/add", body, status=201)["memory"]["id"]
                backdate(acme.id, ids[text], days=10 - len(ids))
            run_jobs(acme.id)
            relate(acme.id, "contradicts", ids[TUESDAY], ids[FRIDAY], "Fridays or Tuesdays: they disagree.")
            server = LiveServer("localhost")
            server._live_server_modified_settings.enable()
            try:
                yield Seeded(server.url, acme.id, ids, session_cookie(alice))
            finally:
                server._live_server_modified_settings.disable()
                server.stop()
        finally:
            call_command("flush", database="default", interactive=False, verbosity=0)


@pytest.mark.parametrize("size", ["desktop", "phone"])
def test_it_shows_the_current_side_and_the_actions(browser, seeded, size):  # noqa: F811
    problems: list[str] = []
    page = signed_in_page(browser, seeded.url, seeded.session, problems, viewport=SIZES[size])
    page.goto(f"/w/{seeded.ws}/changes/")
    card = page.locator("article.conflict", has_text="every Friday afternoon")
    assert card.count() == 1
    current = card.locator(".side.current")
    assert current.count() == 1 and "Tuesday mornings" in current.text_content()
    for label in ("Keep newer", "Keep older", "Both stand"):
        assert card.get_by_role("button", name=label).is_visible()
    duplicates = page.locator("#duplicates article.duplicates")
    assert duplicates.count() == 1 and "Merge" in duplicates.text_content()
    assert sideways_overflow(page) == 0
    card.scroll_into_view_if_needed()
    screenshot(page, f"conflict-card-{size}")
    page.locator("#duplicates").scroll_into_view_if_needed()
    screenshot(page, f"duplicates-{size}")
    page.context.close()
    assert problems == []


def test_it_keeps_the_older_side_when_asked_and_undoes_it(browser, seeded):  # noqa: F811
    problems: list[str] = []
    page = signed_in_page(browser, seeded.url, seeded.session, problems)
    page.goto(f"/w/{seeded.ws}/changes/")
    card = page.locator("article.conflict", has_text="every Friday afternoon")
    card.get_by_role("button", name="Keep older").click()
    page.wait_for_selector("text=The older memory is current")
    card = page.locator("article.conflict", has_text="every Friday afternoon")
    assert "Friday afternoon" in card.locator(".side.current").text_content()
    screenshot(page, "conflict-kept-older")
    with workspace_context(seeded.ws):
        assert str(Memory.objects.get(pk=seeded.ids[TUESDAY]).superseded_by) == seeded.ids[FRIDAY]
    card.get_by_role("button", name="Undo decision").click()
    page.wait_for_selector("text=The decision on the pair was undone")
    with workspace_context(seeded.ws):
        assert Memory.objects.get(pk=seeded.ids[TUESDAY]).superseded_by is None
    page.context.close()
    assert problems == []
