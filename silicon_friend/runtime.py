"""Putting an engine together from command-line style options (used by the web app and the
terminal chat): the memory bank, the chat model, the summariser and the day-rollover scheduler."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Any

from memory_bank import MemoryBank
from silicon_friend.engine import ChatSettings, SiliconFriend
from silicon_friend.models import LoadedModel, load_model

logger = logging.getLogger(__name__)

DEFAULT_DATA_DIR = "./memorybank_data"


@dataclasses.dataclass
class Options:
    """What the ``silicon-friend`` commands configure."""

    data_dir: str = DEFAULT_DATA_DIR
    llm: str | None = None
    language: str = "en"
    encoder: str | None = None
    config: str | None = None
    forgetting: str | None = None
    context_tokens: int | None = None
    summaries: bool = True
    timeout: float = 180.0
    settings: ChatSettings = dataclasses.field(default_factory=ChatSettings)


def open_bank(options: Options) -> MemoryBank:
    """The memory bank in ``options.data_dir`` (created if missing)."""
    overrides: dict[str, Any] = {"language": options.language}
    if options.encoder:
        overrides["encoder"] = options.encoder
    if options.forgetting:
        overrides["forgetting"] = {"mode": options.forgetting}
    Path(options.data_dir).expanduser().mkdir(parents=True, exist_ok=True)
    return MemoryBank.open(Path(options.data_dir).expanduser(), config_file=options.config, **overrides)


def summaries_for(bank: MemoryBank, model: LoadedModel, language: str) -> tuple[Any, Any]:
    """A ``(Summarizer, RolloverScheduler)`` pair, or ``(None, None)`` if the summaries package is absent."""
    try:
        from memory_bank.summaries import RolloverScheduler, Summarizer
    except ImportError as e:
        logger.warning("day summaries are off: %s", e)
        return None, None
    summarizer = Summarizer(bank, model.chat_model, language)
    return summarizer, RolloverScheduler(summarizer)


def build_engine(
    options: Options, *, model: LoadedModel | None = None, bank: MemoryBank | None = None
) -> SiliconFriend:
    """An engine for ``options``; loads the chat model (and the encoder on first use)."""
    model = model or load_model(options.llm, context_tokens=options.context_tokens)  # spec errors first
    bank = bank or open_bank(options)
    summarizer = scheduler = None
    if options.summaries:
        summarizer, scheduler = summaries_for(bank, model, options.language)
    return SiliconFriend(
        bank,
        model,
        language=options.language,
        settings=options.settings,
        summarizer=summarizer,
        scheduler=scheduler,
        first_token_timeout=options.timeout,
        idle_timeout=min(options.timeout, 60.0),
    )
