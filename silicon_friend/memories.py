"""A user's view of their own memories: a table, forgetting curves, and an export file.

Used by the web app's "My memories" tab and the terminal's ``/memories`` command.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import functools
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

import memory_bank.forgetting as forgetting
from memory_bank import MemoryBank, MemoryKind
from memory_bank.forgetting import retention_array
from memory_bank.languages import pick
from memory_bank.original_format import export_data, write_json_atomic
from memory_bank.records import Memory
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


@dataclasses.dataclass(frozen=True)
class PlotTexts:
    """The words of :func:`retention_figure`, one set per language."""

    title: str
    title_off: str
    x_label: str
    y_label: str
    today: str
    empty: str


PLOT_TEXTS: dict[str, PlotTexts] = {
    "en": PlotTexts(
        title="How strongly each memory is kept, by date",
        title_off="Forgetting is off in this store: every memory keeps retention 1",
        x_label="date (learned or last recalled, then the days ahead)",
        y_label="retention",
        today="today",
        empty="no kept chat turn or daily summary to plot",
    ),
    "zh": PlotTexts(
        title="每条记忆的保持程度（按日期）",
        title_off="本记忆库未开启遗忘：每条记忆的保持率都是 1",
        x_label="日期（记住或上次回忆之日，及之后的日子）",
        y_label="保持率",
        today="今天",
        empty="没有可绘制的保留对话或每日总结",
    ),
}


#: The time axis's labels where the default (English month names: "Jan", "2027-Jan") does not
#: fit the page's language; numbers only, so no locale is needed.
_DATE_FORMATS: dict[str, dict[str, list[str]]] = {
    "zh": {
        "formats": ["%Y年", "%m月", "%d日", "%H:%M", "%H:%M", "%S.%f"],
        "zero_formats": ["", "%Y年", "%m月", "%m月%d日", "%H:%M", "%H:%M"],
        "offset_formats": ["", "%Y年", "%Y年%m月", "%Y年%m月%d日", "%Y年%m月%d日", "%Y年%m月%d日 %H:%M"],
    }
}


#: The retention plot's time axis: at most this many years, within the dates matplotlib draws.
PLOT_YEARS = 10
_FIRST_DRAWN, _LAST_DRAWN = dt.date(2, 1, 1), dt.date(9998, 12, 1)


def retention_figure(
    bank: MemoryBank,
    user: str,
    *,
    memories: Sequence[Memory] | None = None,
    now: dt.datetime | None = None,
    max_curves: int = 12,
    horizon_days: int = 30,
    language: str = "en",
) -> Any:
    """A matplotlib figure of the retention of ``memories`` (default: the user's latest turns and
    daily summaries), at most ``max_curves`` of them, on a time axis of real dates.

    Each curve starts on the day the memory was learned or last recalled and follows the store's
    own forgetting setting (mode, time scale per kind and content weight), so it agrees with the
    retention the memory table shows; it goes on ``horizon_days`` past today. Uses
    ``matplotlib.figure.Figure`` (no pyplot, no global state): safe in a multi-threaded server.
    """
    from matplotlib import dates as mdates
    from matplotlib.figure import Figure

    t = pick(PLOT_TEXTS, language, "plot texts")
    today = (now or bank.clock()).date()
    cfg = bank.config.forgetting
    if memories is None:
        memories = []
        if bank.has_user(user):
            memories = [
                m
                for m, _ in bank.memories(user, include_archived=False, now=now)
                if m.kind in (MemoryKind.TURN, MemoryKind.DAILY_SUMMARY)
            ]
        memories = sorted(memories, key=lambda m: (m.recall_anchor, m.date, m.turn or 0), reverse=True)
    mems = [m for m in memories if m.kind in (MemoryKind.TURN, MemoryKind.DAILY_SUMMARY)][:max_curves]
    fig = Figure(figsize=(8, 4.2), dpi=100)
    ax = fig.add_subplot()
    # The axis spans at most PLOT_YEARS up to ``horizon_days`` past today, inside the dates
    # matplotlib can draw: a memory dated in year 1 (an imported file may say so) draws the end
    # of its curve, one dated after the axis (year 9999) draws none.
    end = today + dt.timedelta(days=max(0, min(horizon_days, (_LAST_DRAWN - today).days)))
    first = max(_FIRST_DRAWN, end - dt.timedelta(days=365 * PLOT_YEARS))
    shown = today
    for m in mems:
        start = dt.date.fromisoformat(m.recall_anchor[:10])
        if start >= end:
            continue
        skipped = max(0, (first - start).days)
        days = np.linspace(float(skipped), max((end - start).days, 1), 240)
        shown = min(shown, start + dt.timedelta(days=skipped))
        scale = forgetting.time_scales(
            cfg.tau,
            [m.kind.value],
            np.asarray([m.weight if cfg.content_weights else 1.0]),
            kind_scales=cfg.kind_scales,  # type: ignore[arg-type]
        )
        tau = float(np.asarray(scale).reshape(-1)[0])
        r = retention_array(days, np.full_like(days, m.strength), mode=cfg.mode, tau=tau)
        x = [start + dt.timedelta(days=float(d)) for d in days]
        label = _short(m.text, 38).replace("$", r"\$")  # a user's "$x$" is text, not math to typeset
        ax.plot(x, r, label=label + f" (S={m.strength})", linewidth=1.4)  # type: ignore[arg-type]
    ax.axvline(today, color="grey", linestyle="--", linewidth=1, label=t.today)  # type: ignore[arg-type]
    ax.set_xlim(shown - dt.timedelta(days=1) if shown > _FIRST_DRAWN else shown, end)  # type: ignore[arg-type]
    locator = mdates.AutoDateLocator()
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator, **_DATE_FORMATS.get(language, {})))
    ax.set_xlabel(t.x_label)
    ax.set_ylabel(t.y_label)
    ax.set_ylim(0, 1.05)
    ax.set_title(t.title_off if cfg.mode == "off" else t.title, fontsize=10)
    cjk = language != "en" or any(has_cjk(m.text) for m in mems)
    family = list(font_families()) if cjk else None
    if family:
        for item in (ax.title, ax.xaxis.label, ax.yaxis.label, ax.xaxis.get_offset_text()):
            item.set_fontfamily(family)
        ax.tick_params(axis="x", labelfontfamily=family)  # the dates: 05日, 2027年01月
    if mems:
        ax.legend(
            prop={"family": family, "size": 7} if family else {"size": 7}, loc="lower left", framealpha=0.8
        )
    else:
        ax.text(0.5, 0.5, t.empty, ha="center", va="center", transform=ax.transAxes, fontfamily=family)
    fig.tight_layout()
    return fig


#: Fonts that can draw Chinese, tried in order (fonts-wqy-zenhei on Debian).
CJK_FONTS = ("WenQuanYi Zen Hei", "Noto Sans CJK SC", "Noto Sans SC", "Source Han Sans SC", "SimHei")
#: Parts of those fonts' file names (lower case, without dashes).
CJK_FILE_KEYS = ("wqyzenhei", "notosanscjk", "notosanssc", "sourcehansans", "simhei")


@functools.cache
def font_families() -> tuple[str, ...]:
    """Matplotlib's default font with a CJK fallback, if one is installed (memories may be Chinese)."""
    from matplotlib import font_manager

    installed = {f.name for f in font_manager.fontManager.ttflist}
    if not installed.intersection(CJK_FONTS):
        # Matplotlib lists the fonts it found when it first ran, in a cache: a CJK font installed
        # since (fonts-wqy-zenhei after the first plot) would never be used, and Chinese memories
        # would be drawn as empty boxes. Look for one among the system's fonts now (~10 ms).
        for path in font_manager.findSystemFonts():
            if any(key in path.lower().replace("-", "") for key in CJK_FILE_KEYS):
                with contextlib.suppress(Exception):  # an unreadable font file is skipped
                    font_manager.fontManager.addfont(path)
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
