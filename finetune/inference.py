"""Chatting with a base model plus an optional LoRA adapter, in the prompt format it was trained with.

This is what SiliconFriend's ``hf`` backbone wraps. Prompts are built by
:func:`finetune.formats.encode_conversation`, the same encoder training uses, so the model sees at
inference exactly the token layout it learned. torch and transformers are imported on first use.

Usage::

    from finetune.inference import ChatModel

    chat = ChatModel.load("builtin:smollm2", adapter_path="runs/finetune/smollm2/adapter")
    messages = [{"role": "user", "content": "I can't sleep before exams."}]
    reply = chat.generate(messages, max_new_tokens=200, temperature=0.7, top_p=0.9)
    for piece in chat.stream(messages):          # the same reply, piece by piece
        ...

With an adapter saved by :mod:`finetune.sft`, the base model, prompt format and system prompt are read
from the adapter's ``finetune.json`` unless given. ``messages`` may also be a
:class:`~finetune.formats.Conversation`; it must end with a user message.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from finetune.errors import FinetuneError, FormatError, ModelLoadError
from finetune.formats import Conversation, PromptFormat, encode_conversation, get_format
from finetune.models import load_adapter, load_causal_lm, load_tokenizer, require, resolve_model_path

logger = logging.getLogger(__name__)

Messages = Sequence[Mapping[str, Any]] | Conversation


def _conversation(messages: Messages, system_prompt: str | None) -> Conversation:
    conv = messages if isinstance(messages, Conversation) else Conversation.from_messages(messages)
    if conv.query is None:
        raise FormatError("the conversation must end with a user message to answer")
    if conv.system is None and system_prompt:
        conv = Conversation(conv.turns, conv.query, system_prompt)
    return conv


def cut_at_stop(text: str, stop_strings: Sequence[str]) -> str:
    """``text`` up to the first stop string (the model running on into a next turn)."""
    cut = min((i for i in (text.find(s) for s in stop_strings if s) if i >= 0), default=len(text))
    return text[:cut]


def _generation_kwargs(
    model: Any,
    tokenizer: Any,
    fmt: PromptFormat,
    conv: Conversation,
    max_new_tokens: int,
    temperature: float,
    top_p: float,
    **extra: Any,
) -> dict[str, Any]:
    torch = require("torch")
    ids = encode_conversation(fmt, conv, tokenizer, supervise="none").input_ids
    device = getattr(model, "device", "cpu")
    kwargs: dict[str, Any] = {
        "input_ids": torch.tensor([ids], device=device),
        "attention_mask": torch.ones(1, len(ids), dtype=torch.long, device=device),
        "max_new_tokens": max_new_tokens,
        "do_sample": temperature > 0,
        "pad_token_id": tokenizer.pad_token_id,
        "eos_token_id": tokenizer.eos_token_id,
    }
    if temperature > 0:
        kwargs.update(temperature=temperature, top_p=top_p)
    else:  # greedy: silence the sampling defaults a model's generation_config may carry
        kwargs.update(temperature=None, top_p=None, top_k=None)
    if fmt.stop_strings:
        kwargs.update(stop_strings=list(fmt.stop_strings), tokenizer=tokenizer)
    kwargs.update(extra)
    return kwargs


def generate(
    model: Any,
    tokenizer: Any,
    messages: Messages,
    prompt_format: str | PromptFormat = "chat_template",
    *,
    max_new_tokens: int = 256,
    temperature: float = 0.7,
    top_p: float = 0.9,
    system_prompt: str | None = None,
    seed: int | None = None,
    **generate_kwargs: Any,
) -> str:
    """The model's reply to ``messages`` (``temperature=0``: greedy), stripped and cut at stop strings."""
    torch = require("torch")
    fmt = get_format(prompt_format) if isinstance(prompt_format, str) else prompt_format
    kwargs = _generation_kwargs(
        model,
        tokenizer,
        fmt,
        _conversation(messages, system_prompt),
        max_new_tokens,
        temperature,
        top_p,
        **generate_kwargs,
    )
    if seed is not None:
        torch.manual_seed(seed)
    with torch.inference_mode():
        output = model.generate(**kwargs)
    new_tokens = output[0, kwargs["input_ids"].shape[1] :]
    return cut_at_stop(tokenizer.decode(new_tokens, skip_special_tokens=True), fmt.stop_strings).strip()


