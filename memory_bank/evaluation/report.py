"""What every evaluation writes next to its results: run metadata, a Markdown report, charts.

The run metadata (configuration, package versions, git commit, machine) comes from
:mod:`memory_bank.runinfo`, shared by every report of the project. Charts use matplotlib's Agg
backend (no display needed); without matplotlib the report is written without charts and says so.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from memory_bank.runinfo import run_info, write_json

__all__ = [
    "grouped_bars",
    "md_footer",
    "md_table",
    "pct",
    "recall_curves",
    "run_info",
    "sibling",
    "write_json",
    "write_markdown",
]

logger = logging.getLogger(__name__)


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
