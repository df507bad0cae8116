"""Cutting material into chunks that fit a token budget, in order, losing nothing.

A long day's dialogue (or many days of summaries) is packed into consecutive chunks under the
budget the prompt leaves; a single piece larger than the budget (a very long message) is cut at
sentence ends or spaces. Tokens are counted by the model's tokenizer when it has one.

>>> chunker = Chunker(lambda text: len(text.split()))
>>> [[u.text for u in c] for c in chunker.pack([Unit("1", "1", "a b c"), Unit("2", "2", "d e")], budget=5)]
[['a b c'], ['d e']]
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable


@dataclasses.dataclass(frozen=True)
class Unit:
    """A piece of material (a turn, a day's summary, a partial answer) and the span it covers
    (turn numbers or days), used to label the chunk it ends up in."""

    first: str
    last: str
    text: str


class Chunker:
    """Packs :class:`Unit` s into chunks of at most ``budget`` tokens under ``count``."""

    def __init__(self, count: Callable[[str], int]) -> None:
        self.count = count

    def pack(self, units: list[Unit], budget: int) -> list[list[Unit]]:
        """Consecutive units in chunks that each fit ``budget`` (one token per line break)."""
        chunks: list[list[Unit]] = []
        current: list[Unit] = []
        used = 0
        for unit in units:
            n = self.count(unit.text) + 1
            pieces = (
                [unit]
                if n <= budget
                else [Unit(unit.first, unit.last, p) for p in self.split(unit.text, budget - 1)]
            )
            for piece in pieces:
                n = self.count(piece.text) + 1
                if current and used + n > budget:
                    chunks.append(current)
                    current, used = [], 0
                current.append(piece)
                used += n
        if current:
            chunks.append(current)
        return chunks

    def split(self, text: str, budget: int) -> list[str]:
        """Cut ``text`` into pieces of at most ``budget`` tokens, at sentence ends or spaces."""
        pieces: list[str] = []
        rest = text
        while rest:
            total = self.count(rest)
            if total <= budget:
                pieces.append(rest)
                break
            size = max(1, int(len(rest) * budget / total * 0.9))
            while True:
                cut = cut_point(rest, size)
                if size == 1 or self.count(rest[:cut]) <= budget:
                    break
                size = max(1, int(size * 0.7))
            pieces.append(rest[:cut].strip())
            rest = rest[cut:].strip()
        return [p for p in pieces if p]


def cut_point(text: str, size: int) -> int:
    """The best place at or before ``size`` to cut ``text``: after a sentence end, else a space."""
    window = text[:size]
    for marks in (".!?。！？\n", " ，,；;、"):
        best = max(window.rfind(ch) for ch in marks)
        if best >= size // 2:
            return best + 1
    return size
