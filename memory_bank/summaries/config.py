"""Settings of the summariser: retries, time limits, context budget, output checks.

One typed config with unknown keys rejected, loadable from YAML (``configs/summaries.yaml``)::

    language: en              # en | zh; default: the bank's language
    llm: llamacpp             # an LLM spec (memory_bank.llm) used by the CLI and the app
    max_attempts: 3
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from memory_bank.errors import ConfigError

Language = Literal["en", "zh"]


class SummaryConfig(BaseModel):
    """How summaries are made. Every field has a sensible default."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    language: Language | None = Field(None, description="output language; default: the bank's")
    llm: str | dict[str, Any] | None = Field(None, description="LLM spec (see memory_bank.llm)")
    max_attempts: int = Field(3, ge=1, description="tries per LLM call before the layer is left for later")
    backoff_s: float = Field(1.0, ge=0, description="wait before the first retry; doubles each retry")
    max_backoff_s: float = Field(30.0, ge=0)
    call_timeout_s: float | None = Field(
        180.0, gt=0, description="deadline per LLM call, checked while the answer streams"
    )
    context_tokens: int | None = Field(
        None, ge=256, description="the model's context size; default: what the model reports"
    )
    default_context_tokens: int = Field(4096, ge=256, description="context size of models that say nothing")
    output_tokens: int | None = Field(
        None, ge=16, description="tokens kept free for the answer; default: the model's max_tokens"
    )
    default_output_tokens: int = Field(400, ge=16)
    safety_tokens: int = Field(64, ge=0, description="margin for chat-template tokens and miscounts")
    max_summary_chars: int = Field(2000, ge=100, description="longer answers are cut at a sentence end")
    min_words: int = Field(3, ge=1, description="shorter answers count as junk (CJK: 2 chars per word)")
    max_depth: int = Field(6, ge=1, description="combine rounds for very long inputs before giving up")


def load_summary_config(path: str | Path | None = None, **overrides: Any) -> SummaryConfig:
    """Read a YAML file (or none) and apply ``overrides`` (``None`` values are ignored)."""
    data: dict[str, Any] = {}
    if path is not None:
        import yaml

        try:
            loaded = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
        except (OSError, yaml.YAMLError) as e:
            raise ConfigError(f"cannot read summary config {str(path)!r}: {e}") from e
        if not isinstance(loaded, dict):
            raise ConfigError(f"summary config {str(path)!r} must be a mapping of SummaryConfig fields")
        data.update(loaded)
    data.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return SummaryConfig.model_validate(data)
    except ValidationError as e:
        problems = "; ".join(f"{'.'.join(map(str, err['loc']))}: {err['msg']}" for err in e.errors())
        raise ConfigError(f"invalid summary config: {problems}") from e
