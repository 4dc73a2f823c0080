from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture(autouse=True)
def transfer_dir(settings: Any, tmp_path: Any) -> Any:
    """Uploads and exports of a test live in its own directory."""
    settings.EXPORT_IMPORT_DIR = str(tmp_path / "transfer")
    return tmp_path / "transfer"


@pytest.fixture(autouse=True)
def test_embedding_models(settings: Any) -> None:
    """The made-up models these tests store vectors of are allowed here, as an operator allows a model."""
    settings.EMBEDDING_MODELS_ALLOWED = (*settings.EMBEDDING_MODELS_ALLOWED, "test/3d", "local/test")
