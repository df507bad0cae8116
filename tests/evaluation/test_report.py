"""Charts and file names of the evaluation reports."""

from __future__ import annotations

from memory_bank.evaluation import report


def test_charts_and_sibling_names(tmp_path) -> None:  # type: ignore[no-untyped-def]
    curve = report.recall_curves(
        tmp_path / "c.png", {"a": {1: 0.2, 10: 0.7}, "b": {1: 0.1, 10: 0.5}}, title="t"
    )
    bars = report.grouped_bars(tmp_path / "b.png", ["x", "y"], {"a": [0.5, 0.9]}, title="t", ylabel="%")
    assert curve and curve.stat().st_size > 1000 and bars and bars.stat().st_size > 1000
    assert report.sibling("runs/x.jsonl", "-curve.png").name == "x-curve.png"
