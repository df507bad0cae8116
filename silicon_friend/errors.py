"""SiliconFriend's error vocabulary.

Errors raised on purpose derive from :class:`SiliconFriendError`, which derives from
:class:`memory_bank.errors.MemoryBankError` so one ``except`` (and the CLI's one-line message and
exit code 2) covers the memory core and the app alike.
"""

from __future__ import annotations

from memory_bank.errors import InvalidInputError, MemoryBankError


class SiliconFriendError(MemoryBankError):
    """Base class of every error SiliconFriend raises on purpose."""


class ModelError(SiliconFriendError):
    """The chat model failed to reply: it raised, timed out, or returned nothing."""


class ModelTimeoutError(ModelError):
    """The chat model gave no (further) output within the time limit."""


class PromptTooLongError(ModelError, InvalidInputError):
    """The instruction and the user's message alone do not fit the model's context window."""


class NoSessionError(SiliconFriendError, InvalidInputError):
    """An action needs a user, but no one has said who they are yet."""


class SessionEndedError(SiliconFriendError, InvalidInputError):
    """The session's user was forgotten ("Forget me"): it takes no more messages."""


class SummaryFailedError(SiliconFriendError):
    """Some summaries could not be made (the others were); those keep their previous text.

    ``profile`` holds the global layers as they are now, so a UI can show them with the error.
    """

    def __init__(self, message: str, *, profile: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.profile = profile or {}
