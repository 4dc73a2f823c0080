"""Bugs the fuzzer found, each pinned by the smallest request that showed it."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("path", ["graph/status", "graph/rollout", "graph/extraction"])
@pytest.mark.parametrize("query", ["projectId=", "userId=%20", "tenantId=a%00b"])
def test_it_answers_400_not_500_for_a_scope_query_that_scope_refuses(alice_api, path, query):
    # The query schemas accepted what ScopeIn refuses (empty, blank, NUL), so ScopeIn raised inside the handler.
    response = alice_api.get(f"{path}?{query}")
    assert response.status_code == 400, response.content  # the project's validation status
    error = response.json()["error"]
    assert error["type"] == "validation_error" and error["retryable"] is False and "scope" not in error["code"]
