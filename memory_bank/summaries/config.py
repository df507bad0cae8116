"""Settings of the summariser: retries, time limits, context budget, output checks.

:class:`~memory_bank.config.SummaryConfig` is part of the library's one config (the
``summaries:`` section of a bank's YAML); it can also be read from a file of its own
(``configs/summaries.yaml``)::

    language: en              # en | zh; default: the bank's language
    llm: llamacpp             # an LLM spec (memory_bank.llm) used by the CLI and the app
    max_attempts: 3
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from memory_bank.config import SummaryConfig
from memory_bank.errors import ConfigError

__all__ = ["SummaryConfig", "load_summary_config"]


def load_summary_config(
    path: str | Path | None = None, *, base: SummaryConfig | None = None, **overrides: Any
) -> SummaryConfig:
    """``base`` (e.g. the ``summaries:`` section of the bank's config; default: the defaults),
    then the YAML file ``path`` over it, then ``overrides`` (``None`` values are ignored)."""
    data: dict[str, Any] = base.model_dump() if base is not None else {}
    if path is not None:
        import yaml

        try:
            loaded = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
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
