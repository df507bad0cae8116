"""Prompt formats: the one definition shared by fine-tuning and by SiliconFriend at inference.

A *format* turns a conversation (an optional system prompt, finished ``(user, assistant)`` turns and,
at inference, a pending user message) into text. Training and inference both go through
:func:`encode_conversation`, so a model is asked questions in exactly the token sequence it was trained
on. This module is pure Python: it never imports torch or transformers; a tokenizer, where needed, is
any object with ``encode(text, add_special_tokens=...)``, ``eos_token_id`` and, for the
``chat_template`` format, ``apply_chat_template``.

API
---
``Conversation(turns=((user, assistant), ...), query=None | str, system=None | str)``
    A conversation; ``query`` is the new user message awaiting a reply (``None`` for a training record).
    ``Conversation.from_messages([{"role": ..., "content": ...}, ...])`` reads OpenAI/Gradio-style
    messages (content may be a list of ``{"type": "text", "text": ...}`` parts); ``to_messages()`` goes back.
``get_format(name) -> PromptFormat``, ``available_formats() -> list[str]``, ``register_format(fmt)``
    The registry. Built in: ``chatglm`` (ChatGLM-6B's own ``chat()``), ``chatglm2`` (ChatGLM2-6B),
    ``belle`` (BELLE's ``Human:/Assistant:``), ``chatml`` and ``chat_template`` (the tokenizer's own template).
``PromptFormat.build_prompt(query, history=(), system=None, tokenizer=None) -> str``
    The text to generate from.
``PromptFormat.build_example(query, response, history=(), system=None, tokenizer=None) -> (prompt, response)``
    The training pair as text: the model learns ``response`` after ``prompt``.
``PromptFormat.segments(conversation, tokenizer=None) -> list[Segment]``
    The conversation cut into alternating prompt parts and (supervised) reply parts.
``encode_conversation(fmt, conversation, tokenizer, supervise="all") -> EncodedConversation``
    Token ids and labels (``-100`` on every prompt token); at inference ``input_ids`` is the model input.

Example::

    fmt = get_format("belle")
    fmt.build_prompt("I can't sleep.", history=[("Hi", "Hello! How are you?")])
    # 'Human: Hi\\n\\nAssistant: Hello! How are you?\\n\\nHuman: I can\\'t sleep.\\n\\nAssistant: '

Reply text in the string views carries no end-of-sequence token; :func:`encode_conversation` appends
the tokenizer's EOS after every reply for formats with ``append_eos`` (the reply's end marker).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from finetune.errors import FormatError

IGNORE_INDEX = -100
"""Label of a token that is not supervised (prompt and padding): PyTorch's cross-entropy ignores it."""

Supervise = Literal["all", "last", "none"]


@dataclass(frozen=True)
class Conversation:
    """A system prompt, finished ``(user, assistant)`` turns and an optional pending user message."""

    turns: tuple[tuple[str, str], ...] = ()
    query: str | None = None
    system: str | None = None

    def __post_init__(self) -> None:
        turns = tuple((str(q), str(a)) for q, a in self.turns)
        object.__setattr__(self, "turns", turns)
        if not turns and self.query is None:
            raise FormatError("empty conversation: give at least one turn or a query")

    @classmethod
    def from_messages(cls, messages: Sequence[Mapping[str, Any]]) -> Conversation:
        """Read ``[{"role": "system"|"user"|"assistant", "content": ...}, ...]``.

        Roles must alternate user/assistant after an optional leading system message. A trailing
        user message becomes :attr:`query`; content may be a string or a list of text parts.
        """
        system: str | None = None
        turns: list[tuple[str, str]] = []
        pending: str | None = None
        for i, message in enumerate(messages):
            if not isinstance(message, Mapping) or "role" not in message or "content" not in message:
                raise FormatError(
                    f"message {i} must be a mapping with 'role' and 'content', got {message!r:.80}"
                )
            role, content = message["role"], message_text(message["content"])
            if role == "system":
                if i != 0:
                    raise FormatError(f"message {i}: a system message may only come first")
                system = content
            elif role == "user":
                if pending is not None:
                    raise FormatError(f"message {i}: two user messages in a row; roles must alternate")
                pending = content
            elif role == "assistant":
                if pending is None:
                    raise FormatError(f"message {i}: an assistant message must follow a user message")
                turns.append((pending, content))
                pending = None
            else:
                raise FormatError(f"message {i}: unknown role {role!r}; use system, user or assistant")
        return cls(turns=tuple(turns), query=pending, system=system)

    def to_messages(self) -> list[dict[str, str]]:
        """The conversation as ``[{"role", "content"}, ...]`` (the inverse of :meth:`from_messages`)."""
        out = [{"role": "system", "content": self.system}] if self.system else []
        for q, a in self.turns:
            out += [{"role": "user", "content": q}, {"role": "assistant", "content": a}]
        if self.query is not None:
            out.append({"role": "user", "content": self.query})
        return out


