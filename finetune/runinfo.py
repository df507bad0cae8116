"""What every results file records besides the results: package versions, git commit, machine, memory.

The git commit is read from the ``.git`` folder directly (no ``git`` process is started); it is
``None`` outside a checkout.
"""

from __future__ import annotations

import json
import os
import platform
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

PACKAGES = ("torch", "transformers", "peft", "accelerate", "tokenizers", "pydantic", "gguf")


def package_versions(names: tuple[str, ...] = PACKAGES) -> dict[str, str | None]:
    versions: dict[str, str | None] = {"python": platform.python_version()}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def git_commit(start: Path | None = None) -> str | None:
    """The commit checked out in the repository holding ``start`` (default: this package)."""
    here = (start or Path(__file__)).resolve()
    for folder in (here, *here.parents):
        git = folder / ".git"
        if git.is_dir():
            head = (git / "HEAD").read_text().strip()
            if not head.startswith("ref: "):
                return head
            ref = head.removeprefix("ref: ")
            if (git / ref).is_file():
                return (git / ref).read_text().strip()
            packed = git / "packed-refs"
            if packed.is_file():
                for line in packed.read_text().splitlines():
                    if line.endswith(" " + ref):
                        return line.split(" ", 1)[0]
            return None  # a branch without commits yet
    return None


def machine() -> dict[str, Any]:
    info: dict[str, Any] = {
        "platform": platform.platform(),
        "processor": platform.machine(),
        "cpu_count": os.cpu_count(),
    }
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
    return info


def peak_memory_mb() -> dict[str, float]:
    """Peak resident memory of this process and, on a GPU, the peak memory torch allocated."""
    out: dict[str, float] = {}
    try:
        import resource  # Unix only

        out["peak_rss_mb"] = round(
            resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1
        )  # KiB on Linux
    except ImportError:
        pass
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        out["peak_gpu_allocated_mb"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
    return out


def write_json(path: Path, data: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n", encoding="utf-8")
    return path
