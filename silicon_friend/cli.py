"""The ``silicon-friend`` command: ``web`` (the Gradio app) and ``chat`` (the terminal).

    silicon-friend web [--host 127.0.0.1] [--port 7860] [--data-dir DIR] [--llm SPEC]
                       [--language en|zh] [--share] [--auth user:pass | --auth-file F]
                       [--allowed-host NAME]
    silicon-friend chat [--user NAME] [--llm SPEC] [--language en|zh] [--data-dir DIR]
    silicon-friend eval answers --memory-file FILE --questions F --labels F --judge SPEC --out OUT

``--llm`` takes an LLM spec (see :mod:`memory_bank.llm`): ``openai:gpt-4o-mini``,
``openai:MODEL@http://127.0.0.1:8080/v1``, ``llamacpp:/path/model.gguf``,
``hf:/path/model+/path/adapter``; without it, the packaged SmolLM2-135M-Instruct runs offline.
Errors print one line and exit with code 2.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from memory_bank.cli_support import tcp_port
from memory_bank.forgetting import MODES
from memory_bank.languages import LANGUAGES
from silicon_friend import __version__

logger = logging.getLogger("silicon_friend.cli")

#: The smallest --context-tokens that leaves room for a message and a reply beside the prompt.
MIN_CONTEXT = 512


def _positive(kind: Callable[[str], Any], least: float = 0, why: str = "") -> Callable[[str], Any]:
    """An argparse type: a number of ``kind`` above 0, or at least ``least`` (a context too small
    for the companion's own prompt started the chat and refused every message)."""

    def parse(text: str) -> Any:
        value = kind(text)
        if not value > 0 or value < least:
            raise argparse.ArgumentTypeError(f"must be {f'at least {least:g}{why}' if least else 'above 0'}, got {text}")
        return value

    parse.__name__ = kind.__name__  # argparse names the type in its errors
    return parse


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data-dir",
        help="memory store directory or database URL (default: the --config file's store:, else ./memorybank_data)",
    )
    parser.add_argument("--llm", help="LLM spec (default: the packaged SmolLM2 through llama.cpp)")
    parser.add_argument(
        "--trust-remote-code",
        action="store_true",
        help="hf models: run the Python code a model folder ships (ChatGLM-6B needs it); only for a model you trust",
    )
    parser.add_argument("--language", choices=LANGUAGES, default="en", help="prompts, UI and encoder")
    parser.add_argument(
        "--config",
        help="memory bank YAML config: retrieval.top_k, history_window, forgetting, summaries (flags override it)",
    )
    parser.add_argument("--encoder", help="encoder override: minilm, use-multilingual, hashing or a path")
    parser.add_argument("--forgetting", choices=MODES, help="forgetting mode (default: the config's, selective forgetting on the paper's curve; off turns it off)")
    parser.add_argument(
        "--top-k", type=int, help="memories retrieved per reply, 0 for none (default: the config's retrieval.top_k, 2)"
    )
    parser.add_argument(
        "--history-turns", type=int, help="recent turns kept in the prompt (default: the config's history_window, 7)"
    )
    parser.add_argument("--max-new-tokens", type=int, default=256)
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--top-p", type=float, default=0.9)
    parser.add_argument(
        "--context-tokens",
        type=_positive(int, MIN_CONTEXT, " (the companion's prompt alone needs about 250)"),
        help="the model's context size (default: what it reports)",
    )
    parser.add_argument(
        "--timeout", type=_positive(float), default=180.0, help="seconds to wait for the model's reply"
    )
    parser.add_argument("--no-summaries", action="store_true", help="no background day summaries")
    parser.add_argument(
        "--summary-config",
        help="summariser YAML (configs/summaries.yaml); overrides the --config file's summaries: section",
    )
    parser.add_argument("-v", "--verbose", action="store_true")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="silicon-friend", description="SiliconFriend: an AI companion with long-term memory."
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    web = sub.add_parser("web", help="serve the web app")
    _common(web)
    web.add_argument("--host", default="127.0.0.1", help="address to bind (default: loopback only)")
    web.add_argument("--port", type=tcp_port, default=7860, help="port on the host (default: 7860)")
    web.add_argument("--share", action="store_true", help="open a public Gradio share link (off by default)")
    login = web.add_mutually_exclusive_group()
    login.add_argument("--auth", action="append", metavar="USER:PASS", help="require login (repeatable)")
    login.add_argument("--auth-file", help="file of user:pass lines; the login name is the memory user")
    web.add_argument("--concurrency", type=int, default=4, help="replies generated at once")
    web.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME",
        help="another host name the app may be reached by (e.g. behind a proxy); repeatable",
    )
    chat = sub.add_parser("chat", help="chat in the terminal")
    _common(chat)
    chat.add_argument("--user", help="your name (asked if not given)")
    from silicon_friend.evaluation.cli import add_parsers as add_eval_parsers

    add_eval_parsers(sub)
    return parser


