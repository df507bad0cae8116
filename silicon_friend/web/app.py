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

Under each reply a collapsed "memories used" line lists the memories its prompt carried (date,
kind, retrieval score, text) and, once the turn is committed to the store, says "memory updated".
A tab can switch to a temporary chat that neither reads nor writes memories. The header says
which model answers (and, for the packaged demo model, that it is a 135M English-only toy). The
language switch re-labels every registered component (:mod:`silicon_friend.web.i18n`); the
name is kept in the browser (``localStorage``) so a reload shows the recent conversation again.

Replies are made on threads of their own, not on the requests that asked for them: when a page
goes away mid-reply (a reload, a closed tab) the reply is finished and stored, and the messages
waiting after it are answered and stored too. The same user's next page takes the tab over and
draws the replies as they go on (:meth:`WebApp.follow`). A message sent is kept in the browser
with its name, so a reload shows the conversation even when Remember Me was never pressed.

(No ``from __future__ import annotations`` here: Gradio reads the ``gr.Request`` annotation of
handlers at run time.)
"""

import asyncio
import logging
import secrets
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from typing import Any

import gradio as gr

from memory_bank.errors import MemoryBankError
from memory_bank.records import Memory
from memory_bank.text import MAX_TEXT, has_visible, same_user, validate_user
from silicon_friend.engine import ChatSettings, Session, SiliconFriend, Turn
from silicon_friend.memories import export_bytes
from silicon_friend.memory_view import delete_undoable
from silicon_friend.reasons import localise
from silicon_friend.web.downloads import DownloadStore
from silicon_friend.web.i18n import Translations
from silicon_friend.web.memory_tab import CSS as MEMORY_TAB_CSS
from silicon_friend.web.memory_tab import MemoryTab
from silicon_friend.web.refusal import Refused
from silicon_friend.web.safe_text import inert_markdown, literal_markdown, toast_text
from silicon_friend.web.sessions import LineFullError, ReplyPool, SessionRegistry, WebSession
from silicon_friend.web.summary_state import POLL_SECONDS, failure_toast, summary_line
from silicon_friend.web.texts import LANGUAGES, UI, UITexts, ui_texts

logger = logging.getLogger(__name__)

#: How often a page following a reply looks for what moved (seconds): 20 frames a second at most.
FOLLOW_SECONDS = 0.05
#: How often a page asks whether its user was deleted elsewhere (see ``WebApp.ended_tick``).
ENDED_POLL_SECONDS = 3.0
#: What "Forget me" leaves as the browser's kept name: the browser keeps only a value that is not
#: empty (an empty one left the forgotten name there), and a page load reads a blank as none.
FORGOTTEN = " "
#: The store setting that holds the key of the browser's kept name (see ``WebApp._name_secret``).
NAME_SECRET = "web_name_secret"

CSS = (
    "#sf-chatbot {min-height: 420px} #sf-memory-table th {white-space: nowrap; word-break: keep-all}"
    " #sf-temporary-banner {border-left: 4px solid #7c3aed; padding-left: 8px}"
    # On a phone the language switch goes under the title, which was broken mid-word beside it.
    " #sf-header h1 {overflow-wrap: normal; word-break: keep-all}"
    " @media (max-width: 640px) {#sf-top {flex-wrap: wrap} #sf-top > :first-child {min-width: 100% !important}}"
)


def toast_title_css() -> str:
    """Toast titles in the page's language: Gradio 6 titles every toast with its English type
    ("Warning", "Info") whatever ``title=`` says, so while the language switch shows another
    language the title text is hidden and the language's own title shown in its place."""
    rules = []
    for code, t in UI.items():
        if code == "en":
            continue
        page = f'body:has(#sf-language input[value="{code}"]:checked)'
        rules.append(f"{page} .toast-title {{font-size: 0 !important}}")
        for kind, title in (("warning", t.warning_title), ("info", t.info_title)):
            rules.append(
                f'{page} .toast-title.{kind}::after {{content: "{title}"; font-size: var(--text-md)}}'
            )
    return " ".join(rules)


#: Characters of a memory shown under "memories used".
USED_TEXT_CHARS = 300


