"""One typed, validated configuration for a memory bank.

Defaults follow the paper and the original code: top-k 2, the query is the current message,
a 7-turn in-prompt history window; forgetting is on with the measured selective setting
(:data:`SELECTIVE_FORGETTING`), ``forgetting: {mode: off}`` turns it off. Unknown keys are
rejected, so a typo in a YAML file is an error instead of a silently ignored option.

>>> cfg = MemoryBankConfig(store="./memories", language="zh")
>>> cfg.encoder_for()
'use-multilingual'
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from memory_bank.errors import ConfigError
from memory_bank.forgetting import ForgettingMode, ForgettingPolicy
from memory_bank.languages import Language

__all__ = [
    "CALENDAR_ONLY",
    "DEFAULT_ENCODERS",
    "DEFAULT_HISTORY_WINDOW",
    "DEFAULT_TOP_K",
    "FORGETTING_OFF",
    "PAPER_FORGETTING",
    "SELECTIVE_FORGETTING",
    "ForgettingConfig",
    "Language",
    "MemoryBankConfig",
    "RetrievalConfig",
    "SummaryConfig",
    "load_config",
]

#: Offline encoders that ship inside packages, per language. Any sentence-transformers model
#: name or path (e.g. the paper's GanymedeNil/text2vec-large-chinese) can be configured instead.
DEFAULT_ENCODERS: dict[str, str] = {"en": "minilm", "zh": "use-multilingual"}


#: Memories retrieved per query and recent turns kept in the prompt: the paper's and the original
#: code's defaults, defined here once (the bank, its LangChain adapters and SiliconFriend use them).
DEFAULT_TOP_K = 2
DEFAULT_HISTORY_WINDOW = 7


SummaryTask = Literal[
    "daily_events",
    "daily_personality",
    "merge_events",
    "merge_personality",
    "global_events",
    "global_portrait",
]
#: Answer caps per summary task, in tokens: a day's events are one short paragraph, a personality
#: reading two or three sentences (measured with SmolLM2 on the paper's data: answers that run
#: to a larger cap only repeat themselves; the parser drops an unfinished last sentence).
TASK_OUTPUT_TOKENS: dict[str, int] = {
    "daily_events": 112,
    "daily_personality": 80,
    "merge_events": 112,
    "merge_personality": 80,
    "global_events": 160,
    "global_portrait": 112,
}


class SummaryConfig(BaseModel):
    """How summaries are made (:mod:`memory_bank.summaries`). Every field has a sensible default.

    The ``summaries:`` section of a bank's config, or a file of its own
    (``configs/summaries.yaml``, see :func:`memory_bank.summaries.config.load_summary_config`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    language: Language | None = Field(None, description="output language; default: the bank's")
    llm: str | dict[str, Any] | None = Field(
        None, description="LLM spec (see memory_bank.llm); default: the chat model in use"
    )
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
    max_output_tokens: int | None = Field(
        200, ge=16, description="cap on each summary call's answer (a summary needs no more); None: no cap"
    )
    task_output_tokens: dict[SummaryTask, int] = Field(
        default_factory=lambda: dict(TASK_OUTPUT_TOKENS),  # type: ignore[arg-type]
        description="cap on the answer per task (at most max_output_tokens); a task left out gets "
        "max_output_tokens",
    )
    max_reply_chars: int | None = Field(
        240,
        ge=40,
        description="the companion's part of each turn is cut to about this many characters in a "
        "daily summary's material (the user's words are kept whole): the summary is about the user, "
        "and the prompt stays short; None: whole replies",
    )
    max_input_tokens: int | None = Field(
        1200,
        ge=64,
        description="cap on the material of one call: longer days are summarised in parts "
        "(a small model on a CPU answers a short prompt far sooner); None: the whole context",
    )
    safety_tokens: int = Field(64, ge=0, description="margin for chat-template tokens and miscounts")
    max_summary_chars: int = Field(2000, ge=100, description="longer answers are cut at a sentence end")
    min_words: int = Field(3, ge=1, description="shorter answers count as junk (CJK: 2 chars per word)")
    max_depth: int = Field(6, ge=1, description="combine rounds for very long inputs before giving up")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


#: The selective rules off: forgetting by the calendar and recalls alone, as the paper describes.
CALENDAR_ONLY: dict[str, Any] = {"content_weights": False, "cold_tier": False}
#: The paper's curve as published: R = exp(-t/S) with t in days, stochastic drop with p = 1 - R.
PAPER_FORGETTING: dict[str, Any] = {"mode": "paper", "tau": 1.0, "policy": "stochastic", **CALENDAR_ONLY}


#: Forgetting off, one setting away from the default: ``forgetting: {mode: off}`` in a config
#: file, ``forgetting={"mode": "off"}`` in code, ``--forgetting off`` on the command lines.
FORGETTING_OFF: dict[str, Any] = {"mode": "off"}


class ForgettingConfig(_Strict):
    """How memories fade (see :mod:`memory_bank.forgetting`).

    The defaults are selective forgetting that loses no knowledge (:data:`SELECTIVE_FORGETTING`,
    measured in the README, Evaluation): a memory is forgotten when R = exp(-t / (tau * S))
    falls below 0.05, with tau 7 days times its content weight (small talk 1.75 days, personal
    statements 14), every recall restarts its clock, and forgotten memories stay in the ranking
    0.05 below live ones (the cold tier ranked jointly on every search). On LoCoMo dev it
    forgets 37% of the turns at recall@10 -0.2 points. :data:`FORGETTING_OFF` turns it off,
    :data:`PAPER_FORGETTING` is the paper's curve as published."""

    mode: ForgettingMode = "paper"

    @field_validator("mode", mode="before")
    @classmethod
    def _yaml_off(cls, v: Any) -> Any:
        """YAML reads an unquoted ``off`` (``forgetting: {mode: off}``) as false."""
        return "off" if v is False else v

    tau: float = Field(
        7.0, gt=0, description="time scale in days: R = exp(-t / (tau * S)); 1 is the paper's curve"
    )
    policy: ForgettingPolicy = "threshold"
    threshold: float = Field(0.05, ge=0, le=1, description="with policy=threshold, drop when R < threshold")
    seed: int | None = Field(
        None, description="seed for stochastic passes; a pass is reproducible per (seed, user, day)"
    )
    action: Literal["archive", "delete"] = "archive"
    daily_pass: bool = Field(
        True,
        description="run a user's pass on their first write each day (a turn added, a recall); "
        "searches never write: they decide what is forgotten from the clock",
    )
    kind_scales: dict[Literal["turn", "daily_summary"], float] = Field(
        default_factory=dict,
        description="multiplier of tau per kind, e.g. {daily_summary: 4}: summaries outlive their turns",
    )
    content_weights: bool = Field(
        True,
        description="scale tau by each turn's content weight, set when it is written "
        "(memory_bank.salience): small talk 0.25, chat 1, personal 2",
    )
    cold_tier: bool = Field(
        True,
        description="search forgotten (archived) memories too when the live ones match poorly; "
        "a recalled cold memory comes back to the live tier (not used with mode off)",
    )
    cold_below: float = Field(
        float("inf"),
        ge=0,
        description="consult the cold tier when the best live score is below this "
        "(.inf: on every search; with cold_rank=joint the live tier is then not ranked on its own)",
    )
    cold_rank: Literal["joint", "separate"] = Field(
        "joint",
        description="joint: rank live and forgotten memories as one candidate set, forgotten ones "
        "less cold_penalty; separate: rank the forgotten ones on their own and merge the lists by score",
    )
    cold_penalty: float = Field(
        0.05, ge=0, description="with cold_rank=joint, subtracted from a forgotten memory's score"
    )

    @field_validator("kind_scales")
    @classmethod
    def _positive_scales(cls, v: dict[str, float]) -> dict[str, float]:
        bad = {k: x for k, x in v.items() if not x > 0}
        if bad:
            raise ValueError(f"kind scales must be > 0, got {bad}")
        return v


#: The selective setting, the default (configs/forgetting.yaml spells it out): the defaults of
#: :class:`ForgettingConfig`, read from the class so there is one source of truth.
SELECTIVE_FORGETTING: dict[str, Any] = {
    key: ForgettingConfig.model_fields[key].default
    for key in (
        "mode",
        "tau",
        "policy",
        "threshold",
        "content_weights",
        "cold_tier",
        "cold_below",
        "cold_rank",
        "cold_penalty",
    )
}


class RetrievalConfig(_Strict):
    """Hybrid retrieval: dense cosine + CJK-aware BM25 + date hints + neighbouring-turn context.

    Each weight turns on one piece of the pipeline in :mod:`memory_bank.retrieval` (0 leaves it
    out): the terms ``dense``, ``lexical``, ``named_day`` (``date_weight``), ``named_month``;
    the stages ``day_evidence`` (``day_weight``, ``day_top``) and ``neighbour_lift``
    (``prev_turn_weight``, ``next_turn_weight``). ``candidates`` is N of the dense and lexical top N.
    """

    top_k: int = Field(DEFAULT_TOP_K, ge=1, le=1000)
    dense_weight: float = Field(1.0, ge=0)
    lexical_weight: float = Field(0.4, ge=0, description="weight of BM25 (scaled to 0..1 per query)")
    date_weight: float = Field(0.5, ge=0, description="bonus for memories on a day the query names")
    month_weight: float = Field(
        0.3, ge=0, description="bonus for memories in a month the query names without a day"
    )
    day_weight: float = Field(
        0.15,
        ge=0,
        description="share of the day's evidence (mean of its best candidates) added to each memory",
    )
    day_top: int = Field(3, ge=1, description="best candidates of a day averaged into its evidence")
    prev_turn_weight: float = Field(
        0.6, ge=0, le=1, description="how far a turn is lifted towards a higher-scoring previous turn"
    )
    next_turn_weight: float = Field(
        0.45, ge=0, le=1, description="how far a turn is lifted towards a higher-scoring next turn"
    )
    echo_weight: float = Field(
        1.0,
        ge=0,
        description="penalty for a turn whose question repeats the query (an earlier asking of it)",
    )
    echo_floor: float = Field(
        0.5, ge=0, lt=1, description="share of the query a turn's user words may repeat without penalty"
    )
    unanswered_weight: float = Field(
        0.2,
        ge=0,
        description='penalty for a turn whose question got only a question back ("could you remind me?")',
    )
    dialogue_lexical_scale: float = Field(
        0.5,
        ge=0,
        description="the lexical term's scale for a dialogue query (its many turns' words make "
        "BM25 noisier than a question's); 1 treats it like any query",
    )
    fusion: Literal["weighted_sum", "rrf"] = Field(
        "weighted_sum",
        description="how the dense and lexical scores combine: a weighted sum of the scores, "
        "or reciprocal-rank fusion of their ranks (memory_bank.retrieval.pipeline.ReciprocalRank)",
    )
    rrf_k: int = Field(
        60, ge=1, description="the k of reciprocal-rank fusion (rank r scores (k + 1) / (k + r))"
    )
    latest_turn_weight: float = Field(
        0.35,
        ge=0,
        le=1,
        description="share of the latest user turn in the query vector of a dialogue query "
        "(memory_bank.retrieval.dialogue); 0 embeds the query as one string",
    )
    chat_context_turns: int = Field(
        0,
        ge=0,
        le=100,
        description="recent turns of the conversation that a chat's memory search (SiliconFriend, "
        "MemoryBankMemory) writes before the user's message as a dialogue query "
        "(memory_bank.retrieval.dialogue.chat_query); 0 searches with the message alone",
    )
    candidates: int = Field(
        64, ge=1, description="candidates taken from each of the dense and lexical rankings"
    )
    include_summaries: bool = True


class MemoryBankConfig(_Strict):
    """Configuration of a :class:`memory_bank.MemoryBank`."""

    store: str = Field(
        "./memorybank_data",
        description="where memories live: a directory or sqlite:///DIR (SQLite), or postgresql://user@host/db",
    )
    language: Language = "en"
    encoders: dict[str, str] = Field(default_factory=lambda: dict(DEFAULT_ENCODERS))
    encoder: str | None = Field(None, description="overrides encoders[language]")
    history_window: int = Field(DEFAULT_HISTORY_WINDOW, ge=0, description="recent turns kept in the prompt")
    max_cached_users: int = Field(256, ge=1, description="per-user index partitions kept in memory")
    retrieval: RetrievalConfig = Field(default_factory=RetrievalConfig)
    forgetting: ForgettingConfig = Field(default_factory=ForgettingConfig)
    summaries: SummaryConfig = Field(
        default_factory=SummaryConfig, description="the summariser's settings (memory_bank.summaries)"
    )

    @field_validator("store")
    @classmethod
    def _named(cls, v: str) -> str:
        if not v.strip():  # an empty store: would have been the current folder
            raise ValueError("is empty; give a directory or a database URL")
        return v

    @field_validator("forgetting", mode="before")
    @classmethod
    def _forgetting_off(cls, v: Any) -> Any:
        """``forgetting: off`` (false to YAML) or ``forgetting: "off"``: forgetting off."""
        return {"mode": "off"} if v is False or v == "off" else v

    @field_validator("encoders")
    @classmethod
    def _known_languages(cls, v: dict[str, str]) -> dict[str, str]:
        merged = dict(DEFAULT_ENCODERS)
        merged.update(v)
        return merged

    def encoder_for(self, language: str | None = None) -> str:
        """The encoder name used for ``language`` (default: the bank's language)."""
        if self.encoder:
            return self.encoder
        return self.encoders[language or self.language]


def load_config(path: str | Path | None = None, **overrides: Any) -> MemoryBankConfig:
    """Load a YAML (or JSON) config file, apply keyword overrides, and validate.

    Nested overrides use dicts: ``load_config("c.yaml", forgetting={"mode": "paper"})``.
    """
    data: dict[str, Any] = {}
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise ConfigError(f"config file {str(p)!r} does not exist; pass an existing YAML file")
        import yaml

        try:
            loaded = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as e:
            raise ConfigError(f"config file {str(p)!r} is not valid YAML: {' '.join(str(e).split())}") from e
        except (OSError, UnicodeDecodeError) as e:
            raise ConfigError(f"cannot read config file {str(p)!r} ({e}); save it as UTF-8 text") from e
        if not isinstance(loaded, dict):
            raise ConfigError(
                f"config file {str(p)!r} must hold a mapping of options, not {type(loaded).__name__}"
            )
        data = loaded.get("memory_bank", loaded)
    for key, value in overrides.items():
        if value is None:
            continue
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    try:
        return MemoryBankConfig.model_validate(data)
    except ValidationError as e:
        problems = "; ".join(_problem(err) for err in e.errors())
        raise ConfigError(f"invalid memory bank configuration: {problems}") from e


def _problem(err: Any) -> str:
    """One validation error as ``where: what``, with the nearest known key for a misspelt one."""
    loc = [str(p) for p in err["loc"]]
    where = ".".join(loc)
    if err["type"] != "extra_forbidden":
        return f"{where}: {err['msg'].removeprefix('Value error, ')}"
    model: Any = MemoryBankConfig
    for part in loc[:-1]:
        field = model.model_fields.get(part)
        model = getattr(field, "annotation", None) if field is not None else None
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            return f"{where}: unknown key"
    near = difflib.get_close_matches(loc[-1], list(model.model_fields), n=1)
    return f"{where}: unknown key" + (f" (did you mean {near[0]!r}?)" if near else "")
