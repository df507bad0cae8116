"""Errors of the summariser (all :class:`memory_bank.errors.MemoryBankError`)."""

from __future__ import annotations

from memory_bank.errors import MemoryBankError


class SummaryError(MemoryBankError):
    """A summary could not be made (after retries); the layer stays due for the next run."""


class SummaryTimeoutError(SummaryError, TimeoutError):
    """An LLM call ran past ``call_timeout_s``; raise the limit or lower ``max_tokens``."""


class ContextTooSmallError(SummaryError):
    """The model's context leaves too little room to summarise anything; use a bigger context."""


class SummaryStoppedError(SummaryError):
    """The summariser was stopped (the app is shutting down); what was written is kept, and
    the layers not yet made stay due for the next run."""
