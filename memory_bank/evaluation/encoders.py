"""An embedding cache for benchmark runs.

A benchmark embeds the same texts many times: the dense baseline, MemoryBank itself, forgetting
on and off, and every rerun while tuning. :class:`CachingEncoder` wraps any
:class:`~memory_bank.embeddings.Encoder` and remembers vectors by text (optionally on disk, as
one ``.npz`` file per encoder), so each distinct text is embedded once. An ensemble
(:mod:`memory_bank.ensemble_encoder`) is cached member by member, so its runs reuse the
vectors of runs with each member alone. It reports the wrapped
encoder's ``name`` and ``dim``, so a bank sees no difference.

>>> from memory_bank.embeddings import HashingEncoder
>>> enc = CachingEncoder(HashingEncoder(64))
>>> _ = enc.encode(["a cat", "a dog"]); _ = enc.encode(["a cat"])
>>> enc.computed
2
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from memory_bank.embeddings import Encoder
from memory_bank.ensemble_encoder import EnsembleEncoder

logger = logging.getLogger(__name__)


def _key(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()


class CachingEncoder(Encoder):
    """``base`` with a text -> vector cache; ``cache_dir`` keeps it between runs."""

    def __init__(self, base: Encoder, cache_dir: str | Path | None = None) -> None:
        self.base = base
        self.name = base.name
        self.dim = base.dim
        self.computed = 0
        self._lock = threading.Lock()
        self._vectors: dict[str, np.ndarray] = {}
        self._dirty = False
        self._file: Path | None = None
        self._members: list[CachingEncoder] = []
        if isinstance(base, EnsembleEncoder):
            self._members = [CachingEncoder(enc, cache_dir) for enc, _ in base.members]
            weights = [w for _, w in base.members]
            self.base = EnsembleEncoder(list(zip(self._members, weights, strict=True)))
            return
        if cache_dir is not None:
            safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in base.name)
            self._file = Path(cache_dir) / f"embeddings-{safe}.npz"
            if self._file.is_file():
                with np.load(self._file) as data:
                    keys, vecs = data["keys"], data["vectors"]
                    if vecs.ndim == 2 and vecs.shape[1] == self.dim:
                        self._vectors = {str(k): v for k, v in zip(keys.tolist(), vecs, strict=True)}

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if self._members:
            before = sum(m.computed for m in self._members)
            out = self.base.encode(texts)
            self.computed += sum(m.computed for m in self._members) - before
            return out
        keys = [_key(t) for t in texts]
        with self._lock:
            todo = list(dict.fromkeys(k for k in keys if k not in self._vectors))
        if todo:
            first = {k: t for k, t in zip(keys, texts, strict=True)}
            vecs = self.base.encode([first[k] for k in todo])
            with self._lock:
                for k, v in zip(todo, vecs, strict=True):
                    self._vectors[k] = np.asarray(v, dtype=np.float32)
                self.computed += len(todo)
                self._dirty = True
        with self._lock:
            out = np.stack([self._vectors[k] for k in keys]) if keys else np.zeros((0, self.dim), np.float32)
        return np.ascontiguousarray(out, dtype=np.float32)

    def save(self) -> None:
        """Write the cache file (when a ``cache_dir`` was given and something new was embedded)."""
        for member in self._members:
            member.save()
        if self._file is None or not self._dirty:
            return
        self._file.parent.mkdir(parents=True, exist_ok=True)
        with self._lock:
            keys = np.array(list(self._vectors), dtype="U32")
            vecs = np.stack(list(self._vectors.values())) if self._vectors else np.zeros((0, self.dim))
            self._dirty = False
        tmp = self._file.with_suffix(".tmp.npz")
        np.savez(tmp, keys=keys, vectors=vecs.astype(np.float32))
        tmp.replace(self._file)
        logger.info("saved %d cached embeddings to %s", len(keys), self._file)


def eval_encoder(name: str | None, language: str, cache_dir: str | Path | None = None) -> CachingEncoder:
    """The encoder an evaluation uses: ``name``, or the language's default, behind a cache
    (kept in ``cache_dir`` between runs when given)."""
    from memory_bank.config import DEFAULT_ENCODERS
    from memory_bank.embeddings import get_encoder

    return CachingEncoder(get_encoder(name or DEFAULT_ENCODERS[language]), cache_dir)