def _options(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    from silicon_friend.engine import ChatSettings
    from silicon_friend.runtime import Options

    settings = ChatSettings(temperature=args.temperature, top_p=args.top_p, max_new_tokens=args.max_new_tokens)
    return Options(
        data_dir=args.data_dir,
        llm=args.llm,
        trust_remote_code=args.trust_remote_code,
        language=args.language,
        encoder=args.encoder,
        config=args.config,
        forgetting=args.forgetting,
        context_tokens=args.context_tokens,
        summaries=not args.no_summaries,
        summary_config=args.summary_config,
        timeout=args.timeout,
        settings=settings,
        top_k=args.top_k,
        history_turns=args.history_turns,
    )


def _say_loading(args: argparse.Namespace) -> None:
    """One line on stderr while the chat model loads (a large local model takes a while)."""
    what = args.llm or "the packaged SmolLM2-135M-Instruct (an English-only demo model)"
    print(f"Loading {what}…", file=sys.stderr, flush=True)


def _web(args: argparse.Namespace) -> int:
    from silicon_friend.runtime import build_engine
    from silicon_friend.web.server import load_credentials, serve

    credentials = load_credentials(args.auth or (), args.auth_file)
    _say_loading(args)
    engine = build_engine(_options(args))
    try:
        serve(
            engine,
            host=args.host,
            port=args.port,
            share=args.share,
            credentials=credentials,
            concurrency=args.concurrency,
            allowed_hosts=args.allowed_host,
        )
    finally:
        engine.close()
        engine.bank.close()
    return 0


#: The terminal's form of the web page's notice: the packaged demo model cannot chat in Chinese.
CHINESE_DEMO_NOTICE = (
    "⚠️ 离线演示模型（SmolLM2-135M）不能用中文聊天。请用真正的模型启动：silicon-friend chat --language zh "
    "再加上 --llm openai:MODEL@http://127.0.0.1:8080/v1（任何 OpenAI 兼容的服务）、"
    "--llm llamacpp:/path/to/model.gguf，或 --llm hf:/path/to/chatglm-6b+/path/to/adapter --trust-remote-code。"
)


def _chat(args: argparse.Namespace) -> int:
    from silicon_friend.runtime import build_engine
    from silicon_friend.terminal import run_chat

    _say_loading(args)
    engine = build_engine(_options(args))
    if engine.model.packaged and engine.language == "zh":  # as the web page says it, in Chinese
        print(CHINESE_DEMO_NOTICE, file=sys.stderr, flush=True)
    root = logging.getLogger()
    level = root.level
    if not args.verbose:
        # The chat says every failure in its own words, in its language; the log's English
        # warnings (and tracebacks) printed into the conversation besides. -v shows them.
        root.setLevel(logging.CRITICAL)
    try:
        return run_chat(engine, args.user)
    finally:
        root.setLevel(level)
        engine.close()
        engine.bank.close()


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"  # never phone home
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    from memory_bank.errors import MemoryBankError

    try:
        if args.command == "eval":
            from silicon_friend.evaluation.cli import run as run_eval

            return run_eval(args)
        return _web(args) if args.command == "web" else _chat(args)
    except MemoryBankError as e:
        print(f"silicon-friend: error: {' '.join(str(e).split())}", file=sys.stderr)  # one line
        return 2
    except KeyboardInterrupt:
        print("silicon-friend: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