def stream_generate(
    model: Any,
    tokenizer: Any,
    messages: Messages,
    prompt_format: str | PromptFormat = "chat_template",
    *,
    max_new_tokens: int = 256,
    temperature: float = 0.7,
    top_p: float = 0.9,
    system_prompt: str | None = None,
    seed: int | None = None,
    **generate_kwargs: Any,
) -> Iterator[str]:
    """Yield the reply in pieces as it is generated (``TextIteratorStreamer`` on a worker thread).

    The pieces joined and stripped equal what :func:`generate` returns for the same settings and seed.
    Text that may begin a stop string is held back until it is clear; closing the iterator early
    stops generation.
    """
    torch = require("torch")
    transformers = require("transformers")
    fmt = get_format(prompt_format) if isinstance(prompt_format, str) else prompt_format
    conv = _conversation(messages, system_prompt)
    streamer = transformers.TextIteratorStreamer(tokenizer, skip_prompt=True, skip_special_tokens=True)
    stop_event = threading.Event()

    class _Stop(transformers.StoppingCriteria):  # type: ignore[name-defined,misc]
        def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
            return torch.full(
                (input_ids.shape[0],), stop_event.is_set(), dtype=torch.bool, device=input_ids.device
            )

    kwargs = _generation_kwargs(
        model, tokenizer, fmt, conv, max_new_tokens, temperature, top_p, **generate_kwargs
    )
    kwargs.update(streamer=streamer, stopping_criteria=transformers.StoppingCriteriaList([_Stop()]))
    failure: list[BaseException] = []

    def work() -> None:
        try:
            if seed is not None:
                torch.manual_seed(seed)
            with torch.inference_mode():
                model.generate(**kwargs)
        except BaseException as e:  # handed to the consumer below
            failure.append(e)
            streamer.end()

    thread = threading.Thread(target=work, name="finetune-generate", daemon=True)
    thread.start()
    hold = max((len(s) for s in fmt.stop_strings), default=1) - 1
    text, sent, drained = "", 0, False
    try:
        for piece in streamer:
            text += piece
            cut = cut_at_stop(text, fmt.stop_strings)
            if len(cut) < len(text):
                if len(cut) > sent:
                    yield cut[sent:]
                sent = len(text)
                break
            if len(text) - hold > sent:
                yield text[sent : len(text) - hold]
                sent = len(text) - hold
        else:
            drained = True
            if len(text) > sent:
                yield text[sent:]
    finally:
        stop_event.set()
        if not drained:  # stopped early: let the worker finish its step and end the stream
            for _ in streamer:
                pass
        thread.join()
    if failure:
        raise FinetuneError(f"generation failed: {failure[0]}") from failure[0]


def _adapter_meta(adapter_path: str | Path | None) -> dict[str, Any]:
    """The adapter's ``finetune.json`` (what it was trained from and how), ``{}`` without one;
    an adapter folder that is not there, or metadata that is not a JSON object, is a clear error."""
    if adapter_path is None:
        return {}
    folder = Path(adapter_path).expanduser()
    if not folder.is_dir():
        # A save killed between its two renames leaves complete copies beside it (.adapter-*).
        left = sorted(
            str(p) for p in folder.parent.glob(f".{folder.name}-*") if (p / "adapter_config.json").is_file()
        )
        hint = (
            f" (an interrupted save left {', '.join(left)}: rename the newest to {folder.name})"
            if left
            else ""
        )
        raise ModelLoadError(
            f"adapter folder {str(folder)!r} not found; give the folder finetune wrote{hint}"
        )
    file = folder / "finetune.json"
    if not file.is_file():
        return {}
    try:
        meta = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ModelLoadError(f"{file} is not readable JSON ({e}); train the adapter again") from e
    if not isinstance(meta, dict):
        raise ModelLoadError(f"{file} is not a JSON object; train the adapter again")
    return meta


