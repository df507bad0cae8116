"""The ``hf`` backbone: a transformers causal LM with an optional LoRA adapter, as a LangChain chat
model, prompted in exactly the format the adapter was trained with.

Spec: ``hf:MODEL[+ADAPTER]`` (see :mod:`memory_bank.llm`), e.g. ``hf:/models/chatglm-6b+runs/lora``
or ``hf:builtin:smollm2+runs/finetune/smollm2/adapter``; ``hf:+ADAPTER`` takes the base model the
adapter's ``finetune.json`` names. A mapping or YAML spec may set ``prompt_format`` (``chatglm``,
``chatglm2``, ``belle``, ``chatml``, ``chat_template``). Loading, prompt formats and generation are
:mod:`finetune.inference`'s, so inference goes through the same
:func:`finetune.formats.encode_conversation` as training. The format comes from the spec's
``prompt_format``, else the adapter's ``finetune.json``, else the tokenizer's chat template, else
(no template) ``chatglm`` for ChatGLM models and ``belle`` for the rest.

Remote code (ChatGLM-6B's own Python files) runs only when the spec says
``trust_remote_code: true`` (``silicon-friend --trust-remote-code``): a model or adapter folder
that asks for it by itself (an ``auto_map`` in its ``config.json``, ``trust_remote_code`` in an
adapter's ``finetune.json``) is refused with a line that says how to allow it.

Registered through the entry point ``memorybank.llm_backends: hf = silicon_friend.backends.hf:build``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from pydantic import ConfigDict, PrivateAttr

from memory_bank.model_lock import ModelLock
from silicon_friend.errors import ModelError, SiliconFriendError

logger = logging.getLogger(__name__)

_ROLES = {"system": "system", "human": "user", "ai": "assistant"}


def message_dicts(messages: list[BaseMessage]) -> list[dict[str, str]]:
    """LangChain messages as ``{"role", "content"}`` dicts, merging consecutive same-role messages
    (prompt formats need alternating user and assistant turns)."""
    out: list[dict[str, str]] = []
    for m in messages:
        role = _ROLES.get(m.type, "user")
        text = (
            m.content
            if isinstance(m.content, str)
            else "".join(p if isinstance(p, str) else str(p.get("text", "")) for p in m.content)
        )
        if out and out[-1]["role"] == role and role != "system":
            out[-1]["content"] += "\n\n" + text
        else:
            out.append({"role": role, "content": text})
    return out


def _fallback_format(model: Any) -> str:
    """A prompt format for a model without a chat template: ChatGLM's own, else BELLE's."""
    model_type = str(getattr(getattr(model, "config", None), "model_type", "") or "")
    return "chatglm" if model_type.startswith("chatglm") else "belle"


class HFChatModel(BaseChatModel):
    """A :class:`finetune.inference.ChatModel` behind LangChain's chat-model interface.

    Calls run one at a time (one lock per model); streaming yields text as it is generated.
    Exposes ``count_tokens`` and ``context_window`` for prompt budgeting.

    Example::

        chat = HFChatModel.load("builtin:tiny", prompt_format="belle")
        chat.invoke("Hello").content
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    model_path: str | None = None
    adapter: str | None = None
    prompt_format: str | None = None
    temperature: float = 0.7
    top_p: float = 0.9
    max_tokens: int = 400
    n_ctx: int | None = None
    seed: int | None = None
    _chat: Any = PrivateAttr(default=None)
    _lock: ModelLock = PrivateAttr(default_factory=ModelLock)

    @classmethod
    def load(
        cls,
        model_path: str | None,
        adapter: str | None = None,
        *,
        prompt_format: str | None = None,
        trust_remote_code: bool = False,
        **settings: Any,
    ) -> HFChatModel:
        """Load the base model, tokenizer and adapter now (errors surface at start-up, not mid-chat)."""
        from finetune.formats import get_format
        from finetune.inference import ChatModel

        if trust_remote_code:
            logger.warning("running the model's own code from %s (trust_remote_code)", model_path or adapter)
        try:
            chat = ChatModel.load(
                model_path, adapter, prompt_format=prompt_format, trust_remote_code=bool(trust_remote_code)
            )
        except Exception as e:  # a wrong or damaged adapter or model: one line, at start-up
            detail = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise SiliconFriendError(
                f"cannot load the hf model {model_path or ''}{'+' + str(adapter) if adapter else ''}: {detail}"
            ) from e
        if (
            prompt_format is None
            and chat.format.name == "chat_template"
            and not getattr(chat.tokenizer, "chat_template", None)
        ):
            chat.format = get_format(_fallback_format(chat.model))
            logger.warning(
                "%s has no chat template and no adapter metadata; prompting in the %r format "
                "(set prompt_format in the LLM spec to choose)",
                model_path,
                chat.format.name,
            )
        model = cls(model_path=model_path, adapter=adapter, prompt_format=chat.format.name, **settings)
        model._chat = chat
        logger.info(
            "hf model ready: %s%s, format %s",
            model_path,
            f" + {adapter}" if adapter else "",
            chat.format.name,
        )
        return model

    @property
    def _llm_type(self) -> str:
        return "hf"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model_path": self.model_path, "adapter": self.adapter, "prompt_format": self.prompt_format}

    @property
    def context_window(self) -> int:
        if self.n_ctx:
            return self.n_ctx
        config = getattr(self._chat.model, "config", None)
        for attr in ("max_position_embeddings", "seq_length", "n_positions", "max_sequence_length"):
            value = getattr(config, attr, None)
            if isinstance(value, int) and value > 0:
                return value
        return 2048

    def count_tokens(self, text: str) -> int:
        return len(self._chat.tokenizer.encode(text, add_special_tokens=False))

    def _kwargs(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        return {
            "max_new_tokens": int(kwargs.get("max_tokens") or self.max_tokens),
            "temperature": float(kwargs.get("temperature", self.temperature)),
            "top_p": float(kwargs.get("top_p") or self.top_p),
            "seed": kwargs.get("seed", self.seed),
        }

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        text = "".join(c.text for c in self._stream(messages, stop, run_manager, **kwargs))
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=text))])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        from finetune.errors import FinetuneError
        from finetune.inference import cut_at_stop

        dicts = message_dicts(messages)
        stops = [s for s in stop or () if s]
        hold = max((len(s) for s in stops), default=1) - 1  # text that may begin a stop string
        with self._lock:
            stream = self._chat.stream(dicts, **self._kwargs(kwargs))
            try:
                text, sent = "", 0
                for piece in stream:
                    self._lock.check()  # a background summary gives way to a waiting chat reply
                    text += piece
                    visible = text.lstrip()  # generate() strips the reply; match it
                    cut = cut_at_stop(visible, stops)
                    stopped = len(cut) < len(visible)
                    upto = len(cut) if stopped else len(cut) - hold
                    if upto > sent:
                        chunk = ChatGenerationChunk(message=AIMessageChunk(content=cut[sent:upto]))
                        if run_manager:
                            run_manager.on_llm_new_token(chunk.text, chunk=chunk)
                        yield chunk
                        sent = upto
                    if stopped:
                        return
                rest = cut_at_stop(text.lstrip(), stops)[sent:]
                if rest:
                    yield ChatGenerationChunk(message=AIMessageChunk(content=rest))
            except FinetuneError as e:
                raise ModelError(str(e)) from e
            finally:
                stream.close()


def build(spec: Any) -> BaseChatModel:
    """Entry point of the ``hf`` backend: an :class:`HFChatModel` for an ``LLMSpec``."""
    if not spec.model and not spec.adapter:
        raise SiliconFriendError(
            "the hf backend needs a model: 'hf:/path/to/model' or 'hf:/path/to/model+/path/to/adapter'"
        )
    return HFChatModel.load(
        spec.model,
        spec.adapter,
        prompt_format=spec.prompt_format,
        trust_remote_code=bool(getattr(spec, "trust_remote_code", False)),
        temperature=spec.temperature,
        top_p=spec.top_p if spec.top_p is not None else 0.9,
        max_tokens=spec.max_tokens,
        n_ctx=spec.n_ctx,
        seed=spec.seed,
    )
