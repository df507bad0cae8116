"""Fixtures for the fine-tuning tests: offline, a tiny model built once per session, one CPU thread."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# Before transformers is imported anywhere: never wait on the hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# A developer's own cache (set before the tests start) lets the SmolLM2 test skip its conversion.
USER_CACHE = os.environ.get("MEMORYBANK_CACHE")


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("memorybank-cache")


@pytest.fixture(autouse=True)
def _private_cache(monkeypatch: pytest.MonkeyPatch, cache_dir: Path) -> None:
    """``builtin:`` models are built into the session's temporary cache, never into the home folder."""
    monkeypatch.setenv("MEMORYBANK_CACHE", str(cache_dir))


@pytest.fixture(scope="session")
def tiny_model_dir(cache_dir: Path) -> Path:
    """The tiny Llama at the path ``builtin:tiny`` resolves to, so configs naming it reuse this build."""
    from finetune.tiny import build_tiny_model

    return build_tiny_model(cache_dir / "tiny-llama")


@pytest.fixture(scope="session")
def tiny_tokenizer(tiny_model_dir: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_dir)


@pytest.fixture(scope="module")
def single_thread() -> Iterator[None]:
    """One torch thread: on a shared 2-core machine, two threads contend and can be 10-50x slower."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def smollm2_cache(cache_dir: Path) -> Path:
    """Where ``builtin:smollm2`` is converted: the developer's ``MEMORYBANK_CACHE`` if set, else temporary."""
    return Path(USER_CACHE) if USER_CACHE else cache_dir
