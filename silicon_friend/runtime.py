"""Putting an engine together from command-line style options (used by the web app and the
terminal chat): the memory bank, the chat model, the summariser and the day-rollover scheduler.

The bank's config (``--config FILE``) is the one source of the memory settings: memories per
reply (``retrieval.top_k``), the turns kept in the prompt (``history_window``), forgetting and
the summariser (``summaries:``, or a ``--summary-config`` file over it). Options given
explicitly (``--top-k``, ``--history-turns``, ``--forgetting``, ``--language``) override it.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from memory_bank.bank import MemoryBank
from memory_bank.config import SummaryConfig, load_config
from memory_bank.errors import StoreError
from memory_bank.stores.sqlite import DB_FILENAME
from memory_bank.stores.sqlite import directory as sqlite_directory
from silicon_friend.engine import ChatSettings, SiliconFriend
from silicon_friend.models import LoadedModel, load_model

logger = logging.getLogger(__name__)

DEFAULT_DATA_DIR = "./memorybank_data"


@dataclasses.dataclass
class Options:
    """What the ``silicon-friend`` commands configure.

    ``top_k`` and ``history_turns`` left ``None`` come from the bank's config; ``settings``
    holds the generation settings (temperature, top-p, reply length).
    """

    #: ``None``: the ``store:`` of ``config``, else :data:`DEFAULT_DATA_DIR`.
    data_dir: str | None = DEFAULT_DATA_DIR
    llm: str | None = None
    #: hf models: run the Python code a model folder ships (see memory_bank.llm.LLMSpec).
    trust_remote_code: bool = False
    language: str = "en"
    encoder: str | None = None
    config: str | None = None
    forgetting: str | None = None
    context_tokens: int | None = None
    summaries: bool = True
    summary_config: str | None = None
    timeout: float = 180.0
    settings: ChatSettings = dataclasses.field(default_factory=ChatSettings)
    top_k: int | None = None
    history_turns: int | None = None


def open_bank(options: Options) -> MemoryBank:
    """The memory bank in ``options.data_dir`` (created if missing)."""
    overrides: dict[str, Any] = {"language": options.language}
    if options.encoder:
        overrides["encoder"] = options.encoder
    if options.forgetting:
        overrides["forgetting"] = {"mode": options.forgetting}
    store = options.data_dir
    if store is None:
        configured = load_config(options.config) if options.config else None
        store = configured.store if configured and "store" in configured.model_fields_set else DEFAULT_DATA_DIR
    if "://" in store and not store.startswith("sqlite:"):  # a database URL: nothing to make here
        bank = MemoryBank.open(store, config_file=options.config, **overrides)
    else:
        where = sqlite_directory(store)
        existed = (where / DB_FILENAME).exists()
        try:
            where.mkdir(parents=True, exist_ok=True)
        except OSError as e:  # a file there, a read-only or missing mount
            raise StoreError(
                f"cannot use {str(where)!r} as the data directory ({e.strerror or e}); give --data-dir a "
                "directory this user can write"
            ) from e
        bank = MemoryBank.open(where, config_file=options.config, **overrides)
        if not existed:  # a mistyped --data-dir would otherwise look like every memory gone
            logger.warning("created a new memory store in %s", where.resolve())
    try:
        # --encoder that is not the store's, or cannot load: refused at start, not mid-chat
        bank.check_encoder(load_new=bool(options.encoder))
    except BaseException:
        bank.close()
        raise
    return bank


def chat_settings(options: Options, bank: MemoryBank) -> ChatSettings:
    """``options.settings`` with the memory settings filled in: the explicit options, else the
    bank's config (``retrieval.top_k``, ``history_window``)."""
    return dataclasses.replace(
        options.settings,
        top_k=bank.config.retrieval.top_k if options.top_k is None else options.top_k,
        history_turns=bank.config.history_window if options.history_turns is None else options.history_turns,
    )


def summary_config(options: Options, bank: MemoryBank) -> SummaryConfig:
    """The summariser's config: the bank config's ``summaries:`` section, then the
    ``--summary-config`` file over it, in the chat's language unless one of them names one."""
    from memory_bank.summaries.config import load_summary_config

    cfg = load_summary_config(options.summary_config, base=bank.config.summaries)
    return cfg if cfg.language else cfg.model_copy(update={"language": options.language})


def summaries_for(
    bank: MemoryBank, model: LoadedModel, language: str, config: SummaryConfig | None = None
) -> tuple[Any, Any]:
    """A ``(Summarizer, RolloverScheduler)`` pair, or ``(None, None)`` if the summaries package is absent.

    The summaries are made by ``config.llm`` when it names a model, else by the chat model.
    """
    try:
        from memory_bank.summaries import RolloverScheduler, Summarizer
    except ImportError as e:
        logger.warning("day summaries are off: %s", e)
        return None, None
    config = config or SummaryConfig()
    chat_model = model.chat_model
    if config.llm is not None:
        from memory_bank.summaries.summarizer import summary_model

        chat_model, config = summary_model(config)
    summarizer = Summarizer(bank, chat_model, config.language or language, config=config)
    return summarizer, RolloverScheduler(summarizer)


def build_engine(
    options: Options, *, model: LoadedModel | None = None, bank: MemoryBank | None = None
) -> SiliconFriend:
    """An engine for ``options``; loads the chat model (and the encoder on first use)."""
    model = model or load_model(  # spec errors first
        options.llm, context_tokens=options.context_tokens, trust_remote_code=options.trust_remote_code
    )
    bank = bank or open_bank(options)
    summarizer = scheduler = None
    if options.summaries:
        summarizer, scheduler = summaries_for(bank, model, options.language, summary_config(options, bank))
    return SiliconFriend(
        bank,
        model,
        language=options.language,
        settings=chat_settings(options, bank),
        summarizer=summarizer,
        scheduler=scheduler,
        first_token_timeout=options.timeout,
        idle_timeout=min(options.timeout, 60.0),
    )
