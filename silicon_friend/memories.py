"""A user's view of their own memories: a table, forgetting curves, and an export file.

Used by the web app's "My memories" tab and the terminal's ``/memories`` command.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import json
import re
from pathlib import Path
from typing import Any

import numpy as np

from memory_bank import MemoryBank, MemoryKind
from memory_bank.forgetting import elapsed_days, retention_array
from memory_bank.original_format import export_data, write_json_atomic
from memory_bank.text import has_cjk

#: Columns of :func:`memory_rows`.
COLUMNS = ("id", "kind", "date", "text", "strength", "retention", "last recall", "forgotten")


@dataclasses.dataclass(frozen=True)
class MemoryRow:
    memory_id: str
    kind: str
    date: str
    text: str
    strength: int
    retention: float
    last_recall: str
    forgotten: bool

    def as_list(self) -> list[Any]:
        return [
            self.memory_id,
            self.kind,
            self.date,
            self.text,
            self.strength,
            round(self.retention, 3),
            self.last_recall,
            "yes" if self.forgotten else "",
        ]


def memory_rows(bank: MemoryBank, user: str, *, now: dt.datetime | None = None) -> list[MemoryRow]:
    """Every memory of ``user`` (newest first) with its strength and current retention."""
    if not bank.has_user(user):
        return []
    rows = [
        MemoryRow(
            memory_id=m.memory_id,
            kind=m.kind.value,
            date=m.date,
            text=m.text,
            strength=m.strength,
            retention=float(r),
            last_recall=m.last_recall_date or "",
            forgotten=m.archived,
        )
        for m, r in bank.memories(user, now=now)
    ]
    rows.sort(key=lambda r: (r.date, r.memory_id), reverse=True)
    return rows


def retention_figure(
    bank: MemoryBank,
    user: str,
    *,
    now: dt.datetime | None = None,
    max_curves: int = 12,
    horizon_days: int = 30,
) -> Any:
    """A matplotlib figure of the forgetting curves of the user's most recent memories.

    Each curve is ``R(t) = exp(-t / (tau * S))`` from the day the memory was learned or last
    recalled, continued ``horizon_days`` into the future. With forgetting off in this store the
    curves show what the paper's model would do. Uses ``matplotlib.figure.Figure`` (no pyplot,
    no global state), so it is safe in a multi-threaded server.
    """
    from matplotlib.figure import Figure

    today = (now or bank.clock()).date()
    cfg = bank.config.forgetting
    mode = cfg.mode if cfg.mode != "off" else "paper"
    mems = []
    if bank.has_user(user):
        mems = [
            m
            for m, _ in bank.memories(user, include_archived=False, now=now)
            if m.kind in (MemoryKind.TURN, MemoryKind.DAILY_SUMMARY)
        ]
    mems = sorted(mems, key=lambda m: (m.recall_anchor, m.date, m.turn or 0))[-max_curves:]
    fig = Figure(figsize=(8, 4.2), dpi=100)
    ax = fig.add_subplot()
    for m in mems:
        start = -float(elapsed_days([m.recall_anchor], today)[0])
        days = np.linspace(start, horizon_days, 200)
        r = retention_array(days - start, np.full_like(days, m.strength), mode=mode, tau=cfg.tau)
        label = _short(m.text, 38) + f" (S={m.strength})"
        ax.plot(days, r, label=label, linewidth=1.4)
    ax.axvline(0, color="grey", linestyle="--", linewidth=1)
    ax.set_xlabel("days from today")
    ax.set_ylabel("retention R")
    ax.set_ylim(0, 1.05)
    note = "" if cfg.mode != "off" else " (forgetting is off in this store: the paper's curve)"
    ax.set_title(f"Forgetting curves, R = exp(-t/S){note}", fontsize=10)
    if mems:
        cjk = any(has_cjk(m.text) for m in mems)
        prop = {"family": list(font_families()), "size": 7} if cjk else {"size": 7}
        ax.legend(prop=prop, loc="upper right", framealpha=0.8)
    else:
        ax.text(0.5, 0.5, "no memories yet", ha="center", va="center", transform=ax.transAxes)
    fig.tight_layout()
    return fig


#: Fonts that can draw Chinese, tried in order (fonts-wqy-zenhei on Debian).
CJK_FONTS = ("WenQuanYi Zen Hei", "Noto Sans CJK SC", "Noto Sans SC", "Source Han Sans SC", "SimHei")


@functools.cache
def font_families() -> tuple[str, ...]:
    """Matplotlib's default font with a CJK fallback, if one is installed (memories may be Chinese)."""
    from matplotlib import font_manager

    installed = {f.name for f in font_manager.fontManager.ttflist}
    return ("DejaVu Sans", *[name for name in CJK_FONTS if name in installed][:1])


def _short(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def export_filename(user: str) -> str:
    """``memories_<user>.json`` with the name made safe for a file system."""
    safe = re.sub(r"[^\w.-]+", "_", user.strip(), flags=re.UNICODE).strip("._") or "user"
    return f"memories_{safe}.json"


def export_user(bank: MemoryBank, user: str, directory: str | Path) -> Path:
    """Write ``user``'s memories as a memory file in the original MemoryBank format; return its path."""
    path = Path(directory) / export_filename(user)
    write_json_atomic(path, export_data(bank, [user]))
    return path


def export_bytes(bank: MemoryBank, user: str) -> tuple[str, bytes]:
    """``user``'s memory file (original MemoryBank format) as a file name and bytes, never on disk."""
    text = json.dumps(export_data(bank, [user]), ensure_ascii=False, indent=2)
    return export_filename(user), text.encode("utf-8")
