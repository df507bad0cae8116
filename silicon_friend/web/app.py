"""The SiliconFriend Gradio app: chat with memory, and a "My memories" tab.

Every browser tab's :class:`~silicon_friend.engine.Session` lives on the server, keyed by the
signed-in user *and* the tab's session hash (:mod:`silicon_friend.web.sessions`): no handler acts
on state found by the session hash alone. The one :class:`~memory_bank.MemoryBank` behind them
is thread-safe. The conversation shown is rendered from the server-side session, never read back
from the browser, so a client cannot slip invented turns into the prompt; user and model text is
rendered inert (:mod:`silicon_friend.web.safe_text`). With login on (``auth``), the signed-in name
*is* the memory user: the name box is locked and every action uses ``request.username``.

Mistakes (no name yet, an unticked confirmation) are shown as toasts that leave the page usable;
a message sent while a reply streams waits its turn, shown as queued, and is then answered.
Exports are served from memory to their owner only (:mod:`silicon_friend.web.downloads`).

(No ``from __future__ import annotations`` here: Gradio reads the ``gr.Request`` annotation of
handlers at run time.)
"""

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import gradio as gr

from memory_bank.errors import MemoryBankError
from memory_bank.text import validate_user
from silicon_friend.engine import ChatSettings, Session, SiliconFriend
from silicon_friend.errors import SummaryFailedError
from silicon_friend.memories import export_bytes
from silicon_friend.web.downloads import DownloadStore
from silicon_friend.web.memory_tab import CSS as MEMORY_TAB_CSS
from silicon_friend.web.memory_tab import MemoryTab
from silicon_friend.web.refusal import Refused
from silicon_friend.web.safe_text import inert_markdown
from silicon_friend.web.sessions import SessionRegistry, WebSession
from silicon_friend.web.texts import UITexts, ui_texts

logger = logging.getLogger(__name__)

