"""The Vercel AI SDK tools (integrations/vercel-ai): the `ai` package's mock language model drives
generateText through tool calls into the live server (node --test)."""

from __future__ import annotations

from tests.integrations.conftest import LIVE, ROOT, node_package, run_node_tests

SDK = ROOT / "sdk" / "typescript"
PACKAGE = ROOT / "integrations" / "vercel-ai"


@LIVE
def test_it_passes_its_node_suite_against_the_live_server(base_url, alice, bob):
    node_package(SDK)  # the tools import the SDK's built package
    run_node_tests(
        node_package(PACKAGE),
        {"CAIRN_BASE_URL": base_url, "CAIRN_API_KEY": alice.key, "CAIRN_TEST_OTHER_KEY": bob.key},
        expect=4,
    )
