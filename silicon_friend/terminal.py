"""The terminal chat: the original's commands (``clear`` empties the conversation, ``stop`` quits)
plus ``/memories``, ``/summarize``, ``/why`` (the memories the last reply used, and whether it was
stored), ``/temporary`` (pause memory: replies neither read nor write memories) and ``/help``.
Input and output are injectable for tests.

Example::

    run_chat(engine, "Emily")                                  # interactive
    run_chat(engine, "Emily", input_fn=iter(["hi", "stop"]).__next__, out=io.StringIO())
"""

from __future__ import annotations

import dataclasses
import os
import re
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any, TextIO

from memory_bank.errors import InvalidInputError, MemoryBankError
from silicon_friend.engine import SiliconFriend, Turn
from silicon_friend.errors import SummaryFailedError
from silicon_friend.memories import memory_rows
from silicon_friend.reasons import localise


@dataclasses.dataclass(frozen=True)
class TerminalTexts:
    ask_name: str
    welcome_new: str
    welcome_back: str
    help: str
    you: str
    cleared: str
    bye: str
    bye_unsaved: str
    stopped_note: str
    trimmed_note: str
    failed: str
    not_saved: str
    failed_temporary: str
    stopping: str
    saving: str
    unreadable: str
    no_memories: str
    summary: str
    portrait: str
    none_yet: str
    unknown: str
    refused: str
    why: str
    why_none: str
    stored: str
    reinforced: str
    temporary_on: str
    temporary_off: str


TERMINAL: dict[str, TerminalTexts] = {
    "en": TerminalTexts(
        ask_name="What's your name? ",
        welcome_new="Welcome, {user}! I'm {bot}. This is our first conversation.",
        welcome_back="Welcome back, {user}! I'm {bot}, and I remember our past conversations.",
        help="Commands: clear (new conversation), stop (quit), /memories, /summarize, /why, /temporary, /help",
        you="{user}: ",
        cleared="(conversation cleared; your memories are kept)",
        bye="Bye, {user}! Your memories are saved.",
        bye_unsaved="Bye, {user}! Some of this chat's messages were NOT saved (see above).",
        stopped_note="[stopped before the model said anything; your message was saved]",
        trimmed_note="[the reply reached its length limit: it was kept up to its last full sentence]",
        failed="[the model failed to reply: {error}; your message was saved]",
        not_saved="[your message was NOT saved: {error}; it is saved with your next message once the store works again]",
        failed_temporary="[the model failed to reply: {error}; a temporary chat saves nothing]",
        stopping=" (stopping)",
        saving="(saving your message; press Ctrl-C once more to quit without saving it)",
        unreadable="(that line is not UTF-8 text and was not sent; type it again)",
        no_memories="(no memories yet)",
        summary="Summary of past events",
        portrait="Your portrait",
        none_yet="(not summarised yet)",
        unknown="(unknown command {command}: nothing was sent; /help lists the commands)",
        refused="[not sent: {error}]",
        why="Memories the last reply used:",
        why_none="(the last reply used no memories)",
        stored="(memory updated: that turn was stored{reinforced})",
        reinforced="; {n} recalled memories strengthened",
        temporary_on="(temporary chat: I neither read nor write memories until you type /temporary again)",
        temporary_off="(temporary chat is off: memories are read and written again)",
    ),
    "zh": TerminalTexts(
        ask_name="你叫什么名字？",
        welcome_new="欢迎你，{user}！我是{bot}，这是我们的第一次对话。",
        welcome_back="欢迎回来，{user}！我是{bot}，我记得我们之前的对话。",
        help="命令：clear（新对话）、stop（退出）、/memories、/summarize、/why、/temporary、/help",
        you="{user}：",
        cleared="（对话已清空，记忆仍然保留）",
        bye="再见，{user}！你的记忆已保存。",
        bye_unsaved="再见，{user}！这次对话中有些消息没有保存（见上文）。",
        stopped_note="[在模型开口之前就停止了；你的消息已保存]",
        trimmed_note="[回复达到长度上限：只保留到最后一个完整的句子]",
        failed="[模型没有成功回复：{error}；你的消息已保存]",
        not_saved="[你的消息没有保存：{error}；存储恢复后，它会随下一条消息一起保存]",
        failed_temporary="[模型没有成功回复：{error}；临时对话不保存任何内容]",
        stopping="（正在停止）",
        saving="（正在保存你的消息；再按一次 Ctrl-C 会不保存就退出）",
        unreadable="（这一行不是 UTF-8 文本，没有发送；请重新输入）",
        no_memories="（还没有记忆）",
        summary="过往事件总结",
        portrait="你的性格画像",
        none_yet="（尚未总结）",
        unknown="（未知命令 {command}：没有发送任何内容；输入 /help 查看命令）",
        refused="[没有发送：{error}]",
        why="上一条回复用到的记忆：",
        why_none="（上一条回复没有用到记忆）",
        stored="（记忆已更新：这一轮对话已保存{reinforced}）",
        reinforced="；{n} 条被回忆的记忆得到加强",
        temporary_on="（临时对话：在你再次输入 /temporary 之前，我既不读取也不写入记忆）",
        temporary_off="（临时对话已关闭：重新读取和写入记忆）",
    ),
}

