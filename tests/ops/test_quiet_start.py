"""A fresh machine's `make run` log holds log lines only: loading the web app (WhiteNoise with no
staticfiles/ yet) warns about nothing, and the local embedder loads (exporting its ONNX files first) without
drawing progress bars."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
SCRIPT = """
import django, os
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django.setup()
from django.core.handlers.wsgi import WSGIHandler
WSGIHandler()  # the middleware chain, WhiteNoise included, as gunicorn loads it
from retrieval.embeddings import get_embedder
print("vector", get_embedder().embed(["a fresh machine"]).shape)
"""


def test_it_starts_without_warnings_or_progress_bars_on_a_fresh_machine(tmp_path):
    env = {
        # Python's default warning filters, as `make run` has them.
        **{
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("HF_", "TRANSFORMERS_", "EMBEDDING_", "PYTHONWARNINGS"))
        },
        "CAIRN_VAR_DIR": str(tmp_path / "var"),  # no ONNX export yet
    }
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert "vector (1, 384)" in done.stdout
    noise = [
        line
        for line in done.stderr.splitlines()
        if "Warning" in line or "Loading weights" in line or "it/s]" in line or "%|" in line
    ]
    assert noise == [], noise
    assert (tmp_path / "var" / "onnx").is_dir()  # the export really ran in this process
