"""The languages the project speaks, and the memory words every prompt table shares.

English and Chinese are first-class everywhere. Each module keeps its own wording in one table
per language (the summariser's prompts, the LangChain memory block, SiliconFriend's prompt, the
judge); what they have in common is defined here once: the list of languages, the speaker labels
of a dialogue, the label of a day's event summary among the memories, and the lookup that names
the languages on offer when one is missing.

>>> memory_words("zh").user
'用户'
>>> pick({"en": 1}, "fr", "greeting")
Traceback (most recent call last):
    ...
memory_bank.errors.InvalidInputError: no greeting for language 'fr'; use one of en
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Literal, TypeVar, get_args

from memory_bank.errors import InvalidInputError

Language = Literal["en", "zh"]
#: Every language with prompts, encoders and UI texts.
LANGUAGES: tuple[str, ...] = get_args(Language)

T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class MemoryWords:
    """How memories are labelled in a prompt, in one language."""

    user: str  #: the user's lines in a dialogue
    ai: str  #: the assistant's lines
    day_summary: str  #: a day's event summary among retrieved memories


WORDS: Mapping[str, MemoryWords] = {
    "en": MemoryWords(user="User", ai="AI", day_summary="Summary of the day"),
    "zh": MemoryWords(user="用户", ai="AI", day_summary="当天总结"),
}


def pick(table: Mapping[str, T], language: str, what: str) -> T:
    """``table[language]``, or an :class:`InvalidInputError` naming ``what`` and the languages
    ``table`` has."""
    try:
        return table[language]
    except KeyError:
        raise InvalidInputError(
            f"no {what} for language {language!r}; use one of {', '.join(table)}"
        ) from None


def memory_words(language: str) -> MemoryWords:
    """The memory words of ``language`` (``en`` or ``zh``)."""
    return pick(WORDS, language, "memory labels")
