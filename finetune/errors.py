"""The error vocabulary of the fine-tuning package.

Every error raised on purpose by :mod:`finetune` derives from :class:`FinetuneError`, so a caller (or
the command line, which turns them into one line and exit code 2) can catch them all at once. Messages
name the bad value and say how to fix it.
"""

from __future__ import annotations


class FinetuneError(Exception):
    """Base class of every error raised on purpose by :mod:`finetune`."""


class ConfigError(FinetuneError, ValueError):
    """A training or evaluation config is invalid (unknown key, bad value, unreadable file)."""


class DataError(FinetuneError, ValueError):
    """A dataset file or record is malformed; the message names the file and the line."""


class FormatError(FinetuneError, ValueError):
    """A prompt format is unknown, or a conversation cannot be rendered in it."""


class ModelLoadError(FinetuneError, RuntimeError):
    """A model, tokenizer or adapter cannot be found or loaded."""


class MissingDependencyError(FinetuneError, ImportError):
    """An optional dependency is not installed; the message gives the exact ``pip install`` line."""
