"""SiliconFriend honours the bank's config (``--config``): memories per reply (retrieval.top_k),
the turns kept in the prompt (history_window), forgetting and the summariser (summaries:, or
--summary-config over it); explicit flags override it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from silicon_friend import cli, runtime
from silicon_friend.models import prepare_model
from tests.silicon_friend.fakes import EchoChatModel

CONFIG = """\
encoder: hashing
history_window: 3
retrieval:
  top_k: 5
forgetting:
  mode: paper
  tau: 2.0
summaries:
  max_attempts: 5
  backoff_s: 0.25
  min_words: 4
"""


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "memorybank.yaml"
    path.write_text(CONFIG, encoding="utf-8")
    return path


@contextlib.contextmanager
def _engine(argv: list[str], echo: EchoChatModel) -> Iterator[Any]:
    """The engine ``silicon-friend chat ARGV`` would run (with the echo model as backbone)."""
    options = cli._options(cli.build_parser().parse_args(["chat", *argv]))
    engine = runtime.build_engine(options, model=prepare_model(echo, context_tokens=8192))
    try:
        yield engine
    finally:
        engine.close()
        engine.bank.close()


def _chat(engine: Any, n: int) -> Any:
    session = engine.start("Emily")
    for i in range(n):
        engine.reply(session, f"My cat Miso number {i} likes tuna and naps in the sun.")
    return session


def test_config_top_k_and_history_window_reach_the_prompt(tmp_path, config_file) -> None:  # type: ignore[no-untyped-def]
    echo = EchoChatModel()
    with _engine(["--config", str(config_file), "--data-dir", str(tmp_path / "d")], echo) as engine:
        assert (engine.settings.top_k, engine.settings.history_turns) == (5, 3)
        session = _chat(engine, 9)
        fitted = engine.prepare(session, "What does my cat Miso like?")
        assert fitted.history_turns == 3  # the config's history_window, not the original's 7
        assert len(fitted.memories) == 5  # the config's top_k, not the paper's 2
        assert engine.bank.config.forgetting.mode == "paper" and engine.bank.config.forgetting.tau == 2.0


def test_flags_override_the_config(tmp_path, config_file) -> None:  # type: ignore[no-untyped-def]
    argv = ["--config", str(config_file), "--data-dir", str(tmp_path / "d"), "--top-k", "1",
            "--history-turns", "2", "--forgetting", "off"]  # fmt: skip
    with _engine(argv, EchoChatModel()) as engine:
        assert (engine.settings.top_k, engine.settings.history_turns) == (1, 2)
        assert engine.bank.config.forgetting.mode == "off"
        session = _chat(engine, 6)
        fitted = engine.prepare(session, "What does my cat Miso like?")
        assert fitted.history_turns == 2 and len(fitted.memories) == 1


def test_without_a_config_the_paper_defaults_apply(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with _engine(["--data-dir", str(tmp_path / "d"), "--encoder", "hashing"], EchoChatModel()) as engine:
        assert (engine.settings.top_k, engine.settings.history_turns) == (2, 7)


def test_the_summaries_section_reaches_the_summariser(tmp_path, config_file) -> None:  # type: ignore[no-untyped-def]
    echo = EchoChatModel()
    with _engine(["--config", str(config_file), "--data-dir", str(tmp_path / "d"), "--language", "zh"], echo) as engine:
        cfg = engine.summarizer.config
        assert (cfg.max_attempts, cfg.backoff_s, cfg.min_words) == (5, 0.25, 4)
        assert engine.summarizer.language == "zh" and engine.summarizer.chat_model is echo
        assert engine.scheduler.summarizer is engine.summarizer


def test_a_summary_config_file_overrides_the_section(tmp_path, config_file) -> None:  # type: ignore[no-untyped-def]
    own = tmp_path / "summaries.yaml"
    own.write_text("max_attempts: 2\nlanguage: en\n", encoding="utf-8")
    argv = ["--config", str(config_file), "--summary-config", str(own), "--data-dir", str(tmp_path / "d"),
            "--language", "zh"]  # fmt: skip
    with _engine(argv, EchoChatModel()) as engine:
        cfg = engine.summarizer.config
        assert cfg.max_attempts == 2 and cfg.backoff_s == 0.25  # the file over the section
        assert engine.summarizer.language == "en"  # the summaries' own language wins


def test_a_bad_summaries_section_is_a_one_line_error(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "bad.yaml"
    bad.write_text("encoder: hashing\nsummaries:\n  max_atempts: 5\n", encoding="utf-8")
    code = cli.main(["chat", "--config", str(bad), "--data-dir", str(tmp_path / "d"), "--llm", "openai:x@http://h/v1"])
    err = capsys.readouterr().err
    assert code == 2 and "summaries.max_atempts" in err and "Traceback" not in err