def _short(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


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

    css = CSS + MEMORY_TAB_CSS + " " + toast_title_css()
    #: Run on page load. An Enter that confirms an input method's candidate (Chinese pinyin, Japanese)
    #: belongs to the input method: a text box would otherwise submit the half-typed letters
    #: ("wo jin tian" for 我今天: a message sent, a memory added, a name signed in as "xiao ming").
    #: Listening first (capture), it keeps such an Enter from every text box of the page.
    #: It also deletes the run history an earlier version of the app left in the browser (every
    #: message and reply, kept by Gradio under an id that changed at each start).
    js = """() => {
      for (const store of [localStorage, sessionStorage]) {
        for (const key of Object.keys(store)) if (key.startsWith("gradio:run-history")) store.removeItem(key);
      }
      const guard = (e) => {
        if (e.key !== "Enter" || !(e.isComposing || e.keyCode === 229)) return;
        if (e.target instanceof Element && e.target.matches("textarea, input")) e.stopImmediatePropagation();
      };
      document.addEventListener("keydown", guard, true);
      document.addEventListener("keypress", guard, true);
    }"""

    #: Run in the page as a message is sent, with the values sent: the message box is emptied
    #: there and then. Emptied by the reply's handler instead, the box could be emptied after the
    #: next message was typed (or typed and sent: empty, it was lost) when the server was slow.
    js_send = """(...values) => {
      const box = document.querySelector("#sf-message textarea");
      if (box) { box.value = ""; box.dispatchEvent(new Event("input", {bubbles: true})); }
      window.sfHandedBack = "";
      return values;
    }"""

    #: Run in the page when messages come back into the box (refused, or their conversation
    #: ended while they waited): ``back`` is every message refused since the last one sent, in
    #: the order sent, and ``draft`` what the box holds now. What the user typed meanwhile is kept
    #: after them (it had been written over); the messages given back before are replaced, not
    #: repeated. ``back`` is then cleared, so the same words given back again are seen again.
    js_hand_back = """(back, draft) => {
      if (!back) return [draft, ""];
      let rest = draft || "";
      const before = window.sfHandedBack || "";
      if (before && rest.startsWith(before)) rest = rest.slice(before.length);
      window.sfHandedBack = back;
      rest = rest.replace(/^\\s+/, "");
      return [rest ? back + "\\n\\n" + rest : back, ""];
    }"""

    def __init__(self, engine: SiliconFriend, *, auth: bool = False, concurrency: int = 4) -> None:
        self.engine = engine
        self.texts: UITexts = ui_texts(engine.language)
        self.auth = auth
        self.concurrency = concurrency
        self.sessions = SessionRegistry()
        self.pool = ReplyPool(concurrency)  # replies made at once, and made or waiting, all tabs
        self.downloads = DownloadStore()
        self.i18n = Translations()
        self.memory_tab = MemoryTab(self)
        self.ready = threading.Event()  # the memory encoder is loaded
        self.ready.set()  # until start_warm_up() says otherwise

    def start_warm_up(self) -> threading.Thread:
        """Load the memory encoder in the background, so that the first "Remember Me" and the
        first reply do not wait for it silently (the page shows that it is loading)."""
        self.ready.clear()

        def work() -> None:
            try:
                self.engine.bank.encoder.encode(["warm up"])
            except Exception:  # the first search reports the real error to the user
                logger.exception("loading the memory encoder failed")
            finally:
                self.ready.set()

        thread = threading.Thread(target=work, name="silicon-friend-warm-up", daemon=True)
        thread.start()
        return thread

    @staticmethod
    def theme() -> Any:
        """Gradio's default look with the system's fonts: the page loads nothing from elsewhere."""
        return gr.themes.Default(
            font=["ui-sans-serif", "system-ui", "sans-serif"],
            font_mono=["ui-monospace", "monospace"],
        )

    # -- helpers ------------------------------------------------------------------------------
    def _texts_for(self, where: Any) -> UITexts:
        return where if isinstance(where, UITexts) else self._t(where) if where is not None else self.texts

    def _warn(self, message: str, where: Any = None) -> None:
        """A warning toast, titled in the language of ``where`` (the request, or the texts)."""
        t = self._texts_for(where)  # a reason in English (a refusal) is said in the page's language
        gr.Warning(toast_text(localise(message, t.language)), title=t.warning_title)

    def _info(self, message: str, where: Any = None) -> None:
        """An information toast, titled in the language of ``where`` (the request, or the texts)."""
        gr.Info(toast_text(message), title=self._texts_for(where).info_title)

    def _user_for(self, name: str | None, request: gr.Request | None) -> str:
        if self.auth:
            username = getattr(request, "username", None)
            if not username:
                raise Refused("not signed in")
            return str(username)
        name = (name or "").strip() if isinstance(name, str) else ""
        if not name:
            raise Refused(self._t(request).need_name)
        try:
            return validate_user(name)
        except MemoryBankError as e:
            raise Refused(str(e)) from e

    def _tab(self, request: gr.Request | None) -> WebSession:
        return self.sessions.get(request)

    def _t(self, request: gr.Request | None) -> UITexts:
        """The texts in the tab's language."""
        return self._texts_of(self._tab(request))

    def _texts_of(self, tab: WebSession) -> UITexts:
        return ui_texts(tab.language) if tab.language else self.texts

    def _kept(self, tab: WebSession, user: str) -> Session | None:
        """The tab's session while a reply of it is being made: a sign-in of the same user keeps
        it (a new one would leave the reply off the screen); another user is refused until the
        reply is done (:class:`Refused`). ``None`` when the tab is free to change."""
        if tab.session is None or not tab.busy():
            return None
        if same_user(tab.session.user, user):
            return tab.session
        raise Refused(self._texts_of(tab).wait_to_switch)

    def _open(self, tab: WebSession, user: str, request: gr.Request | None) -> Session:
        """A new session of ``user`` in ``tab``, showing their recent conversation (the tab's
        own while a reply of it is being made, see :meth:`_kept`), and the turns the store could
        not take in the user's closed pages (a reload) or in the tab's previous session. When
        the sign-in queues summaries (unsummarised days, e.g. just imported), the tab follows
        that run from its start, so a failure in it raises a toast here."""
        kept = self._kept(tab, user)
        if kept is not None:
            return kept
        before = self.engine.summary_status(user)
        earlier = [*self.sessions.closed_with_unsaved(request, user), *([tab.session] if tab.session else [])]
        for session in earlier:  # stored now if the store takes them: the conversation shows them
            self.engine.store_unsaved(session)
        tab.session = self.engine.start(user)
        after = self.engine.summary_status(user)
        if before is not None and after is not None and after.version != before.version:
            tab.summary_seen = (tab.session.user, before.version, "")
        tab.session.temporary = tab.temporary
        self.engine.resume(tab.session, self.engine.settings.history_turns)
        for session in earlier:
            self._carry_unsaved(session, tab.session)
        return tab.session

    def _carry_unsaved(self, old: Session | None, new: Session) -> None:
        """Turns of ``old`` the store could not take (tried again by the caller) move to ``new``
        (the same user signing in again, or reloading the page), to stay on screen and be
        stored with the next message. A new session used to drop them, though the page had
        said they would be saved with the next message."""
        if old is None or old is new:
            return
        left = [t for t in old.turns if t.unsaved]
        if left and same_user(old.user, new.user) and not old.ended:
            with old.lock:  # moved, not copied: only one session tries them again
                old.turns[:] = [t for t in old.turns if not t.unsaved]
            with new.lock:
                new.turns.extend(left)
        elif left:
            logger.warning("%d unsaved turns of %r could not be stored", len(left), old.user)

    def _session(self, name: str | None, request: gr.Request | None) -> Session:
        """The tab's session for the user the request acts as (a new one if the user changed)."""
        user = self._user_for(name, request)
        tab = self._tab(request)
        if tab.session is None or not same_user(tab.session.user, user):
            self._kept(tab, user)  # refused while a reply of another user is being made
            old = tab.session
            if old is not None:
                self.engine.store_unsaved(old)
            tab.session = self.engine.start(user)
            tab.session.temporary = tab.temporary
            self._carry_unsaved(old, tab.session)
        return tab.session

    def _current(self, request: gr.Request | None) -> Session | None:
        """The tab's session, only if it belongs to the signed-in user (with login on)."""
        session = self._tab(request).session
        if session is None:
            return None
        if self.auth and not same_user(session.user, str(getattr(request, "username", "") or "")):
            return None
        return session

    def _welcome(self, session: Session, t: UITexts | None = None, *, reloaded: bool = False) -> str:
        """The status line's greeting; on a reloaded page, a conversation with stored turns is no
        longer the first one (a newcomer who chatted, then reloaded, was greeted as new)."""
        if reloaded and any(turn.stored for turn in session.turns):
            session.returning = True  # and stays so: the next greeting said "first" again
        return self._greeting(session.user, session.returning, t or self.texts)

    def _greeting(self, user: str, returning: bool, t: UITexts) -> str:
        user = literal_markdown(user.strip())
        text = (t.welcome_back if returning else t.welcome_new).replace("{user}", user)
        return (t.logged_in_as.replace("{user}", user) + " " if self.auth else "") + text

    @staticmethod
    def failure(turn: Turn, t: UITexts, shown: Callable[[str], str]) -> str:
        """What went wrong with ``turn``, in ``t``'s language, saying whether the message was
        saved (``shown`` makes the reason safe where it is drawn)."""
        error = shown(localise(turn.error or "", t.language))
        if turn.unsaved:
            return t.not_saved.replace("{error}", error)
        return (t.failed_temporary if turn.temporary else t.model_failed).replace("{error}", error)

    def render(
        self,
        session: Session | None,
        pending: Sequence[str] = (),
        texts: UITexts | None = None,
        preparing: str | None = None,
    ) -> list[dict[str, Any]]:
        """The conversation as Chatbot messages (inert text), each reply followed by what it
        used and changed (:meth:`turn_note`), then the message whose reply is being prepared
        (``preparing``, its reply "…") and the messages waiting in line."""
        t = texts or self.texts
        out: list[dict[str, Any]] = []
        for turn in session.turns if session else []:
            out.append({"role": "user", "content": inert_markdown(turn.query)})
            response = inert_markdown(turn.response)
            if turn.stopped:
                reply = f"{response} {t.stopped}".strip()
            elif turn.error:
                reply = self.failure(turn, t, inert_markdown)
                if turn.response:
                    reply = f"{response}\n\n{reply}"
            elif not turn.response and not turn.stored:  # asked, nothing said yet
                reply = "…"
            else:
                reply = response
            out.append({"role": "assistant", "content": reply})
            note = self.turn_note(turn, t)
            if note is not None:
                out.append(note)
        if preparing is not None:
            out += [
                {"role": "user", "content": inert_markdown(preparing)},
                {"role": "assistant", "content": "…"},
            ]
        for message in pending:
            out += [
                {"role": "user", "content": inert_markdown(message)},
                {"role": "assistant", "content": t.queued},
            ]
        return out

    @staticmethod
    def turn_note(turn: Turn, t: UITexts) -> dict[str, Any] | None:
        """A collapsed Chatbot "thought" under a reply: the memories its prompt used (date,
        kind, score, text) and, once the turn is in the store, "memory updated"; ``None`` while
        there is nothing to say yet."""
        if turn.temporary:
            return {
                "role": "assistant",
                "content": "",
                "metadata": {"title": t.temporary_turn, "status": "done"},
            }
        if turn.resumed or (not turn.used and not turn.stored):
            return None
        title = t.memories_used.replace("{n}", str(len(turn.used))) if turn.used else t.no_memories_used
        metadata: dict[str, Any] = {"title": title, "status": "done"}
        if turn.stored:
            reinforced = t.reinforced.replace("{n}", str(turn.reinforced)) if turn.reinforced else ""
            metadata["log"] = t.memory_updated + reinforced
        lines = [
            f"- **{m.date}** · {t.kinds.get(m.kind, m.kind)} · {t.score} {m.score:.2f}: "
            f"{inert_markdown(_short(m.text, USED_TEXT_CHARS))}"
            for m in turn.used
        ]
        return {"role": "assistant", "content": "\n".join(lines), "metadata": metadata}

    def _render_tab(self, request: gr.Request | None) -> list[dict[str, Any]]:
        tab = self._tab(request)
        session = self._current(request)
        return self.render(session, tab.queued(), self._t(request), tab.preparing(session))

    def model_notice(self, t: UITexts) -> str:
        """Which model answers; for the packaged demo model, what it is, and for Chinese the
        flags that start a real model."""
        model = self.engine.model
        parts = [t.model_line.replace("{model}", inert_markdown(model.display_name))]
        if model.packaged:
            parts.append(t.small_model_note)
            if t is UI["zh"] or self.engine.language == "zh":
                parts.append("\n\n" + t.chinese_notice)
        return " ".join(parts)

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
    def remember(
        self,
        name: str,
        request: gr.Request,
        progress: gr.Progress = gr.Progress(),  # noqa: B008
    ) -> tuple[Any, ...]:
        """Open the named user's session; returns (status, chatbot, name, name kept in the browser)."""
        try:
            user = self._user_for(name, request)
        except Refused as e:
            self._warn(str(e), request)
            return gr.update(), gr.update(), gr.update(), gr.update()
        self._await_encoder(request, progress)
        tab = self._tab(request)
        try:
            session = self._open(tab, user, request)
        except Refused as e:
            self._warn(str(e), request)
            return gr.update(), gr.update(), gr.update(), gr.update()
        if not session.returning:
            self._hint_other_case(user, self._t(request))
        return self._welcome(session, self._t(request)), self._render_tab(request), session.user, session.user

    def _await_encoder(self, request: gr.Request | None, progress: Any) -> None:
        """Wait for the warm-up, showing that the encoder loads (instead of a silent wait)."""
        if self.ready.is_set():
            return
        if progress is not None:
            progress(None, desc=self._t(request).loading_encoder)
        self.ready.wait()

    def _hint_other_case(self, user: str, t: UITexts) -> None:
        """Names are case-sensitive: say so when memories exist under another spelling ("frank"
        starts empty while "Frank" has memories, which looks like lost memories). Not with login
        on: each login sees only its own memories, and must not learn another login's name."""
        if self.auth:
            return
        key = user.strip().casefold()
        others = [
            u.strip()
            for u in self.engine.bank.users()
            if u.strip().casefold() == key and u.strip() != user.strip()
        ]
        if others:
            self._warn(t.other_case.replace("{user}", user.strip()).replace("{other}", others[0]), t)

    def on_load(self, remembered: Any, request: gr.Request) -> tuple[Any, ...]:
        """The page (re)loaded: reopen the user's session with their recent conversation. With
        login on, the signed-in user (name box locked); without, the name this browser kept.
        Returns (name box, status, chatbot)."""
        t = self._t(request)
        loading = "" if self.ready.is_set() else t.loading_encoder
        tab = self._tab(request)
        if self.auth:
            try:
                user = self._user_for(None, request)
            except Refused as e:
                self._warn(str(e), request)
                return gr.update(), loading, gr.update()
            if tab.session is None:  # a reload while a reply was being made takes its tab over
                adopted = self.sessions.adopt(request, user)
                tab = adopted if adopted is not None and adopted.session is not None else tab
            session = tab.session if tab.session is not None else self._open(tab, user, request)
            locked = gr.update(value=session.user, interactive=False)
            tab.loaded_at = tab.changes()
            return locked, self._welcome(session, t, reloaded=True), self._render_tab(request)
        if not isinstance(remembered, str) or not remembered.strip():
            return gr.update(), loading, gr.update()
        try:
            user = validate_user(remembered.strip())
        except MemoryBankError:
            return gr.update(), loading, gr.update()
        adopted = self.sessions.adopt(request, user)
        if adopted is not None and adopted.session is not None:
            session, tab = adopted.session, adopted
        elif self.sessions.is_closed(request):  # a page gone before it loaded (two quick reloads)
            return gr.update(), loading, gr.update()
        else:  # (also without memories yet: Remember Me before the first message, or its turns unsaved)
            session = self._open(tab, user, request)
        tab.loaded_at = tab.changes()
        return session.user, self._welcome(session, t, reloaded=True), self._render_tab(request)

    def set_temporary(self, on: bool, request: gr.Request) -> Any:
        """Switch this tab's temporary chat on or off; returns the banner."""
        tab = self._tab(request)
        tab.temporary = bool(on)
        if tab.session is not None:
            tab.session.temporary = tab.temporary
        return gr.update(value=self._t(request).temporary_on, visible=tab.temporary)

    def set_language(self, language: str, request: gr.Request) -> list[Any]:
        """Re-label the page in ``language``: every registered component, then the chat and the
        status line (outputs: ``i18n.components`` + chatbot + status)."""
        if language not in UI:
            language = self.engine.language
        tab = self._tab(request)
        tab.language = language
        t = ui_texts(language)
        session = self._current(request)
        status = self._welcome(session, t) if session is not None else gr.update()
        chat = gr.update(value=self._render_tab(request), label=t.title)
        return [*self.i18n.updates(t), chat, status]

    def on_unload(self, request: gr.Request) -> None:
        self.sessions.drop(request)

    async def _reply(
        self,
        request: gr.Request | None,
        session: Session,
        start: Callable[[threading.Event], Iterator[str]],
        text: str,
        message: Any = None,
        *,
        shown: bool = True,
        done: Callable[[], None] | None = None,
    ) -> AsyncIterator[tuple[Any, ...]]:
        """Put the message in the tab's line and draw its reply as it is made. The reply is made
        on a thread of its own (:meth:`WebSession.reply`), and this only follows it, holding no
        thread and no slot of Gradio's queue while it waits: when the page goes away (a reload,
        a closed tab) the reply is still finished and stored, as are the messages after it.
        ``text``: the message asked (shown meanwhile); ``message``: what goes back into the box
        if it is refused (None: nothing)."""
        tab = self._tab(request)
        try:
            job = tab.reply(
                text, start, self.pool, shown=shown, conversation=(session, 0 if shown else 1), done=done
            )
        except LineFullError:
            tab.refused(text)
            self._warn(self._t(request).line_full, request)
            yield self._render_tab(request), gr.update() if message is None else message  # back in the box
            return
        yield self._render_tab(request), gr.update()  # the page emptied the box as it sent (js_send)
        seen = tab.changes()
        while not job.done.is_set():
            await asyncio.sleep(FOLLOW_SECONDS)
            now = tab.changes()
            if now != seen and not job.done.is_set():
                seen = now
                yield await self._frame(request), gr.update()
        if job.ended:
            self._warn(self._t(request).session_ended, request)
            if tab.session is session:  # the user's next message starts again (it was refused for good)
                tab.session = Session(user=session.user, temporary=tab.temporary)  # their memories are gone
                tab.ended_replaced = session  # the page still has to show that (ended_tick)
        elif job.refused is not None:
            self._warn(job.refused, request)
        if job.ended or job.refused is not None:  # the message goes back into the box
            tab.refused(text)  # sending it again at once is not a double click
            back = tab.hand_back(message, job.ticket) if isinstance(message, str) else message
            yield self._render_tab(request), gr.update() if message is None else back
            return
        t = self._t(request)
        turn = session.turns[-1] if session.turns else None
        if turn is not None and turn.error and not turn.stopped:
            self._warn(self.failure(turn, t, str), request)
        elif turn is not None and turn.stored:
            reinforced = t.reinforced.replace("{n}", str(turn.reinforced)) if turn.reinforced else ""
            self._info(t.memory_updated + reinforced, request)
        yield self._render_tab(request), gr.update()

    async def _frame(self, request: gr.Request | None) -> list[dict[str, Any]]:
        """The chat drawn off the event loop (a long conversation, many pages following replies:
        the loop stays free for every other request)."""
        return await asyncio.to_thread(self._render_tab, request)

    async def follow(self, request: gr.Request) -> AsyncIterator[Any]:
        """After a page load: draw the replies still being made for this tab (a reload while a
        reply streamed, see :meth:`SessionRegistry.adopt`) until its line is empty."""
        tab = self._tab(request)
        shown = seen = tab.changes() if tab.loaded_at is None else tab.loaded_at
        while tab.busy():
            await asyncio.sleep(FOLLOW_SECONDS)
            if tab.changes() != seen:
                seen = tab.changes()
                yield await self._frame(request)
        # the end, unless the page shows it already (a reply can end between the load and this)
        now = tab.loaded_at = tab.changes()
        yield self._render_tab(request) if now != shown else gr.update()

    async def send(
        self,
        message: str,
        name: str,
        temperature: float,
        top_p: float,
        max_new_tokens: float,
        top_k: float,
        request: gr.Request,
    ) -> AsyncIterator[tuple[Any, ...]]:
        try:
            session = self._session(name, request)
            settings = self._settings(temperature, top_p, max_new_tokens, top_k, self.engine.settings)
            if isinstance(message, str) and len(message) > MAX_TEXT:  # refused now, not at its turn
                raise Refused(f"the message is {len(message):,} characters; the limit is {MAX_TEXT:,}")
        except Refused as e:
            self._warn(str(e), request)
            yield gr.update(), message  # back in the box (the page emptied it as it sent)
            return
        if not has_visible(message or ""):  # nothing to see (spaces, a zero-width space): not sent
            yield self._render_tab(request), gr.update()
            return
        tab = self._tab(request)
        if tab.repeated(message):  # a double click: the first click's event answers it
            self._info(self._t(request).sent_once, request)  # said, never silently dropped
            yield self._render_tab(request), gr.update()
            return
        temporary = tab.temporary  # the mode it was sent in, whatever the switch says by its turn
        async for out in self._reply(
            request,
            session,
            lambda cancel: self.engine.stream(session, message, settings, temporary=temporary, cancel=cancel),
            message,
            message,
        ):
            yield out

    def _switching(self, name: str | None, request: gr.Request | None) -> bool:
        """Whether ``name`` is another user than the one this tab's reply is being made for
        (without login, the name box is typed over while a reply streams)."""
        tab = self._tab(request)
        if self.auth or tab.session is None or not tab.busy():
            return False
        try:
            return not same_user(self._user_for(name, request), tab.session.user)
        except Refused:
            return False

    def keep_name(self, name: str, request: gr.Request) -> tuple[Any, Any]:
        """On Send, beside the reply: the status line names the user the message goes to, and
        the browser keeps the name, so that a reload shows the conversation even when Remember
        Me was never pressed. Outputs: (status, name kept in the browser); both unchanged for a
        name the message will not go under (the reply's handler says why)."""
        if self.auth or self._switching(name, request):
            return gr.update(), gr.update()
        try:
            user = self._user_for(name, request)
        except Refused:
            return gr.update(), gr.update()
        t, session = self._t(request), self._current(request)
        kept = gr.update() if self._tab(request).temporary else user  # a temporary chat keeps nothing
        if session is not None and same_user(session.user, user):
            return self._welcome(session, t), kept
        return self._greeting(user, self.engine.bank.has_user(user), t), kept

    async def regenerate(
        self,
        name: str,
        temperature: float,
        top_p: float,
        max_new_tokens: float,
        top_k: float,
        request: gr.Request,
        shown: Any = None,
    ) -> AsyncIterator[tuple[Any, ...]]:
        try:
            session = self._session(name, request)
            settings = self._settings(temperature, top_p, max_new_tokens, top_k, self.engine.settings)
        except Refused as e:
            self._warn(str(e), request)
            yield gr.update(), gr.update()
            return
        tab = self._tab(request)
        if not self._shows_current(shown, request):  # the turn redone would not be the one shown
            self._info(self._t(request).changed_elsewhere, request)
            yield self._render_tab(request), gr.update()
            return
        if not session.turns or tab.busy():
            t = self._t(request)
            self._info(t.nothing_to_regenerate if not session.turns else t.wait_for_reply, request)
            yield self._render_tab(request), gr.update()
            return
        redone = session.turns[-1].memory_id

        def dropped() -> None:
            if redone and not any(t.memory_id == redone for t in session.turns):  # replaced in the store
                self._drop_everywhere(session.user, redone)

        temporary = tab.temporary
        async for out in self._reply(
            request,
            session,
            lambda cancel: self.engine.regenerate(session, settings, temporary=temporary, cancel=cancel),
            session.turns[-1].query,  # the turn being redone
            shown=False,
            done=dropped,
        ):
            yield out

    def _sessions_of(self, user: str) -> list[Session]:
        """The conversation of every open tab of ``user``."""
        return [tab.session for tab in self.sessions.of_user(user) if tab.session is not None]

    def _edited_everywhere(self, user: str, memory: Memory) -> None:
        """An edited memory shows its new words in every open chat of its user (their pages
        redraw at their next watch tick, see :meth:`ended_tick`)."""
        for session in self._sessions_of(user):
            session.apply_edit(memory)
        self._redraw_everywhere(user)

    def _drop_everywhere(self, user: str, memory_id: str) -> None:
        """A memory deleted from the store leaves every open chat of its user (another tab would
        still show it and send it to the model)."""
        for session in self._sessions_of(user):
            session.drop_memory(memory_id)
        self._redraw_everywhere(user)

    def _redraw_everywhere(self, user: str) -> None:
        """After an edit or a deletion: every open page of the user redraws its chat, and a
        memory file exported before it is no longer served (its link gave the old words)."""
        self.downloads.drop_user(user)
        for tab in self.sessions.of_user(user):
            tab.chat_stale = True

    def finish(self, timeout: float = 30.0) -> bool:
        """Before the app stops: stop every reply being made, and each waiting one as it starts,
        until all are stored (each as far as it got, marked stopped) or ``timeout`` seconds
        passed; returns whether all were. A message waiting in line is stored too, so none is
        lost to a shutdown."""
        deadline = time.monotonic() + timeout
        if self.sessions.busy():
            print("Storing the replies being made before stopping…", file=sys.stderr, flush=True)
        while time.monotonic() < deadline:
            tabs = self.sessions.busy()
            if not tabs:
                return self._store_unsaved()
            for tab in tabs:
                tab.stop_current()
            time.sleep(0.02)
        logger.warning("stopped waiting for %d replies to be stored", len(self.sessions.busy()))
        return False

    def _store_unsaved(self) -> bool:
        """A last try for the turns the store could not take, in every tab; whether all are stored."""
        ok = True
        for tab in self.sessions.every():
            if tab.session is not None and not tab.session.ended:
                ok = self.engine.store_unsaved(tab.session) and ok
        if not ok:
            logger.warning("some messages the store could not take are still not saved")
        return ok

    def stop(self, request: gr.Request) -> None:
        """Stop the tab's reply whose turn it is (being prepared, waiting or streaming)."""
        if self._current(request) is not None:
            self._tab(request).stop_current()

    def new_conversation(self, request: gr.Request) -> tuple[Any, ...]:
        """An empty chat, and the state line greeting the user as one who has been here."""
        session = self._current(request)
        if session is None:
            return self._render_tab(request), gr.update()
        self.engine.new_conversation(session)
        return self._render_tab(request), self._welcome(session, self._t(request))

    def _shows_current(self, shown: Any, request: gr.Request) -> bool:
        """Whether the page's chat (``shown``; ``None``: not sent) shows the conversation's user
        messages as they are now: another tab may have removed or edited a turn since, and Remove
        Last Turn or Regenerate would act on a turn this page does not show."""
        if shown is None:
            return True

        def words(text: str) -> str:  # the page's copy went through Gradio's cleandoc (indents, tabs)
            return " ".join(text.split())

        said = [
            words(message_text(m.get("content")))
            for m in shown
            if isinstance(m, dict) and m.get("role") == "user"
        ]
        now = [
            words(message_text(m.get("content")))
            for m in self._render_tab(request)
            if m.get("role") == "user"
        ]
        return said == now

    def remove_last(self, request: gr.Request, shown: Any = None) -> list[dict[str, str]]:
        """Remove the last turn from the chat and from the memories, undoably: the memory tab's
        "Undo delete" brings it back (after a reload the last turn shown is one read back from
        the store, perhaps days old). Not while a reply is being made: the turn would be that one;
        nor when the page shows an older state of the conversation (``shown``: the page's chat)."""
        session, t = self._current(request), self._t(request)
        if session is None:
            return self._render_tab(request)
        if self._tab(request).busy():
            self._info(t.wait_for_reply, request)
            return self._render_tab(request)
        if not self._shows_current(shown, request):
            self._info(t.changed_elsewhere, request)
            return self._render_tab(request)
        with session.lock:
            turn = session.turns.pop() if session.turns else None
        if turn is not None and turn.memory_id:
            view = self.memory_tab.views.get(request, session.user)
            try:
                deletion = delete_undoable(self.engine.bank, session.user, turn.memory_id)
            except MemoryBankError as e:  # already forgotten or deleted elsewhere
                logger.info("turn %s was already gone: %s", turn.memory_id, e)
            else:
                view.deleted(deletion)
                self._info(t.removed_last, request)
            self._drop_everywhere(session.user, turn.memory_id)
        return self._render_tab(request)

    def summarize(self, name: str, request: gr.Request) -> Any:
        """ "Summarize Memory Bank": queue every unsummarised day, today included, on the
        background worker and return at once; the state line shows the progress and any failure."""
        t = self._t(request)
        if self._tab(request).temporary:  # the switch promises no memory is written
            self._warn(t.summary_temporary, request)
            return gr.update()
        try:
            session = self._session(name, request)
            self.engine.summarize_in_background(session)
        except Refused as e:
            self._warn(str(e), request)
            return gr.update()
        except MemoryBankError as e:  # no memories yet, or summaries off
            self._warn(localise(str(e), t.language), request)
            return gr.update()
        self._info(t.summary_started, request)
        return self._summary_md(session.user, t)

    def _summary_md(self, user: str, t: UITexts, status: Any = None) -> str:
        """The chat tab's summary area: the background state, then the global layers (empty
        until a summary run was asked for in this run of the app)."""
        status = status if status is not None else self.engine.summary_status(user)
        line = summary_line(status, t)
        if not line or not self.engine.bank.has_user(user):
            return line
        profile = self.engine.bank.profile(user)
        return (
            f"{line}\n\n**{t.summary_title}**\n\n{inert_markdown(profile['global_summary']) or t.no_summary}\n\n"
            f"**{t.portrait_title}**\n\n{inert_markdown(profile['global_portrait']) or t.no_summary}"
        )

    def summary_tick(self, request: gr.Request) -> tuple[Any, ...]:
        """The timer's check of the background summaries: redraw the chat tab's summary area,
        "What I know about you" and the state line when the state changed (else nothing), and
        toast a run that ended with failures. Outputs: (summary, knows, state line)."""
        keep = (gr.update(),) * 3
        session = self._current(request)
        status = self.engine.summary_status(session.user) if session is not None else None
        if session is None or status is None:
            return keep
        tab, t = self._tab(request), self._t(request)
        seen = (session.user, status.version, t.language)
        if tab.summary_seen == seen:
            return keep
        first_sight = tab.summary_seen is None or tab.summary_seen[0] != session.user
        tab.summary_seen = seen
        if not self.engine.bank.has_user(session.user):  # forgotten: nothing to show
            return "", gr.update(), ""
        toast = None if first_sight else failure_toast(status, t)
        if toast:
            self._warn(toast, request)
        knows = self.memory_tab.knows_md(session.user, t)
        return self._summary_md(session.user, t, status), knows, summary_line(status, t)

    def timer_tick(self, request: gr.Request) -> tuple[Any, ...]:
        """The timer's handler: :meth:`summary_tick`, then the timer switched off once nothing is
        queued or running for the tab's user and the last state is drawn, so an idle page is not
        re-rendered every two seconds under the user's clicks. A sign-in, a reload, a reply, a
        Summarize press and a language switch (each can queue a run or change the line) switch
        it on again. Outputs: (summary, knows, state line, timer)."""
        drawn = self.summary_tick(request)
        session = self._current(request)
        status = self.engine.summary_status(session.user) if session is not None else None
        return (*drawn, gr.Timer(active=status is not None and status.active))

    def ended_tick(self, request: gr.Request) -> tuple[Any, ...]:
        """The watch on what another tab (or browser) of the user did: once the user is deleted
        ("Forget me"), this page stops showing the deleted conversation, memories and summaries;
        a turn edited or deleted there is redrawn here (each stayed on screen until the tab did
        something). Outputs: (state line, chat, the memory tab's outputs, export link, summary)."""
        keep = (gr.update(),) * (4 + len(self.memory_tab.outputs))
        tab = self._tab(request)
        session = tab.session
        if session is None:
            return keep
        if not session.ended and tab.chat_stale and not tab.busy():  # edited or deleted elsewhere
            tab.chat_stale = False
            return (gr.update(), self._render_tab(request), *keep[2:])
        ended = session if session.ended else tab.ended_replaced
        if ended is None or tab.ended_drawn is ended:
            return keep
        tab.ended_drawn = ended
        t = self._t(request)
        status = t.forgot.replace("{user}", literal_markdown(ended.user.strip()))
        chat = [] if ended is session or not session.turns else gr.update()  # (a new conversation stays)
        return (status, chat, *self.memory_tab.cleared(t), gr.update(value="", visible=False), "")

    # -- memory handlers (the rest of the tab is silicon_friend.web.memory_tab) ------------------
    def export(self, name: str, request: gr.Request) -> Any:
        """A download link to the user's memory file, valid for a few minutes and only for them."""
        try:
            session = self._session(name, request)
        except Refused as e:
            self._warn(str(e), request)
            return gr.update()
        if not self.engine.bank.has_user(session.user):
            self._warn(self._t(request).nothing_to_export.replace("{user}", session.user.strip()), request)
            return gr.update(value="", visible=False)
        filename, data = export_bytes(self.engine.bank, session.user)
        login = getattr(request, "username", None) if self.auth else None
        link = self.downloads.add(session.user, login, filename, data)
        text = (
            self._t(request)
            .export_ready.replace("{link}", link)
            .replace("{file}", literal_markdown(filename))
        )
        return gr.update(value=text, visible=True)

    def forget_me(self, name: str, confirmed: bool, request: gr.Request) -> tuple[Any, ...]:
        keep = (gr.update(),) * (6 + len(self.memory_tab.outputs))
        try:
            user = self._user_for(name, request)
        except Refused as e:
            self._warn(str(e), request)
            return keep
        if not confirmed:
            self._warn(self._t(request).forget_unconfirmed, request)
            return keep
        if self._switching(name, request):  # the tab's reply is another user's: it stays on screen
            self._warn(self._t(request).wait_to_switch, request)
            return keep
        tabs = [t for t in self.sessions.of_user(user) if t.session is not None]
        for tab in tabs:  # stop replies of every tab of the user, and let them finish storing
            assert tab.session is not None
            tab.session.ended = True  # messages still waiting are refused, never stored
            tab.stop_current()
        for tab in tabs:
            assert tab.session is not None
            with tab.session.lock:
                tab.session.turns.clear()
        if self.engine.bank.has_user(user):
            self.engine.bank.delete_user(user)
        self.downloads.drop_user(user)
        self.memory_tab.views.drop_user(user)
        logger.info("forgot a user at their request")
        tab = self._tab(request)
        tab.session = self.engine.start(user)
        tab.session.temporary = tab.temporary
        status = self._t(request).forgot.replace("{user}", literal_markdown(user.strip()))
        return (
            status,
            [],
            *self.memory_tab.cleared(self._t(request)),
            False,
            gr.update(value="", visible=False),
            "",
            FORGOTTEN,  # the name this browser kept: none (Gradio never stores an empty value)
        )

    def _name_secret(self) -> str | None:
        """The key the browser's kept name is encoded with, kept in the store's settings: made
        anew at each start, it lost every "Remember Me" at every restart of the app. Gradio gives
        it to every page it serves (it encodes in the page), so it hides the name from a glance
        at the browser's storage only. ``None`` (a key for this run only) where the store cannot
        be written."""
        try:
            self.engine.bank.storage.set_meta({NAME_SECRET: secrets.token_hex(32)})  # kept if there
            return self.engine.bank.storage.meta().get(NAME_SECRET)
        except MemoryBankError as e:
            logger.warning("the remembered names will not survive a restart: %s", e)
            return None

    # -- layout -------------------------------------------------------------------------------
    def build(self) -> gr.Blocks:
        """The Blocks app (not launched). Components whose text follows the language switch
        join ``self.i18n`` where they are made."""
        t, s, tr = self.texts, self.engine.settings, self.i18n
        # A reply's handler only follows it (the pool bounds the replies themselves): none waits
        # in Gradio's queue behind another tab's, where a reload would drop it unseen.
        chat_limit: dict[str, Any] = {"concurrency_limit": None}
        with gr.Blocks(title="SiliconFriend", analytics_enabled=False) as demo:
            remembered = gr.BrowserState("", storage_key="siliconfriend-name", secret=self._name_secret())
            with gr.Row(elem_id="sf-top"):
                tr.add(
                    gr.Markdown(f"# {t.title}\n{t.intro}", elem_id="sf-header"),
                    value=lambda t: f"# {t.title}\n{t.intro}",
                )
                language = tr.add(
                    gr.Radio(
                        choices=[(label, code) for label, code in LANGUAGES],
                        value=self.engine.language if self.engine.language in UI else "en",
                        label=t.language_label,
                        scale=0,
                        min_width=180,
                        elem_id="sf-language",
                    ),
                    label="language_label",
                )
            tr.add(gr.Markdown(self.model_notice(t), elem_id="sf-model"), value=self.model_notice)
            with gr.Row():
                name = tr.add(
                    gr.Textbox(
                        label=t.name_label, placeholder=t.name_placeholder, scale=3, elem_id="sf-name"
                    ),
                    label="name_label",
                    placeholder="name_placeholder",
                )
                remember = tr.add(
                    gr.Button(t.remember, variant="secondary", scale=1, elem_id="sf-remember"),
                    value="remember",
                )
                temporary = tr.add(
                    gr.Checkbox(label=t.temporary_label, value=False, scale=1, elem_id="sf-temporary"),
                    label="temporary_label",
                )
            status = gr.Markdown(elem_id="sf-status")
            temporary_banner = tr.add(
                gr.Markdown(t.temporary_on, visible=False, elem_id="sf-temporary-banner"),
                value="temporary_on",
            )
            with gr.Tabs():
                with tr.add(gr.Tab(t.chat_tab, id="chat"), label="chat_tab"):
                    chatbot = gr.Chatbot(
                        label=t.title, elem_id="sf-chatbot", height=460, buttons=["copy", "copy_all"]
                    )
                    with gr.Row():
                        message = tr.add(
                            gr.Textbox(
                                label=t.message_label,
                                placeholder=t.message_placeholder,
                                scale=5,
                                elem_id="sf-message",
                            ),
                            label="message_label",
                            placeholder="message_placeholder",
                        )
                        send = tr.add(
                            gr.Button(t.send, variant="primary", scale=1, elem_id="sf-send"), value="send"
                        )
                        stop = tr.add(
                            gr.Button(t.stop, variant="stop", scale=1, elem_id="sf-stop"), value="stop"
                        )
                    # Messages given back to the box go through this, so the page can keep a draft.
                    handed = gr.Textbox(visible=False, elem_id="sf-handed")
                    with gr.Row():
                        new = tr.add(
                            gr.Button(t.new_conversation, elem_id="sf-new"), value="new_conversation"
                        )
                        regen = tr.add(gr.Button(t.regenerate, elem_id="sf-regenerate"), value="regenerate")
                        remove = tr.add(gr.Button(t.remove_last, elem_id="sf-remove"), value="remove_last")
                        summarize = tr.add(gr.Button(t.summarize, elem_id="sf-summarize"), value="summarize")
                    summary = gr.Markdown(elem_id="sf-summary")
                    with tr.add(gr.Accordion(t.settings, open=False), label="settings"):
                        temperature = tr.add(
                            gr.Slider(0.0, 2.0, value=s.temperature, step=0.05, label=t.temperature),
                            label="temperature",
                        )
                        top_p = tr.add(
                            gr.Slider(0.05, 1.0, value=s.top_p, step=0.05, label=t.top_p), label="top_p"
                        )
                        max_tokens = tr.add(
                            gr.Slider(16, 2048, value=s.max_new_tokens, step=16, label=t.max_new_tokens),
                            label="max_new_tokens",
                        )
                        top_k = tr.add(
                            gr.Slider(0, max(10, s.top_k), value=s.top_k, step=1, label=t.top_k),
                            label="top_k",
                        )
                with tr.add(gr.Tab(t.memories_tab, id="memories"), label="memories_tab") as memories_tab:
                    memory_outputs = self.memory_tab.build(name, chatbot, memories_tab)
                    export = tr.add(gr.Button(t.export, elem_id="sf-export"), value="export")
                    export_link = gr.Markdown(visible=False, elem_id="sf-export-link")
                    with gr.Row():
                        confirm = tr.add(
                            gr.Checkbox(label=t.forget_confirm, value=False, elem_id="sf-forget-confirm"),
                            label="forget_confirm",
                        )
                        forget = tr.add(
                            gr.Button(t.forget_me, variant="stop", elem_id="sf-forget"), value="forget_me"
                        )

            sliders = [temperature, top_p, max_tokens, top_k]
            quiet: dict[str, Any] = {"show_progress": "hidden"}
            remember_event = gr.on(
                [remember.click, name.submit],
                self.remember,
                [name],
                [status, chatbot, name, remembered],
                show_progress_on=[status],
            )
            remember_event.then(
                self.memory_tab.by_name["signed_in"], self.memory_tab.inputs, memory_outputs, **quiet
            )
            # Registered before the reply: the page runs one trigger's events in the order they were
            # registered, each after the one before ends, and a reply ends when it is done (a
            # newcomer who reloaded during the first reply had no name kept, and saw nothing).
            gr.on(
                [send.click, message.submit],
                self.keep_name,
                [name],
                [status, remembered],
                queue=False,
                **quiet,
            )
            send_event = gr.on(
                [send.click, message.submit],
                self.send,
                [message, name, *sliders],
                [chatbot, handed],
                trigger_mode="multiple",  # a message sent while a reply streams waits its turn
                show_progress="minimal",
                js=self.js_send,
                **chat_limit,
            )
            handed.change(
                None, [handed, message], [message, handed], js=self.js_hand_back, queue=False, **quiet
            )
            stop.click(self.stop, None, None, queue=False)
            gr.on([new.click, chatbot.clear], self.new_conversation, None, [chatbot, status])
            regen.click(
                self.regenerate,
                [name, *sliders, chatbot],
                [chatbot, message],
                show_progress="minimal",
                **chat_limit,
            )
            remove.click(self.remove_last, [chatbot], [chatbot])
            summarize_event = summarize.click(self.summarize, [name], [summary], **quiet)
            # the background summaries' state, redrawn when it changes (no timer when summaries are off)
            timer = gr.Timer(POLL_SECONDS, active=self.engine.scheduler is not None)
            timer.tick(
                self.timer_tick,
                None,
                [summary, self.memory_tab.knows, self.memory_tab.state, timer],
                show_progress="hidden",
                concurrency_limit=None,
            )
            # "Forget me" elsewhere: this page stops showing what was deleted (a cheap check per tick)
            gr.Timer(ENDED_POLL_SECONDS).tick(
                self.ended_tick,
                None,
                [status, chatbot, *memory_outputs, export_link, summary],
                show_progress="hidden",
                concurrency_limit=None,
                queue=False,
            )
            export.click(self.export, [name], [export_link], **quiet)
            forget.click(
                self.forget_me,
                [name, confirm],
                [status, chatbot, *memory_outputs, confirm, export_link, summary, remembered],
                **quiet,
            )
            temporary.change(self.set_temporary, [temporary], [temporary_banner], **quiet)
            language_event = language.change(
                self.set_language, [language], [*tr.components, chatbot, status], **quiet
            )
            language_event.then(
                self.memory_tab.memories, self.memory_tab.inputs, memory_outputs, **quiet
            )  # the memory tab's table, plot, detail and what it knows, in the new language
            load_event = demo.load(self.on_load, [remembered], [name, status, chatbot])
            load_event.then(self.follow, None, [chatbot], concurrency_limit=None, **quiet)
            if self.engine.scheduler is not None:  # wake the timer where a run may start or the line change
                for event in (remember_event, summarize_event, send_event, language_event, load_event):
                    event.then(
                        lambda: gr.Timer(active=True), None, [timer], show_progress="hidden", queue=False
                    )
            demo.unload(self.on_unload)
            demo.unload(self.memory_tab.on_unload)
        return demo


def build_app(engine: SiliconFriend, *, auth: bool = False, concurrency: int = 4) -> gr.Blocks:
    """The SiliconFriend web app around ``engine`` (launch it with :func:`silicon_friend.web.server.serve`)."""
    return WebApp(engine, auth=auth, concurrency=concurrency).build()
