"""The run metadata every report records (memory_bank.runinfo)."""

from __future__ import annotations

import json

from memory_bank import runinfo


def test_git_commit_from_a_checkout(tmp_path) -> None:  # type: ignore[no-untyped-def]
    git = tmp_path / "repo" / ".git"
    (git / "refs" / "heads").mkdir(parents=True)
    (git / "HEAD").write_text("ref: refs/heads/main\n")
    (git / "refs" / "heads" / "main").write_text("a" * 40 + "\n")
    (tmp_path / "repo" / "pkg").mkdir()
    assert runinfo.git_commit(tmp_path / "repo" / "pkg") == "a" * 40
    (git / "refs" / "heads" / "main").unlink()
    (git / "packed-refs").write_text("# pack-refs\n" + "b" * 40 + " refs/heads/main\n")
    assert runinfo.git_commit(tmp_path / "repo" / "pkg") == "b" * 40
    (git / "HEAD").write_text("c" * 40 + "\n")  # detached
    assert runinfo.git_commit(tmp_path / "repo") == "c" * 40


def test_git_commit_of_a_worktree(tmp_path) -> None:  # type: ignore[no-untyped-def]
    main = tmp_path / "main" / ".git"
    (main / "refs" / "heads").mkdir(parents=True)
    (main / "refs" / "heads" / "topic").write_text("d" * 40 + "\n")
    wt_git = main / "worktrees" / "topic"
    wt_git.mkdir(parents=True)
    (wt_git / "HEAD").write_text("ref: refs/heads/topic\n")
    (wt_git / "commondir").write_text("../..\n")
    (tmp_path / "topic").mkdir()
    (tmp_path / "topic" / ".git").write_text(f"gitdir: {wt_git}\n")
    assert runinfo.git_commit(tmp_path / "topic") == "d" * 40


def test_run_info_records_config_versions_machine(tmp_path) -> None:  # type: ignore[no-untyped-def]
    info = runinfo.run_info("eval test", {"k": 3})
    assert info["command"] == "eval test" and info["config"] == {"k": 3}
    assert info["packages"]["numpy"] and info["packages"]["faiss-cpu"]
    m = info["machine"]
    assert m["cpus"] and m["python"] and m["platform"]
    assert m["loadavg"] is None or len(m["loadavg"]) == 3
    assert runinfo.package_versions(["no-such-distribution-x"]) == {"no-such-distribution-x": None}
    path = runinfo.write_json(tmp_path / "out" / "r.json", info)
    assert json.loads(path.read_text(encoding="utf-8"))["config"] == {"k": 3}
