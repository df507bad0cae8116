"""The SiliconFriend Gradio app: chat with memory, and a "My memories" tab.

Every browser session keeps its own :class:`~silicon_friend.engine.Session` in a ``gr.State``;
the one :class:`~memory_bank.MemoryBank` behind them is thread-safe. The conversation shown is
rendered from that server-side session, never read back from the browser, so a client cannot
slip invented turns into the prompt. With login on (``auth``), the signed-in name *is* the memory
user: the name box is locked and every action uses ``request.username``.

(No ``from __future__ import annotations`` here: Gradio reads the ``gr.Request`` annotation of
handlers at run time.)
"""

import logging
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import gradio as gr

from memory_bank.errors import MemoryBankError
from memory_bank.text import validate_user
from silicon_friend.engine import ChatSettings, Session, SiliconFriend
from silicon_friend.memories import export_user, memory_rows, retention_figure
from silicon_friend.web.texts import UITexts, ui_texts

logger = logging.getLogger(__name__)

CSS = "#sf-chatbot {min-height: 420px}"


def message_text(content: Any) -> str:
    """The text of a chat message's content: Gradio 6 gives a list of parts
    (``[{"type": "text", "text": ...}]``), older versions and our own code a string."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Mapping):
        return str(content.get("text") or content.get("content") or "")
    if isinstance(content, Sequence):
        return "".join(message_text(part) for part in content)
    return str(content)


def normalise_history(history: Sequence[Any] | None) -> list[dict[str, str]]:
    """Chatbot history as ``[{"role", "content": str}]`` whatever shape Gradio gave it in
    (messages with string or list-of-parts content, or old ``[user, bot]`` pairs)."""
    out: list[dict[str, str]] = []
    for item in history or []:
        if isinstance(item, Mapping):
            out.append({"role": str(item.get("role", "")), "content": message_text(item.get("content"))})
        elif isinstance(item, Sequence) and not isinstance(item, str) and len(item) == 2:
            user, bot = item
            if user is not None:
                out.append({"role": "user", "content": message_text(user)})
            if bot is not None:
                out.append({"role": "assistant", "content": message_text(bot)})
    return out


class WebApp:
    """Handlers and layout of the web app around one engine.

    Args:
        engine: the conversation engine (shared by all sessions).
        auth: whether login is on; then the signed-in name is the memory user.
        concurrency: replies generated at once (a local model still runs one at a time).
    """

    def __init__(self, engine: SiliconFriend, *, auth: bool = False, concurrency: int = 4) -> None:
        self.engine = engine
        self.texts: UITexts = ui_texts(engine.language)
        self.auth = auth
        self.concurrency = concurrency
        self.export_dir = tempfile.mkdtemp(prefix="silicon-friend-export-")

    # -- helpers ------------------------------------------------------------------------------
    def _user_for(self, name: str | None, request: gr.Request | None) -> str:
        if self.auth:
            username = getattr(request, "username", None)
            if not username:
                raise gr.Error("not signed in")
            return str(username)
        name = (name or "").strip()
        if not name:
            raise gr.Error(self.texts.need_name)
        try:
            return validate_user(name)
        except MemoryBankError as e:
            raise gr.Error(str(e)) from e

    def _session(self, session: Session | None, name: str | None, request: gr.Request | None) -> Session:
        user = self._user_for(name, request)
        if session is None or session.user.strip() != user.strip():
            session = self.engine.start(user)
        return session

    def _welcome(self, session: Session) -> str:
        t, user = self.texts, session.user.strip()
        text = (t.welcome_back if session.returning else t.welcome_new).replace("{user}", user)
        return (t.logged_in_as.replace("{user}", user) + " " if self.auth else "") + text

    def render(self, session: Session | None, pending: str | None = None) -> list[dict[str, str]]:
        """The conversation as Chatbot messages."""
        out: list[dict[str, str]] = []
        for turn in session.turns if session else []:
            out.append({"role": "user", "content": turn.query})
            if turn.error:
                reply = self.texts.model_failed.replace("{error}", turn.error)
                if turn.response:
                    reply = f"{turn.response}\n\n{reply}"
            else:
                reply = turn.response + (f" {self.texts.stopped}" if turn.stopped else "")
            out.append({"role": "assistant", "content": reply})
        if pending is not None:
            out += [{"role": "user", "content": pending}, {"role": "assistant", "content": "…"}]
        return out

    @staticmethod
    def _settings(
        temperature: float, top_p: float, max_new_tokens: float, top_k: float, base: ChatSettings
    ) -> ChatSettings:
        try:
            return base.replace(
                temperature=float(temperature),
                top_p=float(top_p),
                max_new_tokens=int(max_new_tokens),
                top_k=int(top_k),
            )
        except MemoryBankError as e:
            raise gr.Error(str(e)) from e

    # -- chat handlers ------------------------------------------------------------------------
    def remember(self, name: str, session: Session | None, request: gr.Request) -> tuple[Any, ...]:
        session = self.engine.start(self._user_for(name, request))
        return session, self._welcome(session), self.render(session), session.user

    def on_load(self, request: gr.Request) -> tuple[Any, ...]:
        """With login on: fill and lock the name box, open the signed-in user's session."""
        if not self.auth:
            return gr.update(), None, ""
        session = self.engine.start(self._user_for(None, request))
        return gr.update(value=session.user, interactive=False), session, self._welcome(session)

    def _reply(
        self, session: Session, stream: Iterator[str], pending: str | None
    ) -> Iterator[tuple[Any, ...]]:
        yield session, self.render(session, pending), ""
        try:
            for _ in stream:
                yield session, self.render(session), gr.update()
        except MemoryBankError as e:  # refused before anything was stored (e.g. over the size limit)
            yield session, self.render(session), pending
            raise gr.Error(str(e)) from e
        turn = session.turns[-1] if session.turns else None
        if turn is not None and turn.error:
            gr.Warning(self.texts.model_failed.replace("{error}", turn.error))
        yield session, self.render(session), gr.update()

    def send(
        self,
        message: str,
        name: str,
        session: Session | None,
        temperature: float,
        top_p: float,
        max_new_tokens: float,
        top_k: float,
        request: gr.Request,
    ) -> Iterator[tuple[Any, ...]]:
        session = self._session(session, name, request)
        if not (message or "").strip():
            yield session, self.render(session), gr.update()
            return
        settings = self._settings(temperature, top_p, max_new_tokens, top_k, self.engine.settings)
        yield from self._reply(session, self.engine.stream(session, message, settings), message)

    def regenerate(
        self,
        name: str,
        session: Session | None,
        temperature: float,
        top_p: float,
        max_new_tokens: float,
        top_k: float,
        request: gr.Request,
    ) -> Iterator[tuple[Any, ...]]:
        session = self._session(session, name, request)
        if not session.turns:
            gr.Info(self.texts.nothing_to_regenerate)
            yield session, self.render(session), gr.update()
            return
        settings = self._settings(temperature, top_p, max_new_tokens, top_k, self.engine.settings)
        query = session.turns[-1].query
        yield from self._reply(session, self.engine.regenerate(session, settings), query)

    def stop(self, session: Session | None) -> None:
        if session is not None:
            self.engine.stop(session)

    def new_conversation(self, session: Session | None) -> list[dict[str, str]]:
        if session is not None:
            self.engine.new_conversation(session)
        return []

    def remove_last(self, session: Session | None) -> list[dict[str, str]]:
        if session is not None:
            self.engine.remove_last_turn(session)
        return self.render(session)

    def summarize(self, name: str, session: Session | None, request: gr.Request) -> tuple[Any, ...]:
        session = self._session(session, name, request)
        try:
            profile = self.engine.summarize(session)
        except MemoryBankError as e:
            raise gr.Error(str(e)) from e
        t = self.texts
        text = (
            f"**{t.summary_title}**\n\n{profile['global_summary'] or t.no_summary}\n\n"
            f"**{t.portrait_title}**\n\n{profile['global_portrait'] or t.no_summary}"
        )
        return session, text

    # -- memory handlers ----------------------------------------------------------------------
    def memories(self, name: str, session: Session | None, request: gr.Request) -> tuple[Any, ...]:
        """The table, the forgetting-curve plot and the delete dropdown for the session's user."""
        if session is None and not self.auth and not (name or "").strip():
            return None, [], None, gr.update(choices=[], value=None)
        session = self._session(session, name, request)
        bank = self.engine.bank
        rows = memory_rows(bank, session.user)
        table = [r.as_list() for r in rows]
        figure = retention_figure(bank, session.user)
        choices = [
            (f"{r.date} · {r.text[:60]}", r.memory_id)
            for r in rows
            if r.kind == "turn" or r.kind == "daily_summary"
        ]
        return session, table, figure, gr.update(choices=choices, value=None)

    def delete_memory(
        self, name: str, session: Session | None, memory_id: str | None, request: gr.Request
    ) -> tuple[Any, ...]:
        session = self._session(session, name, request)
        if memory_id:
            try:
                self.engine.bank.delete_memory(session.user, memory_id)
            except MemoryBankError as e:
                raise gr.Error(str(e)) from e
            session.turns = [t for t in session.turns if t.memory_id != memory_id]
            gr.Info(self.texts.deleted.replace("{memory_id}", memory_id))
        return (*self.memories(name, session, request), self.render(session))

    def export(self, name: str, session: Session | None, request: gr.Request) -> tuple[Any, ...]:
        session = self._session(session, name, request)
        if not self.engine.bank.has_user(session.user):
            raise gr.Error(
                self.texts.need_name if not session.user else f"{session.user!r} has no memories yet"
            )
        directory = tempfile.mkdtemp(dir=self.export_dir)
        return session, gr.update(
            value=str(export_user(self.engine.bank, session.user, directory)), visible=True
        )

    def forget_me(
        self, name: str, session: Session | None, confirmed: bool, request: gr.Request
    ) -> tuple[Any, ...]:
        session = self._session(session, name, request)
        if not confirmed:
            raise gr.Error(self.texts.forget_unconfirmed)
        user = session.user
        if self.engine.bank.has_user(user):
            self.engine.bank.delete_user(user)
        logger.info("forgot user %r at their request", user)
        fresh = self.engine.start(user)
        status = self.texts.forgot.replace("{user}", user)
        return (
            fresh,
            status,
            [],
            [],
            None,
            gr.update(choices=[], value=None),
            False,
            gr.update(value=None, visible=False),
        )

    # -- layout -------------------------------------------------------------------------------
    def build(self) -> gr.Blocks:
        """The Blocks app (not launched)."""
        t, s = self.texts, self.engine.settings
        chat_limit: dict[str, Any] = {"concurrency_limit": self.concurrency, "concurrency_id": "reply"}
        with gr.Blocks(title="SiliconFriend", analytics_enabled=False) as demo:
            session = gr.State(None)
            gr.Markdown(f"# {t.title}\n{t.intro}")
            with gr.Row():
                name = gr.Textbox(
                    label=t.name_label, placeholder=t.name_placeholder, scale=3, elem_id="sf-name"
                )
                remember = gr.Button(t.remember, variant="secondary", scale=1, elem_id="sf-remember")
            status = gr.Markdown(elem_id="sf-status")
            with gr.Tabs():
                with gr.Tab(t.chat_tab, id="chat"):
                    chatbot = gr.Chatbot(
                        label=t.title, elem_id="sf-chatbot", height=460, buttons=["copy", "copy_all"]
                    )
                    with gr.Row():
                        message = gr.Textbox(
                            label=t.message_label,
                            placeholder=t.message_placeholder,
                            scale=5,
                            elem_id="sf-message",
                        )
                        send = gr.Button(t.send, variant="primary", scale=1, elem_id="sf-send")
                        stop = gr.Button(t.stop, variant="stop", scale=1, elem_id="sf-stop")
                    with gr.Row():
                        new = gr.Button(t.new_conversation, elem_id="sf-new")
                        regen = gr.Button(t.regenerate, elem_id="sf-regenerate")
                        remove = gr.Button(t.remove_last, elem_id="sf-remove")
                        summarize = gr.Button(t.summarize, elem_id="sf-summarize")
                    summary = gr.Markdown(elem_id="sf-summary")
                    with gr.Accordion(t.settings, open=False):
                        temperature = gr.Slider(0.0, 2.0, value=s.temperature, step=0.05, label=t.temperature)
                        top_p = gr.Slider(0.05, 1.0, value=s.top_p, step=0.05, label=t.top_p)
                        max_tokens = gr.Slider(
                            16, 2048, value=s.max_new_tokens, step=16, label=t.max_new_tokens
                        )
                        top_k = gr.Slider(0, max(10, s.top_k), value=s.top_k, step=1, label=t.top_k)
                with gr.Tab(t.memories_tab, id="memories") as memories_tab:
                    refresh = gr.Button(t.refresh, elem_id="sf-refresh")
                    table = gr.Dataframe(
                        headers=list(t.columns),
                        interactive=False,
                        wrap=True,
                        column_widths=["15%", "9%", "10%", "42%", "6%", "6%", "7%", "5%"],
                        elem_id="sf-memory-table",
                    )
                    plot = gr.Plot(elem_id="sf-plot")
                    with gr.Row():
                        victim = gr.Dropdown(label=t.memory_id, choices=[], scale=4, elem_id="sf-victim")
                        delete = gr.Button(t.delete_memory, variant="stop", scale=1, elem_id="sf-delete")
                    export = gr.Button(t.export, elem_id="sf-export")
                    export_file = gr.File(label=t.export_file, visible=False, elem_id="sf-export-file")
                    with gr.Row():
                        confirm = gr.Checkbox(
                            label=t.forget_confirm, value=False, elem_id="sf-forget-confirm"
                        )
                        forget = gr.Button(t.forget_me, variant="stop", elem_id="sf-forget")

            sliders = [temperature, top_p, max_tokens, top_k]
            memory_outputs = [session, table, plot, victim]
            remember_event = gr.on(
                [remember.click, name.submit],
                self.remember,
                [name, session],
                [session, status, chatbot, name],
            )
            remember_event.then(self.memories, [name, session], memory_outputs)
            gr.on(
                [send.click, message.submit],
                self.send,
                [message, name, session, *sliders],
                [session, chatbot, message],
                **chat_limit,
            )
            stop.click(self.stop, [session], None, queue=False)
            gr.on([new.click, chatbot.clear], self.new_conversation, [session], [chatbot])
            regen.click(self.regenerate, [name, session, *sliders], [session, chatbot, message], **chat_limit)
            remove.click(self.remove_last, [session], [chatbot])
            summarize.click(self.summarize, [name, session], [session, summary], **chat_limit)
            gr.on([refresh.click, memories_tab.select], self.memories, [name, session], memory_outputs)
            delete.click(self.delete_memory, [name, session, victim], [*memory_outputs, chatbot])
            export.click(self.export, [name, session], [session, export_file])
            forget.click(
                self.forget_me,
                [name, session, confirm],
                [session, status, chatbot, table, plot, victim, confirm, export_file],
            )
            demo.load(self.on_load, None, [name, session, status])
        return demo


def build_app(engine: SiliconFriend, *, auth: bool = False, concurrency: int = 4) -> gr.Blocks:
    """The SiliconFriend web app around ``engine`` (launch it with :func:`silicon_friend.web.server.serve`)."""
    return WebApp(engine, auth=auth, concurrency=concurrency).build()
