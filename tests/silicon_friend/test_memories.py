"""The "My memories" view: table rows, forgetting curves, export in the original format."""

from __future__ import annotations

import json

import numpy as np

from memory_bank import MemoryKind
from memory_bank.original_format import load_memory_file
from memory_bank.text import has_cjk
from silicon_friend.memories import export_user, font_families, memory_rows, retention_figure


def fill(bank) -> None:  # type: ignore[no-untyped-def]
    bank.add_turn("Emily", "I adopted a cat named Miso.", "Lovely!", at="2023-04-28T10:00")
    bank.add_turn("Emily", "I went hiking.", "", at="2023-04-29T10:00")
    bank.set_layer("Emily", MemoryKind.DAILY_SUMMARY, "Emily adopted a cat.", date="2023-04-28")
    bank.reinforce("Emily", ["Emily_2023-04-28_0"], now="2023-04-30")


def test_rows_show_strength_retention_and_last_recall(bank) -> None:  # type: ignore[no-untyped-def]
    fill(bank)
    rows = {r.memory_id: r for r in memory_rows(bank, "Emily")}
    cat = rows["Emily_2023-04-28_0"]
    assert cat.strength == 2 and cat.last_recall == "2023-04-30" and cat.date == "2023-04-28"
    assert 0 < cat.retention <= 1 and cat.kind == "turn"
    assert rows["Emily_2023-04-28_summary"].kind == "daily_summary"
    assert cat.as_list()[:3] == ["Emily_2023-04-28_0", "turn", "2023-04-28"]
    assert memory_rows(bank, "Nobody") == []


def test_retention_figure_has_one_curve_per_memory(make_bank) -> None:  # type: ignore[no-untyped-def]
    bank = make_bank(forgetting={"mode": "off"})
    fill(bank)
    fig = retention_figure(bank, "Emily")
    ax = fig.axes[0]
    assert len(ax.get_lines()) == 3 + 1  # three memories and the "today" line
    assert "Forgetting is off" in ax.get_title()  # the store's setting: flat at 1, as the table says
    assert all(set(line.get_ydata()) == {1.0} for line in ax.get_lines()[:3])
    empty = retention_figure(bank, "Nobody", language="zh")
    assert "没有可绘制的保留对话" in empty.axes[0].texts[0].get_text()


