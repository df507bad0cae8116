"""Writing a built model directory in one step, so a crash never leaves half a model behind."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any


def save_model_dir(model: Any, tokenizer: Any, target: Path, marker: str, meta: dict[str, Any]) -> None:
    """Save ``model`` and ``tokenizer`` as ``target``, with ``meta`` as JSON in ``target/marker``.

    Everything is written to a sibling staging directory first and moved into place at the
    end, so readers see either the old directory or the complete new one; the marker file says
    what the directory was built from, which is how a cache checks it is still current.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    old = staging.with_name(staging.name + "-old")
    try:
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        (staging / marker).write_text(json.dumps(meta, indent=2, ensure_ascii=False))
        if target.exists():  # set aside, not deleted, until the new one is in place
            os.replace(target, old)
        os.replace(staging, target)
        target.chmod(0o755)  # mkdtemp made it private
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        shutil.rmtree(old, ignore_errors=True)
