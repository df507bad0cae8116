"""Encoder ensembles: the weighted mean of several encoders' cosines, as one vector per text.

Two encoders trained on different data err on different memories, so the mean of their
cosines can rank better than either. Each text is embedded by every member on its own; the
ensemble's vector is the concatenation of the members' unit vectors, each scaled by the square
root of its weight (weights summing to 1)::

    [sqrt(w1) a1, sqrt(w2) a2] . [sqrt(w1) b1, sqrt(w2) b2] = w1 cos(a1, b1) + w2 cos(a2, b2)

The concatenation is itself a unit vector, so an ensemble is an ordinary
:class:`~memory_bank.embeddings.Encoder`: the index, the stores (one vector per memory, of the
summed dimension) and the record of which encoder built a store need nothing new. A store
built with ``minilm+use-multilingual`` is refused to a plain ``minilm`` query, as any other
pair of encoders is.

Names: ``a+b`` (equal weights) or ``a@0.6+b@0.4`` (weights, normalised to sum 1), each member
any name :func:`~memory_bank.embeddings.get_encoder` knows except another ensemble.

>>> from memory_bank.embeddings import HashingEncoder
>>> enc = EnsembleEncoder([(HashingEncoder(8), 0.5), (HashingEncoder(16), 0.5)])
>>> enc.name, enc.dim
('hashing-8+hashing-16', 24)
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from memory_bank.embeddings import Encoder
from memory_bank.errors import ConfigError

#: Separates an ensemble's members in its name; ``@`` separates a member from its weight.
MEMBER_SEP = "+"
WEIGHT_SEP = "@"


def parse_ensemble(name: str) -> list[tuple[str, float]] | None:
    """The members of ensemble ``name`` with their weights (summing to 1), or ``None`` when
    ``name`` is a single encoder. A bad weight is a :class:`ConfigError` naming it."""
    if MEMBER_SEP not in name:
        return None
    members: list[tuple[str, float]] = []
    for part in name.split(MEMBER_SEP):
        member, _, weight = part.strip().partition(WEIGHT_SEP)
        try:
            w = float(weight) if weight else 1.0
        except ValueError:
            w = -1.0
        if not member or not math.isfinite(w) or w <= 0:
            raise ConfigError(
                f"encoder {name!r}: each member of an ensemble is NAME or NAME@WEIGHT with a weight "
                f"above 0, e.g. minilm@0.5+use-multilingual@0.5 (got {part!r})"
            )
        members.append((member, w))
    if len(members) < 2:
        raise ConfigError(
            f"encoder {name!r}: an ensemble needs two members or more, e.g. minilm+use-multilingual"
        )
    total = sum(w for _, w in members)
    return [(m, w / total) for m, w in members]


def ensemble_name(members: Sequence[tuple[str, float]]) -> str:
    """The canonical name of an ensemble: ``a+b`` with equal weights, else ``a@w1+b@w2``."""
    total = sum(w for _, w in members)
    shares = [w / total for _, w in members]
    if max(shares) - min(shares) < 1e-9:
        return MEMBER_SEP.join(m for m, _ in members)
    return MEMBER_SEP.join(f"{m}{WEIGHT_SEP}{s:g}" for (m, _), s in zip(members, shares, strict=True))


class EnsembleEncoder(Encoder):
    """Several encoders as one: each embeds every text, the scaled unit vectors are joined
    (see the module docstring), so the inner product is the weighted mean of their cosines."""

    def __init__(self, members: Sequence[tuple[Encoder, float]]) -> None:
        if len(members) < 2:
            raise ConfigError("an encoder ensemble needs two members or more")
        total = sum(w for _, w in members)
        self.members = [(enc, w / total) for enc, w in members]
        self.name = ensemble_name([(enc.name, w) for enc, w in self.members])
        self.dim = sum(enc.dim for enc, _ in self.members)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        parts = []
        for enc, w in self.members:
            vecs = np.asarray(enc.encode(texts), dtype=np.float32)
            norms = np.linalg.norm(vecs, axis=1, keepdims=True)
            norms[norms == 0] = 1.0
            parts.append(vecs * (math.sqrt(w) / norms))
        return np.ascontiguousarray(np.concatenate(parts, axis=1), dtype=np.float32)
