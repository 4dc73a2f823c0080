"""The TypeScript SDK (sdk/typescript, npm package cairn-sdk): built, then its own `node --test` suite run
against the live server, and its generated types checked against the served OpenAPI document."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from django.test import Client

from tests.integrations.conftest import LIVE, NODE, ROOT, node_package, run_node_tests

PACKAGE = ROOT / "sdk" / "typescript"


@LIVE
def test_it_passes_its_node_suite_against_the_live_server(base_url, alice, bob, controlled_proxy, worker):
    report = run_node_tests(
        node_package(PACKAGE),
        {
            "CAIRN_BASE_URL": base_url,
            "CAIRN_API_KEY": alice.key,
            "CAIRN_TEST_OTHER_KEY": bob.key,
            "CAIRN_TEST_FLAKY_URL": controlled_proxy.url,
        },
        expect=14,
    )
    assert "it retries 503 and 429" in report
    assert worker.ran, "the export test went through a real job"


@pytest.mark.django_db(databases=[])
def test_it_has_types_generated_from_the_served_openapi_document(tmp_path: Path):
    served = Client().get("/api/sdk/v1/openapi.json")
    assert served.status_code == 200
    document = tmp_path / "openapi.json"
    document.write_text(json.dumps(served.json()))
    generated = subprocess.run(
        [NODE, "scripts/generate-types.mjs", str(document)],
        cwd=PACKAGE,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    committed = (PACKAGE / "src" / "openapi.ts").read_text()
    assert generated == committed, (
        "sdk/typescript/src/openapi.ts is out of date with the server's API: run `make sdk-types` (or, "
        "against a running server, `npm run generate -- http://127.0.0.1:8000/api/sdk/v1/openapi.json > "
        "src/openapi.ts` in sdk/typescript, then `npm run build`: type errors name the calls to update)"
    )
