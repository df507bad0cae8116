"""MemoryBank: long-term memory for LLM chatbots (Zhong et al., AAAI 2024).

Three layers of memory per user (dated dialog turns; daily and global event summaries; daily
and global personality portraits), hybrid dense + lexical retrieval over per-user FAISS
partitions, and Ebbinghaus forgetting with reinforcement on recall.

Importing this package loads no model and touches no file; see :class:`MemoryBank`.
"""

from memory_bank.bank import ForgetReport, MemoryBank
from memory_bank.config import ForgettingConfig, MemoryBankConfig, RetrievalConfig, load_config
from memory_bank.errors import (
    ConfigError,
    InvalidInputError,
    MemoryBankError,
    MemoryDeletedError,
    MemoryFileError,
    MemoryNotFoundError,
    StoreError,
    UserNotFoundError,
)
from memory_bank.explain import Explanation
from memory_bank.forgetting import retention
from memory_bank.records import Memory, MemoryKind, SearchResult

__all__ = [
    "ConfigError",
    "Explanation",
    "ForgetReport",
    "ForgettingConfig",
    "InvalidInputError",
    "Memory",
    "MemoryBank",
    "MemoryBankConfig",
    "MemoryBankError",
    "MemoryDeletedError",
    "MemoryFileError",
    "MemoryKind",
    "MemoryNotFoundError",
    "RetrievalConfig",
    "SearchResult",
    "StoreError",
    "UserNotFoundError",
    "load_config",
    "retention",
]
__version__ = "0.1.0"