CSS = "#sf-chatbot {min-height: 420px} #sf-memory-table th {white-space: nowrap; word-break: keep-all}"


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

    css = CSS + MEMORY_TAB_CSS

    def __init__(self, engine: SiliconFriend, *, auth: bool = False, concurrency: int = 4) -> None:
        self.engine = engine
        self.texts: UITexts = ui_texts(engine.language)
        self.auth = auth
        self.concurrency = concurrency
        self.sessions = SessionRegistry()
        self.downloads = DownloadStore()
        self.memory_tab = MemoryTab(self)

    @staticmethod
    def theme() -> Any:
        """Gradio's default look with the system's fonts: the page loads nothing from elsewhere."""
        return gr.themes.Default(
            font=["ui-sans-serif", "system-ui", "sans-serif"],
            font_mono=["ui-monospace", "monospace"],
        )

    # -- helpers ------------------------------------------------------------------------------
    @staticmethod
    def _warn(message: str) -> None:
        gr.Warning(message)

    def _user_for(self, name: str | None, request: gr.Request | None) -> str:
        if self.auth:
            username = getattr(request, "username", None)
            if not username:
                raise Refused("not signed in")
            return str(username)
        name = (name or "").strip() if isinstance(name, str) else ""
        if not name:
            raise Refused(self.texts.need_name)
        try:
            return validate_user(name)
        except MemoryBankError as e:
            raise Refused(str(e)) from e

    def _tab(self, request: gr.Request | None) -> WebSession:
        return self.sessions.get(request)

    def _session(self, name: str | None, request: gr.Request | None) -> Session:
        """The tab's session for the user the request acts as (a new one if the user changed)."""
        user = self._user_for(name, request)
        tab = self._tab(request)
        if tab.session is None or tab.session.user.strip() != user.strip():
            tab.session = self.engine.start(user)
        return tab.session

    def _current(self, request: gr.Request | None) -> Session | None:
        """The tab's session, only if it belongs to the signed-in user (with login on)."""
        session = self._tab(request).session
        if session is None:
            return None
        if self.auth and session.user.strip() != str(getattr(request, "username", "") or "").strip():
            return None
        return session

    def _welcome(self, session: Session) -> str:
        t, user = self.texts, inert_markdown(session.user.strip())
        text = (t.welcome_back if session.returning else t.welcome_new).replace("{user}", user)
        return (t.logged_in_as.replace("{user}", user) + " " if self.auth else "") + text

    def render(self, session: Session | None, pending: Sequence[str] = ()) -> list[dict[str, str]]:
        """The conversation as Chatbot messages (inert text), then the messages waiting in line."""
        out: list[dict[str, str]] = []
        for turn in session.turns if session else []:
            out.append({"role": "user", "content": inert_markdown(turn.query)})
            response = inert_markdown(turn.response)
            if turn.stopped:
                reply = f"{response} {self.texts.stopped}".strip()
            elif turn.error:
                reply = self.texts.model_failed.replace("{error}", inert_markdown(turn.error))
                if turn.response:
                    reply = f"{response}\n\n{reply}"
            else:
                reply = response
            out.append({"role": "assistant", "content": reply})
        for message in pending:
            out += [
                {"role": "user", "content": inert_markdown(message)},
                {"role": "assistant", "content": self.texts.queued},
            ]
        return out

    def _render_tab(self, request: gr.Request | None) -> list[dict[str, str]]:
        tab = self._tab(request)
        return self.render(self._current(request), tab.queued())

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
        except (MemoryBankError, TypeError, ValueError) as e:
            raise Refused(str(e)) from e

    # -- chat handlers ------------------------------------------------------------------------
    def remember(self, name: str, request: gr.Request) -> tuple[Any, ...]:
        try:
            user = self._user_for(name, request)
        except Refused as e:
            self._warn(str(e))
            return gr.update(), gr.update(), gr.update()
        tab = self._tab(request)
        tab.session = self.engine.start(user)
        if not tab.session.returning:
            self._hint_other_case(user)
        return self._welcome(tab.session), self._render_tab(request), tab.session.user

    def _hint_other_case(self, user: str) -> None:
        """Names are case-sensitive: say so when memories exist under another spelling ("frank"
        starts empty while "Frank" has memories, which looks like lost memories)."""
        key = user.strip().casefold()
        others = [
            u.strip()
            for u in self.engine.bank.users()
            if u.strip().casefold() == key and u.strip() != user.strip()
        ]
        if others:
            self._warn(self.texts.other_case.replace("{user}", user.strip()).replace("{other}", others[0]))

    def on_load(self, request: gr.Request) -> tuple[Any, ...]:
        """With login on: fill and lock the name box, open the signed-in user's session."""
        if not self.auth:
            return gr.update(), ""
        try:
            session = self._session(None, request)
        except Refused as e:
            self._warn(str(e))
            return gr.update(), ""
        return gr.update(value=session.user, interactive=False), self._welcome(session)

    def on_unload(self, request: gr.Request) -> None:
        self.sessions.drop(request)

    def _reply(
        self,
        request: gr.Request | None,
        session: Session,
        ticket: int,
        start: Callable[[], Iterator[str]],
        message: Any = None,
    ) -> Iterator[tuple[Any, ...]]:
        """Wait for the messages sent before this one, then stream this reply."""
        tab = self._tab(request)
        try:
            yield self._render_tab(request), ""
        except GeneratorExit:  # closed before its turn came (a closed tab): out of the line
            tab.leave(ticket)
            raise
        with tab.turn(ticket):
            try:
                stream = start()
                for _ in stream:
                    yield self._render_tab(request), gr.update()
            except MemoryBankError as e:  # refused before anything was stored (e.g. over the size limit)
                self._warn(str(e))
                refused = True
            else:
                refused = False
        if refused:  # the message goes back into the box
            yield self._render_tab(request), gr.update() if message is None else message
            return
        turn = session.turns[-1] if session.turns else None
        if turn is not None and turn.error and not turn.stopped:
            self._warn(self.texts.model_failed.replace("{error}", turn.error))
        yield self._render_tab(request), gr.update()

    def send(
        self,
        message: str,
        name: str,
        temperature: float,
        top_p: float,
        max_new_tokens: float,
        top_k: float,
        request: gr.Request,
    ) -> Iterator[tuple[Any, ...]]:
        try:
            session = self._session(name, request)
            settings = self._settings(temperature, top_p, max_new_tokens, top_k, self.engine.settings)
        except Refused as e:
            self._warn(str(e))
            yield gr.update(), gr.update()  # the message stays in the box
            return
        if not (message or "").strip():
            yield self._render_tab(request), gr.update()
            return
        tab = self._tab(request)
        ticket = tab.enqueue(message)
        yield from self._reply(
            request, session, ticket, lambda: self.engine.stream(session, message, settings), message
        )

    def regenerate(
        self,
        name: str,
        temperature: float,
        top_p: float,
        max_new_tokens: float,
        top_k: float,
        request: gr.Request,
    ) -> Iterator[tuple[Any, ...]]:
        try:
            session = self._session(name, request)
            settings = self._settings(temperature, top_p, max_new_tokens, top_k, self.engine.settings)
        except Refused as e:
            self._warn(str(e))
            yield gr.update(), gr.update()
            return
        tab = self._tab(request)
        if not session.turns or tab.busy():
            gr.Info(self.texts.nothing_to_regenerate if not session.turns else self.texts.wait_for_reply)
            yield self._render_tab(request), gr.update()
            return
        ticket = tab.enqueue(session.turns[-1].query, shown=False)  # the turn being redone
        yield from self._reply(request, session, ticket, lambda: self.engine.regenerate(session, settings))

    def stop(self, request: gr.Request) -> None:
        session = self._current(request)
        if session is not None:
            self.engine.stop(session)

    def new_conversation(self, request: gr.Request) -> list[dict[str, str]]:
        session = self._current(request)
        if session is not None:
            self.engine.new_conversation(session)
        return self._render_tab(request)

    def remove_last(self, request: gr.Request) -> list[dict[str, str]]:
        session = self._current(request)
        if session is not None:
            self.engine.remove_last_turn(session)
        return self._render_tab(request)

    def summarize(self, name: str, request: gr.Request, progress: Any = gr.Progress()) -> Any:  # noqa: B008
        """Summarise now with a progress bar; a failure is a toast, and what was made is shown."""
        t = self.texts

        def report(done: int, total: int) -> None:
            progress((done, total), desc=t.summarizing.format(done=done, total=total))

        try:
            session = self._session(name, request)
            profile = self.engine.summarize(session, progress=report)
        except Refused as e:
            self._warn(str(e))
            return gr.update()
        except SummaryFailedError as e:  # some were made: show them with the failure
            self._warn(str(e))
            profile = e.profile
        except MemoryBankError as e:  # every one failed, or a timeout: the old summaries stay, shown
            self._warn(t.summary_failed.format(error=e))
            if not self.engine.bank.has_user(session.user):
                return gr.update()
            profile = self.engine.bank.profile(session.user)
        return (
            f"**{t.summary_title}**\n\n{inert_markdown(profile['global_summary']) or t.no_summary}\n\n"
            f"**{t.portrait_title}**\n\n{inert_markdown(profile['global_portrait']) or t.no_summary}"
        )

    # -- memory handlers (the rest of the tab is silicon_friend.web.memory_tab) ------------------
    def export(self, name: str, request: gr.Request) -> Any:
        """A download link to the user's memory file, valid for a few minutes and only for them."""
        try:
            session = self._session(name, request)
        except Refused as e:
            self._warn(str(e))
            return gr.update()
        if not self.engine.bank.has_user(session.user):
            self._warn(self.texts.nothing_to_export.replace("{user}", session.user.strip()))
            return gr.update(value="", visible=False)
        filename, data = export_bytes(self.engine.bank, session.user)
        login = getattr(request, "username", None) if self.auth else None
        link = self.downloads.add(session.user, login, filename, data)
        text = self.texts.export_ready.replace("{link}", link).replace("{file}", inert_markdown(filename))
        return gr.update(value=text, visible=True)

    def forget_me(self, name: str, confirmed: bool, request: gr.Request) -> tuple[Any, ...]:
        keep = (gr.update(),) * (6 + len(self.memory_tab.outputs))
        try:
            user = self._user_for(name, request)
        except Refused as e:
            self._warn(str(e))
            return keep
        if not confirmed:
            self._warn(self.texts.forget_unconfirmed)
            return keep
        tabs = [t for t in self.sessions.of_user(user) if t.session is not None]
        for tab in tabs:  # stop replies of every tab of the user, and let them finish storing
            assert tab.session is not None
            self.engine.stop(tab.session)
        for tab in tabs:
            assert tab.session is not None
            with tab.session.lock:
                tab.session.turns.clear()
        if self.engine.bank.has_user(user):
            self.engine.bank.delete_user(user)
        self.downloads.drop_user(user)
        self.memory_tab.views.drop_user(user)
        logger.info("forgot a user at their request")
        fresh = self.engine.start(user)
        self._tab(request).session = fresh
        status = self.texts.forgot.replace("{user}", inert_markdown(user.strip()))
        return (status, [], *self.memory_tab.cleared(), False, gr.update(value="", visible=False), "")

    # -- layout -------------------------------------------------------------------------------
    def build(self) -> gr.Blocks:
        """The Blocks app (not launched)."""
        t, s = self.texts, self.engine.settings
        chat_limit: dict[str, Any] = {"concurrency_limit": self.concurrency, "concurrency_id": "reply"}
        with gr.Blocks(title="SiliconFriend", analytics_enabled=False) as demo:
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
                    memory_outputs = self.memory_tab.build(name, chatbot, memories_tab)
                    export = gr.Button(t.export, elem_id="sf-export")
                    export_link = gr.Markdown(visible=False, elem_id="sf-export-link")
                    with gr.Row():
                        confirm = gr.Checkbox(
                            label=t.forget_confirm, value=False, elem_id="sf-forget-confirm"
                        )
                        forget = gr.Button(t.forget_me, variant="stop", elem_id="sf-forget")

            sliders = [temperature, top_p, max_tokens, top_k]
            quiet: dict[str, Any] = {"show_progress": "hidden"}
            remember_event = gr.on(
                [remember.click, name.submit], self.remember, [name], [status, chatbot, name]
            )
            remember_event.then(self.memory_tab.memories, self.memory_tab.inputs, memory_outputs, **quiet)
            gr.on(
                [send.click, message.submit],
                self.send,
                [message, name, *sliders],
                [chatbot, message],
                trigger_mode="multiple",  # a message sent while a reply streams waits its turn
                show_progress="minimal",
                **chat_limit,
            )
            stop.click(self.stop, None, None, queue=False)
            gr.on([new.click, chatbot.clear], self.new_conversation, None, [chatbot])
            regen.click(
                self.regenerate, [name, *sliders], [chatbot, message], show_progress="minimal", **chat_limit
            )
            remove.click(self.remove_last, None, [chatbot])
            summarize.click(self.summarize, [name], [summary], **chat_limit).then(
                self.memory_tab.memories, self.memory_tab.inputs, memory_outputs, **quiet
            )
            export.click(self.export, [name], [export_link], **quiet)
            forget.click(
                self.forget_me,
                [name, confirm],
                [status, chatbot, *memory_outputs, confirm, export_link, summary],
                **quiet,
            )
            demo.load(self.on_load, None, [name, status])
            demo.unload(self.on_unload)
            demo.unload(self.memory_tab.on_unload)
        return demo


def build_app(engine: SiliconFriend, *, auth: bool = False, concurrency: int = 4) -> gr.Blocks:
    """The SiliconFriend web app around ``engine`` (launch it with :func:`silicon_friend.web.server.serve`)."""
    return WebApp(engine, auth=auth, concurrency=concurrency).build()
