"""Writing a built model directory in one step, so a crash never leaves half a model behind."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from finetune.errors import FinetuneError


def save_model_dir(
    model: Any, tokenizer: Any, target: Path, marker: str, meta: dict[str, Any], *, replace: bool = False
) -> None:
    """Save ``model`` and ``tokenizer`` as ``target``, with ``meta`` as JSON in ``target/marker``.

    Everything is written to a sibling staging directory first and moved into place at the
    end, so readers see either the old directory or the complete new one; the marker file says
    what the directory was built from, which is how a cache checks it is still current. A
    ``target`` that holds files but no marker (not one this wrote: a user's folder) is refused,
    unless ``replace``.
    """
    target = Path(target)
    if target.is_dir() and any(target.iterdir()) and not (target / marker).is_file() and not replace:
        raise FinetuneError(
            f"{target} holds files this did not write; give an empty or new folder (it was left as it is)"
        )
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