def _same_model(a: str, b: str) -> bool:
    """Whether two model names or folders are the same model (folders compared where they are)."""
    if a == b:
        return True
    pa, pb = Path(a).expanduser(), Path(b).expanduser()
    return pa.exists() and pb.exists() and pa.resolve() == pb.resolve()


def _ships_code(path: str) -> bool:
    """Whether the local model folder ``path`` maps its classes to Python files of its own."""
    try:
        config = json.loads((Path(path).expanduser() / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(config, dict) and bool(config.get("auto_map"))


class ChatModel:
    """A causal LM (optionally with a LoRA adapter), its tokenizer and its prompt format.

    Example::

        chat = ChatModel.load("builtin:tiny", prompt_format="belle")
        chat.generate([{"role": "user", "content": "Hello"}], max_new_tokens=20, temperature=0)
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        prompt_format: str | PromptFormat = "chat_template",
        system_prompt: str | None = None,
    ) -> None:
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.format = get_format(prompt_format) if isinstance(prompt_format, str) else prompt_format
        self.system_prompt = system_prompt

    @classmethod
    def load(
        cls,
        model_name_or_path: str | None = None,
        adapter_path: str | Path | None = None,
        *,
        prompt_format: str | None = None,
        system_prompt: str | None = None,
        trust_remote_code: bool | None = None,
        dtype: str = "auto",
        device: str | None = None,
    ) -> ChatModel:
        """Load base model and tokenizer, then the adapter (``PeftModel.from_pretrained``) if given.

        A model's own Python code runs only with ``trust_remote_code=True`` given here: never
        because the model's ``config.json`` or the adapter's ``finetune.json`` asks for it (a
        downloaded adapter could name a base folder of its own, with code in it)."""
        meta = _adapter_meta(adapter_path)
        base = model_name_or_path or meta.get("base_model")
        if base is None:
            raise ModelLoadError("give model_name_or_path (the adapter does not name its base model)")
        remote = bool(trust_remote_code)
        path = resolve_model_path(base)
        if not remote and _ships_code(path):
            raise ModelLoadError(
                f"the model at {path} runs its own Python code (auto_map in its config.json); load it "
                "only if you trust it: --trust-remote-code, or trust_remote_code: true in the LLM spec"
            )
        trained_on = meta.get("base_model_path") or meta.get("base_model")
        if model_name_or_path is not None and isinstance(trained_on, str) and not _same_model(trained_on, path):
            # A base of the same shape loads without an error and answers badly: say so.
            logger.warning(
                "the adapter %s was trained on %s, and is loaded on %s: its replies may be poor; "
                "give the base it was trained on (or leave the base out: the adapter names it)",
                adapter_path,
                trained_on,
                path,
            )
        tokenizer = load_tokenizer(path, remote)
        model = load_causal_lm(path, dtype, remote)
        if adapter_path is not None:
            model = load_adapter(model, adapter_path)
        torch = require("torch")
        model.to(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        return cls(
            model,
            tokenizer,
            prompt_format or meta.get("format", "chat_template"),
            system_prompt if system_prompt is not None else meta.get("system_prompt"),
        )

    def prompt(self, messages: Messages) -> str:
        """The prompt text for ``messages`` (for display and logs; generation uses token ids)."""
        return self.format.render(_conversation(messages, self.system_prompt), self.tokenizer)

    def generate(self, messages: Messages, **kwargs: Any) -> str:
        """See :func:`generate`: ``max_new_tokens``, ``temperature``, ``top_p``, ``seed``."""
        kwargs.setdefault("system_prompt", self.system_prompt)
        return generate(self.model, self.tokenizer, messages, self.format, **kwargs)

    def stream(self, messages: Messages, **kwargs: Any) -> Iterator[str]:
        """See :func:`stream_generate`."""
        kwargs.setdefault("system_prompt", self.system_prompt)
        return stream_generate(self.model, self.tokenizer, messages, self.format, **kwargs)