InputFn = Callable[[str], str]


#: C0 and C1 control characters: ESC starts the terminal's escape sequences (clear the screen,
#: retitle the window, move the cursor over earlier lines), and C1's CSI (U+009B) does too.
#: (Line breaks are kept.)
_TERMINAL_CONTROLS = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f]")


def _inert(text: str) -> str:
    """Stored text with its control characters written as escapes: a memory is the user's data
    (an imported file, a tool's note) and may hold anything; written raw, an escape sequence in
    it would drive the terminal."""
    return _TERMINAL_CONTROLS.sub(lambda c: f"\\x{ord(c.group()):02x}", text)


def _line(text: str) -> str:
    """Stored text as one inert line of at most 100 characters."""
    return _inert(" ".join(text.split())[:100])


def _why(turn: Turn | None, t: TerminalTexts, out: TextIO) -> None:
    """What the last reply used (date, score, text) and whether its turn was stored."""
    if turn is None or not turn.used:
        out.write(t.why_none + "\n")
    else:
        out.write(t.why + "\n")
        for m in turn.used:
            out.write(f"  {m.date}  {m.score:.2f}  {_line(m.text)}\n")
    if turn is not None and turn.stored:
        more = t.reinforced.replace("{n}", str(turn.reinforced)) if turn.reinforced else ""
        out.write(t.stored.replace("{reinforced}", more) + "\n")


def _read(input_fn: InputFn, prompt: str, out: TextIO, t: TerminalTexts) -> str | None:
    try:
        return input_fn(prompt)
    except (EOFError, StopIteration):
        return None
    except KeyboardInterrupt:
        out.write("\n")
        return None
    except UnicodeDecodeError:  # bytes of another encoding, read by a strict decoder
        out.write("\n" + t.unreadable + "\n")
        return ""


class _CtrlCStops:
    """While a reply is made and stored, Ctrl-C stops the reply (as the web's Stop) instead of
    raising wherever the program is: raised inside the storing, it lost the turn; inside an
    import of the encoder, it left the module half-loaded and the chat crashed. A third press
    while the turn is still being saved quits at once (exit code 130), as the second one warns."""

    def __init__(self, cancel: threading.Event, out: TextIO, t: TerminalTexts) -> None:
        self.cancel, self.out, self.t, self.presses = cancel, out, t, 0
        self.previous: Any = None

    def __enter__(self) -> _CtrlCStops:
        if threading.current_thread() is threading.main_thread():
            self.previous = signal.signal(signal.SIGINT, self._pressed)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)

    def _pressed(self, signum: int, frame: Any) -> None:
        self.presses += 1
        if self.presses >= 3:  # quit now, as warned: raised here, inside an import or a write,
            self.out.write("\n")  # the exception would leave modules half-loaded and crash instead
            self.out.flush()
            os._exit(130)
        self.out.write(self.t.stopping if self.presses == 1 else "\n" + self.t.saving + "\n")
        self.out.flush()
        self.cancel.set()


