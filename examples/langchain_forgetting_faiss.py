"""The forgetting loader in front of a LangChain FAISS vector store.

    python examples/langchain_forgetting_faiss.py                        # a small sample file
    python examples/langchain_forgetting_faiss.py --memory-file memory_bank_en.json --user Emily

The loader reads a memory file in the original MemoryBank format, applies the Ebbinghaus
forgetting curve as of ``--now`` (seeded, so the result is reproducible), and the surviving
memories are embedded into ``langchain_community``'s FAISS store in memory: nothing is unpickled,
and the memory file is left untouched.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain_community.vectorstores import FAISS
from langchain_community.vectorstores.utils import DistanceStrategy

from memory_bank.embeddings import get_encoder
from memory_bank.langchain import MemoryForgetterLoader

SAMPLE: dict[str, Any] = {
    "Emily": {
        "name": "Emily",
        "history": {
            "2023-04-27": [
                # Recalled four times, most recently on May 5th: a strong memory.
                {
                    "query": "I adopted a cat named Miso.",
                    "response": "What a lovely name!",
                    "memory_strength": 5,
                    "last_recall_date": "2023-05-05",
                },
                {"query": "My sister Anna lives in Lyon.", "response": "Do you visit her often?"},
            ],
            "2023-05-03": [{"query": "I started a pottery class.", "response": "How exciting!"}],
            "2023-05-05": [{"query": "Miso knocked over my first vase.", "response": "Oh no, cats!"}],
        },
        "summary": {"2023-05-05": {"content": "Emily's cat Miso broke the vase from her pottery class."}},
        "personality": {},
        "overall_history": "",
        "overall_personality": "",
    }
}


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--memory-file", help="memory file in the original format (default: a sample)")
    parser.add_argument("--user", default="Emily")
    parser.add_argument("--now", default="2023-05-06", help="forget as of this day (YYYY-MM-DD)")
    parser.add_argument("--seed", type=int, default=4)
    parser.add_argument("--encoder", default="minilm", help="minilm (default), use-multilingual or hashing")
    parser.add_argument("--query", default="What happened with my cat?")
    args = parser.parse_args(argv)

    path = Path(args.memory_file) if args.memory_file else None
    if path is None:
        path = Path(tempfile.mkdtemp(prefix="memorybank-")) / "memory.json"
        path.write_text(json.dumps(SAMPLE, indent=2), encoding="utf-8")

    loader = MemoryForgetterLoader(path, args.user, mode="paper", seed=args.seed, now=args.now)
    result = loader.forget()  # loader.load() gives the same documents without the report
    docs = result.documents
    print(f"kept {len(docs)} of {result.examined} memories; forgot {result.forgotten}")
    if not docs:
        return {"kept": [], "forgotten": result.forgotten, "hits": []}

    # The encoders' vectors are unit length: inner product = cosine similarity.
    store = FAISS.from_documents(
        docs, get_encoder(args.encoder), distance_strategy=DistanceStrategy.MAX_INNER_PRODUCT
    )
    hits = store.as_retriever(search_kwargs={"k": 2}).invoke(args.query)
    for doc in hits:
        print(f"[{doc.metadata['date']}] retention={doc.metadata['retention']:.2f} {doc.page_content!r}")
    return {
        "kept": [d.metadata["memory_id"] for d in docs],
        "forgotten": result.forgotten,
        "hits": [d.metadata["memory_id"] for d in hits],
    }


if __name__ == "__main__":
    main()