def message_text(content: Any) -> str:
    """The text of a message's content: a string, or a list of ``{"type": "text", "text": ...}`` parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        texts = []
        for i, part in enumerate(content):
            text = (
                part.get("text") if isinstance(part, Mapping) and part.get("type", "text") == "text" else part
            )
            if not isinstance(text, str):  # a number, an image part: not text to train on
                raise FormatError(
                    f'message content part {i} must be a string or {{"type": "text", "text": ...}}, '
                    f"got {part!r:.80}"
                )
            texts.append(text)
        return "\n".join(t for t in texts if t)
    raise FormatError(
        f"message content must be a string or a list of text parts, got {type(content).__name__}"
    )


@dataclass(frozen=True)
class Segment:
    """A piece of a rendered conversation; ``supervised`` pieces are assistant replies."""

    text: str
    supervised: bool


@dataclass(frozen=True)
class EncodedConversation:
    """Token ids of a conversation and their labels (``IGNORE_INDEX`` where not supervised)."""

    input_ids: list[int]
    labels: list[int]

    @property
    def num_supervised(self) -> int:
        return sum(label != IGNORE_INDEX for label in self.labels)


class PromptFormat(ABC):
    """How a conversation becomes text. Subclasses implement :meth:`segments`."""

    name: str
    description: str
    append_eos: bool
    """Append the tokenizer's EOS after every reply (formats without an end marker of their own)."""
    add_special_tokens: bool
    """Let the tokenizer add its special tokens (BOS, ChatGLM's gMASK) around the first segment."""
    flatten_history: bool
    """Earlier turns are plain prompt text, so only the last reply can be supervised."""
    needs_tokenizer: bool
    stop_strings: tuple[str, ...]
    """Text that ends a reply if the model runs on into a next turn."""

    @abstractmethod
    def segments(self, conversation: Conversation, tokenizer: Any = None) -> list[Segment]:
        """Alternating prompt and reply segments; the last is a prompt when ``conversation.query`` is set."""

    def render(self, conversation: Conversation, tokenizer: Any = None) -> str:
        return "".join(s.text for s in self.segments(conversation, tokenizer))

    def build_prompt(
        self,
        query: str,
        history: Iterable[tuple[str, str]] = (),
        system: str | None = None,
        tokenizer: Any = None,
    ) -> str:
        return self.render(Conversation(tuple(history), query, system), tokenizer)

    def build_example(
        self,
        query: str,
        response: str,
        history: Iterable[tuple[str, str]] = (),
        system: str | None = None,
        tokenizer: Any = None,
    ) -> tuple[str, str]:
        conv = Conversation((*tuple(history), (query, response)), None, system)
        segs = self.segments(conv, tokenizer)
        return "".join(s.text for s in segs[:-1]), segs[-1].text


@dataclass(frozen=True)
class TextFormat(PromptFormat):
    """A format written as text templates. ``user_template`` may use ``{round}`` and ``{query}``."""

    name: str
    description: str
    user_template: str
    response_suffix: str = ""
    turn_separator: str = ""
    system_template: str = "{system}\n\n"
    first_round: int = 0
    bare_single_query: bool = False
    flatten_history: bool = False
    append_eos: bool = True
    add_special_tokens: bool = True
    stop_strings: tuple[str, ...] = ()
    needs_tokenizer: bool = field(default=False, init=False)

    def _user(self, index: int, query: str, alone: bool) -> str:
        if alone and self.bare_single_query:
            return query
        return self.user_template.format(round=self.first_round + index, query=query)

    def segments(self, conversation: Conversation, tokenizer: Any = None) -> list[Segment]:
        rounds: list[tuple[str, str | None]] = list(conversation.turns)
        if conversation.query is not None:
            rounds.append((conversation.query, None))
        prefix = self.system_template.format(system=conversation.system) if conversation.system else ""
        if self.flatten_history:
            *history, (query, reply) = rounds
            text = prefix + "".join(
                self._user(i, q, False) + str(a) + self.response_suffix + self.turn_separator
                for i, (q, a) in enumerate(history)
            )
            segs = [Segment(text + self._user(len(history), query, not history), False)]
            return segs + ([Segment(reply + self.response_suffix, True)] if reply is not None else [])
        segs = []
        pending = prefix
        for i, (query, reply) in enumerate(rounds):
            segs.append(Segment(pending + self._user(i, query, len(rounds) == 1), False))
            pending = ""
            if reply is not None:
                segs.append(Segment(reply + self.response_suffix, True))
                pending = self.turn_separator
        return segs


