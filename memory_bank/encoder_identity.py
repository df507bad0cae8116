"""Which encoder a store's vectors come from, and whether an encoder may read or write them.

Vectors from two encoders cannot be compared: a query embedded by ``minilm`` against a store
embedded by ``use-multilingual`` finds nothing, and silently so. A store therefore remembers its
encoder in its ``meta`` table (keys :data:`NAME_KEY`, :data:`DIM_KEY`, :data:`PROBE_KEY`), set
when the first vectors are written: the encoder's name, its dimension and a fingerprint (the
first components of its vector for a fixed bilingual sentence), which tells a model that
changed under the same name (another checkpoint in the same directory) from the one that wrote
the store.

A store written before stores remembered their encoder adopts the encoder its vectors were
stored with (each vector row names it), else the first encoder that writes vectors into it;
the fingerprint is taken from the first encoder of that name that writes.

The rule that uses this record lives in :meth:`memory_bank.bank.MemoryBank.encoder`: an encoder
that was asked for by name (``--encoder``, the config key ``encoder``, an instance) and is not
the store's is refused with :class:`~memory_bank.errors.EncoderMismatchError`; one that only
follows from the language (``--language``) gives way to the store's own encoder.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import weakref
from collections.abc import Mapping

import numpy as np

from memory_bank.embeddings import Encoder

NAME_KEY = "encoder"
DIM_KEY = "encoder_dim"
PROBE_KEY = "encoder_fingerprint"
#: The encoder a ``reembed`` under way (or interrupted) is switching the store to; "" once done.
SWITCHING_KEY = "encoder_switching_to"

#: The sentence whose vector fingerprints an encoder (both languages, so a model that reads one
#: of them as unknown tokens is still told apart).
PROBE_TEXT = "MemoryBank encoder fingerprint: I adopted a cat named Miso. 我养了一只叫味噌的猫。"
#: How many leading components of the probe's vector the fingerprint keeps.
PROBE_SIZE = 32
#: The least cosine between two fingerprints of "the same model" (ONNX Runtime and PyTorch give
#: the same vectors up to rounding; two different models are nowhere near).
SAME_MODEL = 0.99


@dataclasses.dataclass(frozen=True)
class StoreEncoder:
    """The encoder a store's vectors come from; ``fingerprint`` is ``None`` until recorded."""

    name: str
    dim: int
    fingerprint: str | None = None


def recorded(meta: Mapping[str, str]) -> StoreEncoder | None:
    """The encoder recorded in a store's ``meta``, if any."""
    name = meta.get(NAME_KEY)
    if not name:
        return None
    try:
        dim = int(meta.get(DIM_KEY, "0"))
    except ValueError:
        dim = 0
    return StoreEncoder(name, dim, meta.get(PROBE_KEY) or None)


def from_vectors(counts: Mapping[tuple[str, int], int]) -> StoreEncoder | None:
    """The encoder most of an older store's vectors name (``(encoder, dim) -> count``), if any."""
    if not counts:
        return None
    (name, dim), _ = max(counts.items(), key=lambda kv: (kv[1], kv[0]))
    return StoreEncoder(name, int(dim))


#: Fingerprints of the encoders seen in this process (a model is fingerprinted once).
_FINGERPRINTS: weakref.WeakKeyDictionary[Encoder, str] = weakref.WeakKeyDictionary()


def fingerprint(encoder: Encoder) -> str:
    """The encoder's fingerprint: the first :data:`PROBE_SIZE` components of the probe's vector."""
    try:
        return _FINGERPRINTS[encoder]
    except (KeyError, TypeError):
        pass
    vec = np.asarray(encoder.encode([PROBE_TEXT]), dtype=np.float64).reshape(-1)[:PROBE_SIZE]
    found = json.dumps([round(float(x), 4) for x in vec])
    with contextlib.suppress(TypeError):  # an encoder that cannot be weakly referenced
        _FINGERPRINTS[encoder] = found
    return found


def same_model(a: str, b: str) -> bool:
    """Whether two fingerprints come from the same model (cosine at least :data:`SAME_MODEL`)."""
    try:
        x, y = np.asarray(json.loads(a), dtype=np.float64), np.asarray(json.loads(b), dtype=np.float64)
    except (ValueError, TypeError):
        return False
    if x.shape != y.shape or not x.size:
        return False
    nx, ny = float(np.linalg.norm(x)), float(np.linalg.norm(y))
    if nx == 0 or ny == 0:
        return nx == ny
    return float(x @ y) / (nx * ny) >= SAME_MODEL


def meta_of(encoder: Encoder) -> dict[str, str]:
    """What a store records of ``encoder`` (see the module docstring)."""
    return {NAME_KEY: encoder.name, DIM_KEY: str(int(encoder.dim)), PROBE_KEY: fingerprint(encoder)}


def difference(stored: StoreEncoder, encoder: Encoder) -> str | None:
    """Why ``encoder``, named like the store's, still cannot use its vectors (or ``None``)."""
    if stored.dim and int(encoder.dim) != stored.dim:
        return f"it gives {encoder.dim}-d vectors, the store's are {stored.dim}-d"
    if stored.fingerprint is not None and not same_model(stored.fingerprint, fingerprint(encoder)):
        return "it is another model than the one that wrote the store (its vectors differ)"
    return None


def describe(stored: StoreEncoder) -> str:
    """``'use-multilingual' (512-d)``: the store's encoder, for messages."""
    return f"{stored.name!r} ({stored.dim}-d)" if stored.dim else repr(stored.name)