def run_chat(
    engine: SiliconFriend,
    user: str | None = None,
    *,
    input_fn: InputFn = input,
    out: TextIO | None = None,
) -> int:
    """Chat in the terminal until ``stop`` or end of input; returns an exit code."""
    out = out or sys.stdout
    t = TERMINAL[engine.language]
    bot = engine.bot_name
    asked = not user
    while True:
        while not user or not user.strip():
            user = _read(input_fn, t.ask_name, out, t)
            if user is None or (asked and user.strip() == "stop"):
                return 0
        try:
            session = engine.start(user.strip())
            break
        except InvalidInputError as e:
            if not asked:  # given on the command line: the caller reports it
                raise
            out.write(f"[{localise(str(e), engine.language)}]\n")  # typed at the prompt: ask again
            user = None
    fill = lambda s: s.replace("{user}", session.user).replace("{bot}", bot)  # noqa: E731
    out.write(fill(t.welcome_back if session.returning else t.welcome_new) + "\n" + t.help + "\n")
    while True:
        line = _read(input_fn, fill(t.you), out, t)
        if line is None or line.strip() == "stop":
            lost = not engine.store_unsaved(session)  # a last try for what the store could not take
            out.write(fill(t.bye_unsaved if lost else t.bye) + "\n")
            return 0
        command = line.strip()
        if not command:
            continue
        if command == "clear":
            engine.new_conversation(session)
            out.write(t.cleared + "\n")
        elif command == "/help":
            out.write(t.help + "\n")
        elif command == "/memories":
            rows = memory_rows(engine.bank, session.user)
            for r in rows:
                out.write(f"  {r.date}  S={r.strength}  R={r.retention:.2f}  {_line(r.text)}\n")
            if not rows:
                out.write(t.no_memories + "\n")
        elif command == "/summarize":
            try:
                profile = engine.summarize(session)
            except SummaryFailedError as e:  # some were made: show them with the failure
                out.write(f"[{localise(str(e), engine.language)}]\n")
                profile = e.profile
            except MemoryBankError as e:
                out.write(f"[{localise(str(e), engine.language)}]\n")
                continue
            except KeyboardInterrupt:  # stops the summarising, not the chat
                out.write("\n")
                continue
            for label, text in ((t.summary, profile["global_summary"]), (t.portrait, profile["global_portrait"])):
                out.write(f"{label}: {_inert(text) if text else t.none_yet}\n")
        elif command == "/why":
            _why(session.turns[-1] if session.turns else None, t, out)
        elif command == "/temporary":
            session.temporary = not session.temporary
            out.write((t.temporary_on if session.temporary else t.temporary_off) + "\n")
        elif command.startswith("/") and " " not in command:  # a mistyped command, not a message
            out.write(t.unknown.replace("{command}", command) + "\n")
        else:
            out.write(f"{bot}: ")
            out.flush()
            cancel = threading.Event()
            with _CtrlCStops(cancel, out, t):
                stream = engine.stream(session, line, cancel=cancel)
                try:
                    for piece in stream:
                        out.write(piece)
                        out.flush()
                except KeyboardInterrupt:  # the third Ctrl-C: quit as asked
                    stream.close()
                    raise
                except MemoryBankError as e:  # refused before anything was stored (too long, ...)
                    out.write(t.refused.replace("{error}", localise(str(e), engine.language)) + "\n")
                    continue
            turn = session.turns[-1]
            error = localise(turn.error or "", engine.language)
            if turn.unsaved:
                out.write(t.not_saved.replace("{error}", error))
            elif turn.stopped and not turn.response and not turn.temporary:
                out.write(t.stopped_note)  # the user stopped it: not a failure of the model
            elif turn.error:
                out.write((t.failed_temporary if turn.temporary else t.failed).replace("{error}", error))
            elif turn.cut:
                out.write("\n" + t.trimmed_note)  # what is kept (and shown on a reload) is less than was printed
            out.write("\n")
