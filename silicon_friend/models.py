"""Chat models for SiliconFriend: building one from an LLM spec, counting its tokens, and
streaming a reply with a time limit and a stop switch.

The backbones themselves come from :mod:`memory_bank.llm` (``openai``, ``llamacpp``) and from the
``memorybank.llm_backends`` entry points (``hf``, in :mod:`silicon_friend.backends.hf`). Local
backbones serialise their own calls (one lock per loaded model), so many browser sessions and the
background summariser can share one model.
"""

from __future__ import annotations

import dataclasses
import logging
import queue
import re
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from memory_bank.llm import estimate_tokens
from silicon_friend.budget import TokenCounter
from silicon_friend.errors import ModelError, ModelTimeoutError
from silicon_friend.reasons import reason

logger = logging.getLogger(__name__)

#: Context size assumed for a model that does not say (e.g. a remote OpenAI-compatible server).
DEFAULT_CONTEXT_TOKENS = 4096


@dataclasses.dataclass(frozen=True)
class Decoding:
    """How replies of a model are sampled, beyond the user's settings.

    Small models ramble to any token cap, repeat themselves and stop mid-sentence: for them the
    reply is capped at ``max_reply_tokens``, a repetition penalty applies, and the prompt asks for
    one to three sentences (``brief``). Any reply cut at its token cap ends at its last full sentence.
    """

    repeat_penalty: float = 1.0
    max_reply_tokens: int | None = None
    brief: bool = False


#: The packaged SmolLM2-135M-Instruct and other tiny chat models (measured: scripts/measure_latency.py).
SMALL_MODEL = Decoding(repeat_penalty=1.15, max_reply_tokens=128, brief=True)
_SMALL_NAMES = re.compile(r"smollm|(?<![0-9])(?:135|360)m\b", re.I)


#: How the UI names the packaged default model.
PACKAGED_NAME = "SmolLM2-135M-Instruct (packaged, llama.cpp, offline)"


def is_packaged_default(spec: Any) -> bool:
    """Whether ``spec`` is the packaged offline default (llama.cpp without a model file)."""
    return getattr(spec, "backend", None) == "llamacpp" and not getattr(spec, "model", None)


def decoding_for(name: str, spec: Any = None) -> Decoding:
    """:data:`SMALL_MODEL` for the packaged default (llama.cpp without a model file) and models
    named like tiny ones (``smollm``, ``135m``, ``360m``); plain sampling for the rest."""
    model = str(getattr(spec, "model", "") or "")
    small = is_packaged_default(spec) or _SMALL_NAMES.search(f"{name} {model}")
    return SMALL_MODEL if small else Decoding()


@dataclasses.dataclass
class LoadedModel:
    """A chat model ready for SiliconFriend, with what the engine needs to know about it."""

    chat_model: BaseChatModel
    name: str
    context_tokens: int
    count_tokens: TokenCounter
    spec: Any = None
    decoding: Decoding = dataclasses.field(default_factory=Decoding)

    @property
    def packaged(self) -> bool:
        """Whether this is the packaged 135M English-only demo model."""
        return is_packaged_default(self.spec)

    @property
    def display_name(self) -> str:
        """The model's name as the user should read it."""
        return PACKAGED_NAME if self.packaged else self.name


def token_counter_for(model: BaseChatModel) -> TokenCounter:
    """The model's own token counter where it has one (llama.cpp, hf), else
    :func:`memory_bank.llm.estimate_tokens`, which errs on the high side (a remote server's
    tokenizer is unknown, and an overfull prompt is a failed reply)."""
    counter = getattr(model, "count_tokens", None)
    if callable(counter):
        return lambda text: int(counter(text))
    return estimate_tokens


