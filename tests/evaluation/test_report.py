"""Run metadata and charts."""

from __future__ import annotations

from memory_bank.evaluation import report


def test_git_commit_from_a_checkout(tmp_path) -> None:  # type: ignore[no-untyped-def]
    git = tmp_path / "repo" / ".git"
    (git / "refs" / "heads").mkdir(parents=True)
    (git / "HEAD").write_text("ref: refs/heads/main\n")
    (git / "refs" / "heads" / "main").write_text("a" * 40 + "\n")
    (tmp_path / "repo" / "pkg").mkdir()
    assert report.git_commit(tmp_path / "repo" / "pkg") == "a" * 40
    (git / "refs" / "heads" / "main").unlink()
    (git / "packed-refs").write_text("# pack-refs\n" + "b" * 40 + " refs/heads/main\n")
    assert report.git_commit(tmp_path / "repo" / "pkg") == "b" * 40
    (git / "HEAD").write_text("c" * 40 + "\n")  # detached
    assert report.git_commit(tmp_path / "repo") == "c" * 40


def test_run_info_and_charts(tmp_path) -> None:  # type: ignore[no-untyped-def]
    info = report.run_info("eval test", {"k": 3})
    assert info["config"] == {"k": 3} and info["packages"]["numpy"]
    assert info["machine"]["cpus"] and info["machine"]["python"]
    curve = report.recall_curves(
        tmp_path / "c.png", {"a": {1: 0.2, 10: 0.7}, "b": {1: 0.1, 10: 0.5}}, title="t"
    )
    bars = report.grouped_bars(tmp_path / "b.png", ["x", "y"], {"a": [0.5, 0.9]}, title="t", ylabel="%")
    assert curve and curve.stat().st_size > 1000 and bars and bars.stat().st_size > 1000
    assert report.sibling("runs/x.jsonl", "-curve.png").name == "x-curve.png"
