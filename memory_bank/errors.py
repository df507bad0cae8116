"""The package's error vocabulary.

Every error raised on purpose by :mod:`memory_bank` derives from :class:`MemoryBankError`,
names the bad value and says how to fix it. Input errors also derive from :class:`ValueError`
so callers that already catch ``ValueError`` keep working.
"""

from __future__ import annotations


class MemoryBankError(Exception):
    """Base class of every error this package raises on purpose."""


class InvalidInputError(MemoryBankError, ValueError):
    """A value given by the caller is unusable (empty query, bad user name, bad date...)."""


class ConfigError(InvalidInputError):
    """A configuration file or option is invalid."""


class EncoderMismatchError(ConfigError):
    """The encoder asked for is not the one the store's vectors come from (see
    :mod:`memory_bank.encoder_identity`); the message names the store's encoder and the fix."""


class MemoryFileError(InvalidInputError):
    """A memory file (original MemoryBank JSON format) is malformed. The file is never modified."""


class UserNotFoundError(MemoryBankError, KeyError):
    """The store has no user of that name."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable.
        return str(self.args[0]) if self.args else "user not found"


class MemoryNotFoundError(MemoryBankError, KeyError):
    """The store has no memory with that id for that user."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "memory not found"


class MemoryDeletedError(MemoryBankError):
    """An add named a memory id that was deleted (a retry or replay of a turn the user deleted
    since): nothing is stored. :attr:`memory_id` and :attr:`deleted_on` say which and when."""

    def __init__(self, message: str, *, memory_id: str, deleted_on: str) -> None:
        super().__init__(message)
        self.memory_id = memory_id
        self.deleted_on = deleted_on


#: The store's refusals a person at a chat may meet, by key (``{store}`` names the store; the
#: rest is detail). A front end in another language matches a message against these templates
#: and says it in its own words (``silicon_friend.reasons``), so keep them in this one place.
STORE_REASONS: dict[str, str] = {
    "full": "the disk holding {store} is full; nothing of this change was written. Free some space and retry",
    "read_only": (
        "the store {store} is read-only for this user; reading works, writing needs write "
        "permission on the store directory and its files"
    ),
    "locked": (
        "another program held the store {store} for longer than the {seconds} s wait; nothing of "
        "this change was written. Try again, or close the program that holds it"
    ),
    "not_written": "could not write to the store {store}: {detail}",
    "pg_connect": "cannot connect to the PostgreSQL store {store}: {detail}",
    "pg_read": "reading the PostgreSQL store {store} failed: {detail}",
    "pg_write": "a write to the PostgreSQL store {store} failed: {detail}",
    "pg_conflict": "a write to {store} kept conflicting ({detail}); try again",
    "pg_lost": (
        "lost the connection to {store} during a write ({detail}); it may or may not have been "
        "saved: retry it with the same memory id to make it idempotent"
    ),
}


class StoreError(MemoryBankError):
    """The store on disk is missing, unreadable, or from an incompatible version."""

    @classmethod
    def of(cls, key: str, **values: object) -> StoreError:
        """The error of :data:`STORE_REASONS` ``key`` with ``values`` filled in."""
        return cls(STORE_REASONS[key].format(**values))


class StoreDamagedError(StoreError):
    """SQLite finds the store file damaged (``memorybank check`` lists what, ``memorybank export
    --salvage`` saves what still reads)."""


class MissingDependencyError(MemoryBankError, ImportError):
    """An optional dependency is not installed; the message gives the pip command."""


def require(module: str, extra: str) -> object:
    """Import an optional dependency or fail with the exact install command."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise MissingDependencyError(
            f"{module!r} is not installed; install it with: pip install 'memorybank-siliconfriend[{extra}]'"
        ) from e
