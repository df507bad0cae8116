"""Run a sentence-transformers text encoder with ONNX Runtime: the same vectors, 1.7-2.4x faster.

A chat message is embedded once per search and once per stored turn, one text at a time. With
PyTorch, all-MiniLM-L6-v2 spends most of those milliseconds in per-operator overhead (6-15 ms for
one sentence on one core here); ONNX Runtime runs the same graph 2.4x faster for a short message
and 1.7x for a long turn. The model is exported once from the weights already installed
(``torch.onnx.export``; no download, and ``optimum`` does not support transformers 5), cached on
disk, and checked against the PyTorch model on probe sentences once per export: if the vectors
differ by more than :data:`TOLERANCE` (a different export, a corrupted file) the file is rebuilt,
and if that fails the encoder keeps PyTorch. A passed check is recorded next to the file (its
size and modification time); a later load of the same file skips it (it cost seconds at every
start), and a changed or unreadable file is checked, or rebuilt, again. Tokenisation, pooling and normalisation
stay sentence-transformers' own, so stored vectors do not change and no store needs re-embedding.

Supported: a transformer followed by mean or CLS pooling and an optional normalisation (the
layout of all-MiniLM-L6-v2 and most sentence-transformers text encoders). Anything else stays on
PyTorch. ``MEMORYBANK_ENCODER_BACKEND=torch`` turns this off; ``=onnx`` makes a failure an error.
The cache folder is ``$MEMORYBANK_CACHE_DIR`` (default ``~/.cache/memorybank``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)

#: Largest absolute difference allowed between ONNX Runtime's and PyTorch's normalised vectors.
TOLERANCE = 1e-4
#: Sentences the exported model is checked on (English, Chinese, long, padded together).
PROBES = (
    "What did we talk about last weekend?",
    "我上周去厦门旅行，最喜欢鼓浪屿。",
    "I went to the concert with my sister and we sang along all night; " * 6,
)
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def cache_dir() -> Path:
    return Path(os.environ.get("MEMORYBANK_CACHE_DIR") or Path.home() / ".cache" / "memorybank")


def backend_setting() -> str:
    value = os.environ.get("MEMORYBANK_ENCODER_BACKEND", "auto").strip().lower() or "auto"
    if value not in ("auto", "onnx", "torch"):
        from memory_bank.errors import ConfigError

        raise ConfigError(f"MEMORYBANK_ENCODER_BACKEND={value!r}: use auto, onnx or torch")
    return value


def _pooling(model: Any) -> tuple[str, bool] | None:
    """``(mode, normalise)`` when ``model`` is transformer + mean/CLS pooling [+ normalise]."""
    modules = list(model)
    if not 2 <= len(modules) <= 3 or not hasattr(modules[0], "auto_model"):
        return None
    config = modules[1].get_config_dict() if hasattr(modules[1], "get_config_dict") else {}
    mode = config.get("pooling_mode")
    if mode not in ("mean", "cls"):
        return None
    normalise = len(modules) == 3
    if normalise and type(modules[2]).__name__ != "Normalize":
        return None
    return mode, normalise


def _fingerprint(model: Any, where: str) -> str:
    """Changes when the weights, their files, or the exporting libraries change."""
    import onnxruntime
    import torch

    h = hashlib.sha256(f"{where}|{torch.__version__}|{onnxruntime.__version__}".encode())
    folder = Path(where)
    if folder.is_dir():
        for f in sorted(folder.rglob("*")):
            if f.is_file() and f.suffix in (".safetensors", ".bin", ".json", ".txt"):
                st = f.stat()
                h.update(f"{f.relative_to(folder)}|{st.st_size}|{st.st_mtime_ns}".encode())
    else:  # a hub name: the weights' tensors identify the export
        for name, p in list(model[0].auto_model.state_dict().items())[:4]:
            h.update(name.encode() + p.detach().cpu().numpy().tobytes()[:4096])
    return h.hexdigest()[:16]


def _export(model: Any, path: Path) -> None:
    import torch

    transformer = model[0].auto_model.eval()
    features = model[0].preprocess(["hello world"])
    names = [n for n in _INPUTS if n in features]

    class Graph(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.transformer = transformer

        def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
            return self.transformer(**dict(zip(names, inputs, strict=True))).last_hidden_state

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name, suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        axes = {n: {0: "batch", 1: "tokens"} for n in [*names, "last_hidden_state"]}
        with torch.inference_mode(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # tracer notes on shapes; the result is checked on load
            torch.onnx.export(
                Graph(),
                tuple(features[n] for n in names),
                tmp,
                input_names=names,
                output_names=["last_hidden_state"],
                dynamic_axes=axes,
                opset_version=17,
                dynamo=False,
            )
        os.replace(tmp, path)  # atomic: a concurrent exporter or reader never sees half a file
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _stamp(path: Path) -> dict[str, int]:
    st = path.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns}


def _marker(path: Path) -> Path:
    return path.with_name(path.name + ".checked.json")


def _was_checked(path: Path) -> bool:
    """Whether this very file passed the PyTorch cross-check before."""
    try:
        return bool(json.loads(_marker(path).read_text(encoding="utf-8")).get("file") == _stamp(path))
    except (OSError, ValueError, AttributeError):
        return False


def _record_check(path: Path, diff: float) -> None:
    try:
        record = {"file": _stamp(path), "difference": diff, "tolerance": TOLERANCE}
        _marker(path).write_text(json.dumps(record), encoding="utf-8")
    except OSError as e:  # a read-only cache: the check simply runs again next time
        logger.info("could not record the ONNX check of %s: %s", path, e)


class OnnxTextEncoder:
    """The ONNX Runtime twin of a sentence-transformers model (see the module docstring)."""

    def __init__(self, model: Any, path: Path, pooling: tuple[str, bool], threads: int) -> None:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        # The pool's threads spin between a run's operators (a single query takes 5.3-5.9 ms;
        # 7.9 ms with no spinning at all) but stop when the run ends: left spinning they keep
        # the other cores busy for milliseconds after every query, just when the search that
        # follows scans BM25 and the dense lists on two threads (a million memories: the
        # chat reply's memory work 7.9-8.0 ms spinning, 6.5-6.7 ms stopped) and the model
        # writes the reply. ``docs/perf/scale.md``, round 12.
        options.add_session_config_entry("session.force_spinning_stop", "1")
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3
        self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self.inputs = [i.name for i in self.session.get_inputs()]
        self.model = model
        self.mode, self.normalise = pooling
        self.dim = int(model[0].auto_model.config.hidden_size)
        self.path = path

    @classmethod
    def load(cls, model: Any, where: str) -> OnnxTextEncoder | None:
        """The ONNX twin of ``model`` (exported on first use), or ``None`` when not supported."""
        pooling = _pooling(model)
        if pooling is None:
            logger.info("encoder %s: layout not supported by the ONNX path; using PyTorch", where)
            return None
        import torch

        threads = max(1, min(torch.get_num_threads(), os.cpu_count() or 1))
        path = cache_dir() / "onnx" / f"{Path(where).name or 'model'}-{_fingerprint(model, where)}.onnx"
        if not path.is_file():
            _export(model, path)
        try:
            runner = cls(model, path, pooling, threads)
            if _was_checked(path):
                return runner
            diff = runner.difference()
        except Exception as e:  # an unreadable or truncated file: export again below
            diff, why = float("inf"), f"{type(e).__name__}: {e}"
        else:
            if diff <= TOLERANCE:
                _record_check(path, diff)
                return runner
            why = f"its vectors differ from PyTorch's by {diff:.2g}"
        logger.warning("cached ONNX model %s is unusable (%s); exporting it again", path, why)
        _export(model, path)
        runner = cls(model, path, pooling, threads)
        diff = runner.difference()
        if diff > TOLERANCE:
            raise RuntimeError(f"ONNX Runtime's vectors differ from PyTorch's by {diff:.2g}")
        _record_check(path, diff)
        return runner

    def difference(self) -> float:
        """Largest absolute difference from the PyTorch model on :data:`PROBES`."""
        reference = self.model.encode(list(PROBES), convert_to_numpy=True, normalize_embeddings=True)
        return float(np.abs(self.encode(PROBES, batch_size=len(PROBES)) - reference).max())

    def encode(self, texts: Any, batch_size: int = 64) -> np.ndarray:
        texts = list(texts)
        order = np.argsort([-len(t) for t in texts], kind="stable")  # similar lengths pad less
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(texts), batch_size):
            idx = order[start : start + batch_size]
            features = self.model[0].preprocess([texts[i] for i in idx])
            feed = {n: features[n].numpy().astype(np.int64) for n in self.inputs}
            hidden = self.session.run(None, feed)[0]
            if self.mode == "cls":
                vecs = hidden[:, 0]
            else:
                mask = feed["attention_mask"][..., None].astype(np.float32)
                vecs = (hidden * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1e-9)
            out[idx] = vecs
        if self.normalise:
            norms = np.linalg.norm(out, axis=1, keepdims=True)
            out = out / np.maximum(norms, 1e-12)
        return out
