"""The training config: shipped YAML files, validation messages and command-line overrides."""

from __future__ import annotations

from pathlib import Path

import pytest

from finetune.config import load_config, parse_overrides
from finetune.errors import ConfigError
from finetune.sft import main

CONFIGS = Path(__file__).resolve().parents[2] / "configs" / "finetune"


@pytest.mark.parametrize("name", ["smoke", "smollm2", "chatglm-6b", "belle-7b"])
def test_shipped_configs_are_valid(name: str) -> None:
    config = load_config(CONFIGS / f"{name}.yaml")
    assert all(path.is_file() for path in config.resolved_files("train"))


def test_paper_settings_for_chatglm_and_belle() -> None:
    glm, belle = load_config(CONFIGS / "chatglm-6b.yaml"), load_config(CONFIGS / "belle-7b.yaml")
    for config in (glm, belle):
        assert (config.lora.r, config.num_train_epochs, config.precision) == (16, 3, "auto")
        assert config.gradient_checkpointing
    assert (glm.model_name_or_path, glm.format, glm.lora.target_modules) == (
        "THUDM/chatglm-6b",
        "chatglm",
        ["query_key_value"],
    )
    assert glm.trust_remote_code
    assert belle.format == "belle"
    assert set(belle.lora.target_modules) == {
        "q_proj",
        "k_proj",
        "v_proj",
        "o_proj",
        "gate_proj",
        "up_proj",
        "down_proj",
    }


def test_command_line_overrides_yaml_keys() -> None:
    config = load_config(
        CONFIGS / "smoke.yaml",
        [
            "--max_steps",
            "5",
            "--output_dir=/tmp/x",
            "--lora.r",
            "8",
            "--merge",
            "--train_files",
            "a.jsonl,b.jsonl",
            "--resume_from_checkpoint",
            "true",
            "--system_prompt",
            "null",
        ],
    )
    assert (config.max_steps, config.output_dir, config.lora.r, config.merge) == (5, "/tmp/x", 8, True)
    assert config.train_files == ["a.jsonl", "b.jsonl"]
    assert config.resume_from_checkpoint is True and config.system_prompt is None
    assert config.lora.alpha == 32  # untouched nested keys survive an override of a sibling


def test_parse_overrides_builds_nested_mappings() -> None:
    assert parse_overrides(["--lora.target_modules", "[q_proj, v_proj]", "--seed", "3"]) == {
        "lora": {"target_modules": ["q_proj", "v_proj"]},
        "seed": "3",
    }
    with pytest.raises(ConfigError, match="overrides look like --key value"):
        parse_overrides(["max_steps", "5"])


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["--learning_rat", "1e-3"], "unknown key 'learning_rat' \\(did you mean 'learning_rate'\\?\\)"),
        (["--lora.alhpa", "8"], "unknown key 'lora.alhpa' \\(did you mean 'alpha'\\?\\)"),
        (["--lora.r", "0"], "lora.r: Input should be greater than or equal to 1"),
        (["--format", "alpaca"], "unknown prompt format 'alpaca'"),
        (["--format", "chatglm"], "set train_on: last_turn"),
        (["--precision", "fp8"], "precision: Input should be 'auto', 'bf16', 'fp16' or 'fp32'"),
    ],
)
def test_invalid_values_are_named(overrides: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(CONFIGS / "smoke.yaml", overrides)


def test_bad_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "missing.yaml")
    (tmp_path / "list.yaml").write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="top level must be a mapping"):
        load_config(tmp_path / "list.yaml")
    (tmp_path / "partial.yaml").write_text("format: belle\n")
    with pytest.raises(ConfigError, match="model_name_or_path: Field required"):
        load_config(tmp_path / "partial.yaml")


def test_cli_prints_config_and_turns_errors_into_exit_code_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--config", str(CONFIGS / "smoke.yaml"), "--max_steps", "7", "--print_config"]) == 0
    assert '"max_steps": 7' in capsys.readouterr().out
    assert main(["--config", str(CONFIGS / "smoke.yaml"), "--no_such_key", "1"]) == 2