@dataclass(frozen=True)
class ChatTemplateFormat(PromptFormat):
    """The tokenizer's own chat template (``tokenizer.apply_chat_template``), e.g. SmolLM2's ChatML."""

    name: str = "chat_template"
    description: str = "the tokenizer's chat template (apply_chat_template)"
    append_eos: bool = False
    add_special_tokens: bool = False
    flatten_history: bool = False
    needs_tokenizer: bool = True
    stop_strings: tuple[str, ...] = ()

    def segments(self, conversation: Conversation, tokenizer: Any = None) -> list[Segment]:
        if tokenizer is None or not getattr(tokenizer, "chat_template", None):
            raise FormatError(
                f"format {self.name!r} needs a tokenizer that has a chat template, and this one has none: "
                "choose a prompt format instead, format: belle, chatml or chatglm (belle for BELLE-7B, "
                "chatglm for ChatGLM-6B) in the fine-tuning config, prompt_format in the LLM spec"
            )
        messages = conversation.to_messages()

        def render(upto: int, generation_prompt: bool) -> str:
            return str(
                tokenizer.apply_chat_template(
                    messages[:upto], tokenize=False, add_generation_prompt=generation_prompt
                )
            )

        segs: list[Segment] = []
        done = ""
        for i, message in enumerate(messages):
            if message["role"] != "assistant" and not (
                i == len(messages) - 1 and conversation.query is not None
            ):
                continue
            prompt = render(i if message["role"] == "assistant" else i + 1, True)
            if not prompt.startswith(done):
                raise FormatError(f"the chat template of {type(tokenizer).__name__} rewrites earlier turns")
            segs.append(Segment(prompt[len(done) :], False))
            done = prompt
            if message["role"] == "assistant":
                full = render(i + 1, False)
                if not full.startswith(prompt):
                    raise FormatError("the chat template renders a reply that does not extend its prompt")
                segs.append(Segment(full[len(prompt) :], True))
                done = full
        return segs


def encode_conversation(
    fmt: PromptFormat | str,
    conversation: Conversation,
    tokenizer: Any,
    supervise: Supervise = "all",
) -> EncodedConversation:
    """Token ids and labels of ``conversation`` in ``fmt``: the one encoder for training and inference.

    ``supervise`` chooses which replies get labels: ``"all"`` (every assistant turn), ``"last"`` (the
    final one) or ``"none"``; every other token is labelled :data:`IGNORE_INDEX`.
    """
    fmt = get_format(fmt) if isinstance(fmt, str) else fmt
    segs = fmt.segments(conversation, tokenizer)
    eos = getattr(tokenizer, "eos_token_id", None)
    if fmt.append_eos and eos is None:
        raise FormatError(f"format {fmt.name!r} appends EOS after replies but the tokenizer has no eos_token")
    last_reply = max((i for i, s in enumerate(segs) if s.supervised), default=-1)
    input_ids: list[int] = []
    labels: list[int] = []
    for i, seg in enumerate(segs):
        ids = list(tokenizer.encode(seg.text, add_special_tokens=fmt.add_special_tokens and i == 0))
        if seg.supervised and fmt.append_eos:
            ids.append(int(eos))  # type: ignore[arg-type]
        learn = seg.supervised and (supervise == "all" or (supervise == "last" and i == last_reply))
        input_ids += ids
        labels += ids if learn else [IGNORE_INDEX] * len(ids)
    return EncodedConversation(input_ids, labels)


_REGISTRY: dict[str, PromptFormat] = {}


def register_format(fmt: PromptFormat, *, aliases: Iterable[str] = (), replace: bool = False) -> None:
    """Make ``fmt`` available to :func:`get_format` under its name and ``aliases``."""
    for name in (fmt.name, *aliases):
        if name in _REGISTRY and not replace:
            raise FormatError(f"a prompt format named {name!r} is already registered")
        _REGISTRY[name] = fmt


def get_format(name: str) -> PromptFormat:
    """The registered format called ``name``; a :class:`FormatError` lists the known names."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise FormatError(
            f"unknown prompt format {name!r}; known: {', '.join(available_formats())}"
        ) from None


def available_formats() -> list[str]:
    return sorted(_REGISTRY)


register_format(
    TextFormat(
        name="chatglm",
        description="ChatGLM-6B chat(): '[Round i]\\n问：q\\n答：a\\n' from round 0; a lone query is sent bare",
        user_template="[Round {round}]\n问：{query}\n答：",
        turn_separator="\n",
        bare_single_query=True,
        flatten_history=True,
        stop_strings=("[Round ",),
    )
)
register_format(
    TextFormat(
        name="chatglm2",
        description="ChatGLM2-6B: '[Round i]\\n\\n问：q\\n\\n答：a\\n\\n' from round 1",
        user_template="[Round {round}]\n\n问：{query}\n\n答：",
        turn_separator="\n\n",
        first_round=1,
        stop_strings=("[Round ",),
    )
)
register_format(
    TextFormat(
        name="belle",
        description="BELLE / LLaMA: 'Human: q\\n\\nAssistant: a\\n\\n'",
        user_template="Human: {query}\n\nAssistant: ",
        turn_separator="\n\n",
        stop_strings=("\nHuman:", "Human:"),
    )
)
register_format(
    TextFormat(
        name="chatml",
        description="ChatML written out ('<|im_start|>role\\n...<|im_end|>'), for tokenizers without a template",
        user_template="<|im_start|>user\n{query}<|im_end|>\n<|im_start|>assistant\n",
        response_suffix="<|im_end|>",
        turn_separator="\n",
        system_template="<|im_start|>system\n{system}<|im_end|>\n",
        append_eos=False,
        add_special_tokens=False,
        stop_strings=("<|im_end|>", "<|im_start|>"),
    )
)
register_format(ChatTemplateFormat(), aliases=("template",))