def context_tokens_for(model: BaseChatModel, spec: Any = None) -> int:
    """The model's context window in tokens: the spec's ``n_ctx`` (for a server, say how large
    its context is), else what the model reports, else :data:`DEFAULT_CONTEXT_TOKENS`."""
    from memory_bank.llm import context_window

    n_ctx = getattr(spec, "n_ctx", None)
    if isinstance(n_ctx, int) and n_ctx > 0:
        return n_ctx
    return context_window(model, DEFAULT_CONTEXT_TOKENS) or DEFAULT_CONTEXT_TOKENS


def prepare_model(
    chat_model: BaseChatModel,
    *,
    name: str = "",
    spec: Any = None,
    context_tokens: int | None = None,
) -> LoadedModel:
    """Describe a chat model for the engine: its name, context size and token counter."""
    label = name or getattr(chat_model, "model_name", None) or type(chat_model).__name__
    return LoadedModel(
        chat_model=chat_model,
        name=label,
        context_tokens=context_tokens or context_tokens_for(chat_model, spec),
        count_tokens=token_counter_for(chat_model),
        spec=spec,
        decoding=decoding_for(label, spec),
    )


def call_params(
    chat_model: BaseChatModel,
    *,
    temperature: float,
    top_p: float,
    max_tokens: int,
    repeat_penalty: float = 1.0,
) -> dict[str, Any]:
    """Per-call sampling arguments every backbone understands.

    An OpenAI-compatible server model built by :mod:`memory_bank.llm` also sends ``max_tokens``
    in ``extra_body`` (llama_cpp.server ignores ``max_completion_tokens``); that copy is updated
    too, or the server would use the spec's limit instead of this reply's. A repetition penalty
    other than 1 goes to llama.cpp directly, and to compatible servers in ``extra_body`` (the
    OpenAI API itself has none).
    """
    params: dict[str, Any] = {"temperature": temperature, "top_p": top_p, "max_tokens": max_tokens}
    extra = getattr(chat_model, "extra_body", None)
    server = isinstance(extra, Mapping) and "max_tokens" in extra
    if server:
        params["extra_body"] = {**extra, "max_tokens": max_tokens}  # type: ignore[dict-item]
    if repeat_penalty != 1.0:
        if getattr(chat_model, "_llm_type", "") == "llamacpp":
            params["repeat_penalty"] = repeat_penalty
        elif server:
            params["extra_body"]["repeat_penalty"] = repeat_penalty
    return params


_SENTENCE_END = re.compile(r"[.!?。！？…](?:[\"'”’)）\]]*)(?=\s|$)|[。！？]")


def end_at_sentence(text: str) -> str:
    """``text`` up to its last complete sentence (a reply cut off at its token cap), or all of
    it when it has no complete sentence."""
    ends = [m.end() for m in _SENTENCE_END.finditer(text)]
    return text[: ends[-1]].rstrip() if ends else text


def load_model(
    spec: str | Mapping[str, Any] | None = None,
    *,
    context_tokens: int | None = None,
    trust_remote_code: bool = False,
) -> LoadedModel:
    """Build the chat model named by an LLM spec (see :mod:`memory_bank.llm`); ``None``: the
    offline default (SmolLM2-135M-Instruct through llama.cpp). ``trust_remote_code``: as the
    spec's (``--trust-remote-code``)."""
    from memory_bank.llm import build_chat_model, parse_llm_spec

    parsed = parse_llm_spec(spec)
    if trust_remote_code:
        parsed = parsed.model_copy(update={"trust_remote_code": True})
    started = time.perf_counter()
    chat_model = build_chat_model(parsed)
    logger.info("built chat model %s in %.1f s", parsed, time.perf_counter() - started)
    return prepare_model(chat_model, name=str(parsed), spec=parsed, context_tokens=context_tokens)


_ROLES = {"system": SystemMessage, "user": HumanMessage, "assistant": AIMessage}


def to_langchain(messages: Sequence[Mapping[str, str]]) -> list[BaseMessage]:
    """``[{"role", "content"}]`` dicts as LangChain messages."""
    return [_ROLES[m["role"]](content=m["content"]) for m in messages]


def chunk_text(chunk: Any) -> str:
    """The text of a streamed chunk (content may be a string or a list of parts)."""
    content = getattr(chunk, "content", chunk)
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
    return str(content or "")