def test_the_plot_uses_real_dates_and_agrees_with_the_table(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import datetime as dt

    from matplotlib import dates as mdates

    from memory_bank import MemoryBank
    from memory_bank.embeddings import HashingEncoder

    now = dt.datetime(2026, 12, 1, 12)
    bank = MemoryBank.open(
        tmp_path / "s", encoder_instance=HashingEncoder(64), clock=lambda: now,
        forgetting={"mode": "paper", "tau": 400.0, "daily_pass": False},
    )  # fmt: skip
    with bank:
        fill(bank)  # imported 2023 history, three and a half years before "now"
        ax = retention_figure(bank, "Emily").axes[0]
        assert "date" in ax.get_xlabel() and "days from today" not in ax.get_xlabel()
        rows = {r.text.split("\n")[0][:20]: r for r in memory_rows(bank, "Emily")}
        for line in ax.get_lines()[:3]:
            xs = mdates.date2num(line.get_xdata())
            label = line.get_label().split(" (S=")[0]
            row = next(r for k, r in rows.items() if label.startswith(k[:15]))
            assert mdates.num2date(xs[0]).date() == dt.date.fromisoformat(
                row.last_recall or row.date
            )  # starts on a real date
            y_today = np.interp(mdates.date2num(now.date()), xs, line.get_ydata())
            assert abs(y_today - row.retention) < 0.01  # the retention the table shows


def test_export_is_the_original_format_and_reimports(bank, tmp_path) -> None:  # type: ignore[no-untyped-def]
    fill(bank)
    path = export_user(bank, "Emily", tmp_path)
    data = load_memory_file(path)  # validates the structure
    assert list(data) == ["Emily"]
    history = data["Emily"]["history"]
    assert history["2023-04-28"][0]["query"] == "I adopted a cat named Miso."
    assert history["2023-04-28"][0]["memory_strength"] == 2
    assert data["Emily"]["summary"]["2023-04-28"]["content"] == "Emily adopted a cat."
    assert json.loads(path.read_text(encoding="utf-8")) == data


def test_export_file_name_is_safe_for_any_user_name(bank, tmp_path) -> None:  # type: ignore[no-untyped-def]
    bank.add_turn("../../etc/小明 x", "hi", "hello")
    path = export_user(bank, "../../etc/小明 x", tmp_path)
    assert path.parent == tmp_path and path.name == "memories_etc_小明_x.json"


def test_a_cjk_font_installed_after_matplotlib_cached_its_fonts_is_found(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Matplotlib caches the fonts it found on its first run; a Chinese font installed since must
    still draw the plot's Chinese memories (not empty boxes)."""
    import pytest
    from matplotlib import font_manager

    from silicon_friend import memories

    files = [p for p in font_manager.findSystemFonts() if any(k in p.lower().replace("-", "") for k in memories.CJK_FILE_KEYS)]
    if not files:
        pytest.skip("no CJK font on this machine (Debian: fonts-wqy-zenhei)")
    stale = [f for f in font_manager.fontManager.ttflist if f.name not in memories.CJK_FONTS]
    monkeypatch.setattr(font_manager.fontManager, "ttflist", stale)  # a cache made before the font
    memories.font_families.cache_clear()
    try:
        family = memories.font_families()
    finally:
        memories.font_families.cache_clear()
    assert family[0] == "DejaVu Sans" and family[1] in memories.CJK_FONTS


def test_the_plots_date_axis_speaks_the_pages_language(make_bank) -> None:  # type: ignore[no-untyped-def]
    """The Chinese page's plot said "Jan" and "2027-Jan" under its curves."""
    bank = make_bank()
    fill(bank)
    for language, month in (("zh", "月"), ("en", "")):
        fig = retention_figure(bank, "Emily", language=language)
        fig.canvas.draw()
        ax = fig.axes[0]
        labels = [t.get_text() for t in ax.get_xticklabels()] + [ax.xaxis.get_offset_text().get_text()]
        shown = " ".join(labels)
        english = any(m in shown for m in ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"))
        assert (month in shown and not english) if language == "zh" else english or shown.strip(), shown
        if language == "zh" and len(font_families()) > 1:  # and it is drawn in a font with Chinese glyphs
            cjk = set(font_families()) - {"DejaVu Sans"}
            drawn = [*ax.get_xticklabels(), ax.xaxis.get_offset_text()]
            assert all(cjk & set(t.get_fontfamily()) for t in drawn if has_cjk(t.get_text())), drawn


def test_dollar_signs_in_a_memory_are_text_in_the_plot(make_bank) -> None:  # type: ignore[no-untyped-def]
    """A memory with ``$x^2$`` made the plot's legend parse it as math, and "$$" crashed the plot."""
    bank = make_bank()
    bank.add_turn("Emily", "$x^2$ and $$y$$", "ok", at="2023-05-01T10:00")
    fig = retention_figure(bank, "Emily")
    fig.tight_layout()
    fig.canvas.draw()
    assert "$x^2$ and $$y$$" in fig.axes[0].get_legend_handles_labels()[1][0].replace("\\$", "$")


def test_the_plot_draws_memories_dated_at_the_ends_of_the_calendar(make_bank) -> None:  # type: ignore[no-untyped-def]
    """The library takes dates from year 1 to 9999 (an imported file may hold one): a memory of
    9999-12-31 made the figure overflow, and one of 0001-01-01 a figure matplotlib could not
    draw, so the memory tab showed nothing at all. The axis now spans the last ten years up to a
    month past today; an older memory draws its curve's end, a later one draws none."""
    import datetime as dt

    import gradio as gr
    from matplotlib import dates as mdates

    bank = make_bank()
    bank.add_turn("Emily", "I adopted a cat named Miso.", "Lovely!", at="2023-05-01T10:00")
    bank.add_turn("Emily", "A note from the first year.", "ok", at="0001-01-01T10:00")
    bank.add_turn("Emily", "A note from the last year.", "ok", at="9999-12-31T10:00")
    fig = retention_figure(bank, "Emily", language="zh")
    gr.Plot().postprocess(fig)  # what the memory tab does with it: drawn to an image
    ax = fig.axes[0]
    labels = [line.get_label() for line in ax.get_lines()]
    assert any("first year" in s for s in labels) and not any("last year" in s for s in labels)
    low, high = (mdates.num2date(x).date() for x in ax.get_xlim())
    today = bank.clock().date()
    assert high == today + dt.timedelta(days=30) and low >= today - dt.timedelta(days=3651)
