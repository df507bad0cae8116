"""What a training or evaluation results file records besides the results.

The git commit, the machine and the JSON writer are the library's (:mod:`memory_bank.runinfo`,
shared by every report of the project); this module adds the training stack's package list and
the peak memory of a run.
"""

from __future__ import annotations

import platform
import sys
from typing import Any

from memory_bank import runinfo
from memory_bank.runinfo import git_commit, write_json

__all__ = ["PACKAGES", "git_commit", "machine", "package_versions", "peak_memory_mb", "write_json"]

#: The training stack's distributions, recorded in every metrics file.
PACKAGES = ("torch", "transformers", "peft", "accelerate", "tokenizers", "pydantic", "gguf")


def package_versions(names: tuple[str, ...] = PACKAGES) -> dict[str, str | None]:
    """Python's version and those of ``names``."""
    return {"python": platform.python_version(), **runinfo.package_versions(names)}


def machine() -> dict[str, Any]:
    """The machine (with its GPU when torch sees one); see :func:`memory_bank.runinfo.machine_info`."""
    return runinfo.machine_info()


def peak_memory_mb() -> dict[str, float]:
    """Peak resident memory of this process and, on a GPU, the peak memory torch allocated."""
    out: dict[str, float] = {}
    try:
        import resource  # Unix only

        out["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)  # KiB on Linux
    except ImportError:
        pass
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        out["peak_gpu_allocated_mb"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
    return out
