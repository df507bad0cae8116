"""``memorybank summarize``: on-demand runs through the CLI, with any registered LLM backend."""

from __future__ import annotations

import json

import pytest

from memory_bank import MemoryBank, MemoryKind, llm
from memory_bank.cli import main
from tests.summaries.conftest import ScriptedChatModel, add_days


@pytest.fixture
def store(tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    models: list[ScriptedChatModel] = []

    def factory(spec: llm.LLMSpec) -> ScriptedChatModel:
        model = ScriptedChatModel(max_tokens=spec.max_tokens)
        if spec.model == "broken":
            model.default = lambda p, n: (_ for _ in ()).throw(ConnectionError("down"))
        models.append(model)
        return model

    monkeypatch.setitem(llm._REGISTRY, "scripted", factory)
    path = tmp_path / "store"
    with MemoryBank.open(path, encoder="hashing") as bank:
        add_days(bank)
        add_days(bank, "Bob", {"2023-04-27": ["I play CHESS."]})
    cfg = tmp_path / "summaries.yaml"
    cfg.write_text("backoff_s: 0\nmax_attempts: 1\n", encoding="utf-8")
    return str(path), str(cfg), models


def test_summarize_all_users_then_nothing_is_due(store, capsys) -> None:  # type: ignore[no-untyped-def]
    path, cfg, models = store
    common = ["--store", path, "--encoder", "hashing", "--summary-config", cfg, "--now", "2023-05-01"]
    assert main(["summarize", *common, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "Emily: 2023-04-27, 2023-04-28" in out and "Bob: 2023-04-27" in out and not models

    assert main(["summarize", *common, "--llm", "scripted:m", "--json"]) == 0
    reports = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {r["user"]: len(r["written"]) for r in reports} == {"Emily": 6, "Bob": 4}
    with MemoryBank.open(path, encoder="hashing") as bank:
        assert "CHESS" in bank.profile("Bob")["global_summary"]
        assert bank.layer("Emily", MemoryKind.DAILY_PERSONALITY, "2023-04-28") is not None

    assert main(["summarize", *common, "--llm", "scripted:m", "--user", "Emily"]) == 0
    assert "0 days summarised, 0 layers written" in capsys.readouterr().out


def test_failures_exit_1_and_setup_errors_exit_2(store, capsys) -> None:  # type: ignore[no-untyped-def]
    path, cfg, _ = store
    common = ["--store", path, "--encoder", "hashing", "--summary-config", cfg, "--now", "2023-05-01"]
    assert main(["summarize", *common, "--llm", "scripted:broken", "--user", "Bob"]) == 1
    assert "stay due for the next run" in capsys.readouterr().err
    assert main(["summarize", *common, "--llm", "nosuch:model"]) == 2
    assert "unknown LLM backend 'nosuch'" in capsys.readouterr().err
    assert main(["summarize", *common, "--llm", "scripted:m", "--user", "Nobody"]) == 2
    assert main(["summarize", "--store", path + "-missing", "--llm", "scripted:m"]) == 2