_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def clean_text(text: str) -> str:
    """``text`` without NUL and other control characters (a small or broken model emits them; the
    store rejects NUL)."""
    return _CONTROL.sub("", text)


#: Chat model classes that end every reply with a finish reason ("stop", "length", ...): the
#: OpenAI-compatible client and the in-process llama.cpp model.
_REPORTS_FINISH = frozenset({"BaseChatOpenAI", "ChatLlamaCpp"})


def reports_finish(model: Any) -> bool:
    """Whether ``model`` ends every streamed reply with a finish reason (a stream without one was
    cut off). A model class can say so itself with a ``reports_finish_reason`` attribute."""
    said = getattr(model, "reports_finish_reason", None)
    if isinstance(said, bool):
        return said
    return any(cls.__name__ in _REPORTS_FINISH for cls in type(model).__mro__)


def stream_text(
    model: BaseChatModel,
    messages: Sequence[Mapping[str, str]],
    *,
    params: Mapping[str, Any] | None = None,
    cancel: threading.Event | None = None,
    first_token_timeout: float = 180.0,
    idle_timeout: float = 60.0,
    poll: float = 0.05,
    meta: dict[str, Any] | None = None,
) -> Iterator[str]:
    """Stream the reply's text pieces; the call runs on a worker thread. ``meta`` (if given)
    receives the model's ``finish_reason`` (``"length"``: cut at the token cap).

    Stops quietly when ``cancel`` is set. Raises :class:`ModelTimeoutError` when no first piece
    comes within ``first_token_timeout`` seconds (this includes waiting for a busy local model) or
    no next piece within ``idle_timeout``; raises :class:`ModelError` when the model raises, or
    when a model that ends every reply with a finish reason (:func:`reports_finish`) ends a
    stream without one: a server or proxy that closed the connection mid-reply, whose words
    would otherwise be kept as the whole reply.
    """
    lc_messages = to_langchain(messages)
    kwargs = dict(params or {})
    events: queue.Queue[tuple[str, Any]] = queue.Queue()
    halt = threading.Event()
    finished: dict[str, Any] = meta if meta is not None else {}

    def work() -> None:
        try:
            stream = model.stream(lc_messages, **kwargs)
            try:
                for chunk in stream:
                    finish = (getattr(chunk, "response_metadata", None) or {}).get("finish_reason")
                    if finish:
                        finished["finish_reason"] = finish
                    text = clean_text(chunk_text(chunk))
                    if text:
                        events.put(("text", text))
                    if halt.is_set():
                        break
            finally:
                close = getattr(stream, "close", None)
                if close is not None:
                    close()
            events.put(("done", None))
        except Exception as e:  # handed to the consumer
            events.put(("error", e))

    worker = threading.Thread(target=work, name="silicon-friend-reply", daemon=True)
    worker.start()
    started = last = time.monotonic()
    got_text = False
    try:
        while True:
            if cancel is not None and cancel.is_set():
                return
            try:
                kind, value = events.get(timeout=poll)
            except queue.Empty:
                waited = time.monotonic() - last
                limit = idle_timeout if got_text else first_token_timeout
                if waited > limit:
                    raise ModelTimeoutError(
                        reason("no_more" if got_text else "no_reply", seconds=f"{limit:g}")
                    ) from None
                continue
            last = time.monotonic()
            if kind == "text":
                if not got_text:
                    logger.debug("first token after %.2f s", last - started)
                got_text = True
                yield value
            elif kind == "done":
                if got_text and "finish_reason" not in finished and reports_finish(model):
                    raise ModelError(reason("cut_off"))
                return
            elif not got_text and isinstance(value, ValueError) and "No generation chunks" in str(value):
                return  # LangChain's word for a stream that produced nothing: an empty reply
            else:
                raise ModelError(reason("failed", detail=f"{type(value).__name__}: {value}")) from value
    finally:
        halt.set()
