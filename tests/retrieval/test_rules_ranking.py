"""Rules stay always on; a scope with more than a handful has them ranked by the query and kept within
their share of the token budget."""

from __future__ import annotations

FILLER = [
    f"Rule {i}: keep the {topic} module documented and reviewed by two people before changes land."
    for i, topic in enumerate(
        [
            "billing",
            "search",
            "orders",
            "accounts",
            "invoices",
            "pricing",
            "checkout",
            "settings",
            "reports",
            "exports",
            "imports",
            "alerts",
            "metrics",
            "traces",
            "sessions",
            "tokens",
            "webhooks",
            "emails",
        ]  # fmt: skip
    )
]
TERRAFORM = "Terraform changes must be planned in CI and applied only by the on-call SRE."


def test_it_ranks_many_rules_by_the_query_within_their_share(alice_api, settings):
    settings.CONTEXT_RULES_ALWAYS = 8
    terraform = alice_api.add(TERRAFORM, type="rule")
    for text in FILLER:
        alice_api.add(text, type="rule")
    ranked = alice_api.ok("context/get", {"query": "who may apply terraform changes", "tokenBudget": 1000})
    assert ranked["rules"][0]["id"] == terraform["id"]
    assert ranked["trace"]["rulesRanked"] is True and ranked["trace"]["rulesTotal"] == 19
    # 30 % of 1,000 tokens holds about 11 of these rules; at least CONTEXT_RULES_ALWAYS always stay.
    assert 8 <= len(ranked["rules"]) < 19
    assert TERRAFORM in ranked["context"]
    # Without a query (nothing to rank by) and with a handful, every rule.
    assert len(alice_api.ok("context/get", {})["rules"]) == 19
    settings.CONTEXT_RULES_ALWAYS = 50
    whole = alice_api.ok("context/get", {"query": "who may apply terraform changes", "tokenBudget": 1000})
    assert len(whole["rules"]) == 19 and whole["trace"]["rulesRanked"] is False
