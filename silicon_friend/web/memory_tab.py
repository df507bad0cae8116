"""The "My memories" tab: what SiliconFriend knows about the user, and every memory, under their control.

* **What I know about you**: the global portrait and event summary and the latest daily ones,
  read from the store at every view (an empty state says how they get made).
* **The table**: compact rows (date, kind, an excerpt, strength, retention, last recall, status),
  paged (:data:`~silicon_friend.memory_view.PAGE_SIZE` a page, the position stated), filtered by
  words, kind, date range and kept/forgotten. Clicking a row opens the whole memory with why it
  fades (:meth:`MemoryBank.explain`), and lets the user edit, delete (with undo) or restore it.
* **Remember that…**: a memory added by hand (stored as a turn the user said, dated now).
* **The plot**: the retention of the page's newest memories on a real-date axis, under the
  store's forgetting setting, so it agrees with the table.

Isolation: every handler acts for the user the request signs in as (``WebApp._session``); the
memory a click selects is looked up in the page this tab was shown, which the server keeps per
``(login, session hash)`` and per user (:class:`ViewRegistry`), never taken from the browser. The
undo list is in server memory only, per tab and user, for ten minutes at most, and dropped by
"Forget me".

(No ``from __future__ import annotations``: Gradio reads the ``gr.SelectData`` annotation at run time.)
"""

import collections
import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import gradio as gr

from memory_bank.errors import MemoryBankError, MemoryNotFoundError
from memory_bank.records import Memory, MemoryKind
from memory_bank.text import same_user
from silicon_friend.engine import ADDED_BY_HAND
from silicon_friend.memories import retention_figure
from silicon_friend.memory_view import (
    KINDS,
    STATUSES,
    Deletion,
    Knowledge,
    MemoryFilter,
    Page,
    delete_undoable,
    excerpt,
    fade_reason,
    filtered,
    find,
    knowledge,
    page_of,
    undo_delete,
)
from silicon_friend.web.refusal import Refused
from silicon_friend.web.safe_text import inert_markdown
from silicon_friend.web.sessions import SessionRegistry
from silicon_friend.web.texts import MemoryTabTexts

if TYPE_CHECKING:
    from silicon_friend.engine import Session, SiliconFriend
    from silicon_friend.web.i18n import Translations
    from silicon_friend.web.sessions import WebSession
    from silicon_friend.web.texts import UITexts


class TabHost(Protocol):
    """What the tab needs of the app around it (:class:`~silicon_friend.web.app.WebApp`), so
    that this module does not import the app that builds it."""

    engine: "SiliconFriend"
    auth: bool
    texts: "UITexts"
    i18n: "Translations"

    def _warn(self, message: str, where: Any = None) -> None: ...
    def _info(self, message: str, where: Any = None) -> None: ...
    def _t(self, request: Any) -> "UITexts": ...
    def _tab(self, request: Any) -> "WebSession": ...
    def _session(self, name: str | None, request: Any) -> "Session": ...
    def _current(self, request: Any) -> "Session | None": ...
    def _render_tab(self, request: Any) -> list[dict[str, str]]: ...
    def _drop_everywhere(self, user: str, memory_id: str) -> None: ...
    def _edited_everywhere(self, user: str, memory: Memory) -> None: ...


logger = logging.getLogger(__name__)

#: Deleted memories a tab can bring back (newest first out), and for how long: a deleted
#: memory is held in server memory only, and only this long.
UNDO_DEPTH = 20
UNDO_SECONDS = 600
#: Curves in the plot (the caption says how many are drawn).
PLOT_CURVES = 12
COLUMN_WIDTHS: list[str | int] = ["96px", "104px", "330px", "78px", "84px", "96px", "84px"]
#: Headers on one line and never cut, rows in the page's own font (Gradio's table uses a monospace one).
CSS = (
    "#sf-memory-table th, #sf-memory-table th * {white-space: nowrap !important; "
    "word-break: keep-all !important; overflow-wrap: normal !important; text-overflow: clip !important}"
    " #sf-memory-table table, #sf-memory-table [role=grid] * {font-family: ui-sans-serif, system-ui, "
    "sans-serif !important; font-size: 13px !important}"
)


@dataclasses.dataclass
class TabView:
    """What one tab shows of one user's memories: the page's memory ids, the selected one, and
    the memories deleted from this tab, with when (for undo)."""

    user: str
    ids: list[str] = dataclasses.field(default_factory=list)
    selected: str | None = None
    #: The memory whose words the edit boxes were filled with (a redraw keeps what was typed since)
    filled: str | None = None
    undo: list[tuple[float, Deletion]] = dataclasses.field(default_factory=list)

    def deleted(self, deletion: Deletion) -> None:
        """Keep ``deletion`` for undo (the newest :data:`UNDO_DEPTH`)."""
        self.undo = [*self.undoable(), (time.monotonic(), deletion)][-UNDO_DEPTH:]

    def undoable(self) -> list[tuple[float, Deletion]]:
        """The deletions that can still be undone (the others are dropped from memory now)."""
        cutoff = time.monotonic() - UNDO_SECONDS
        self.undo = [(t, m) for t, m in self.undo if t >= cutoff]
        return self.undo


class ViewRegistry:
    """Each tab's :class:`TabView`, by ``(login, session hash)``; a view belongs to one user
    (asking for another user's gives a fresh view). Bounded: the oldest are dropped first."""

    def __init__(self, capacity: int = 5000) -> None:
        self.capacity = capacity
        self._items: collections.OrderedDict[tuple[str | None, str | None], TabView] = (
            collections.OrderedDict()
        )
        self._lock = threading.Lock()

    def get(self, request: Any, user: str) -> TabView:
        key = SessionRegistry.key(request)
        with self._lock:
            view = self._items.get(key)
            if view is None or not same_user(view.user, user):
                view = self._items[key] = TabView(user)
                while len(self._items) > self.capacity:
                    self._items.popitem(last=False)
            self._items.move_to_end(key)
            return view

    def drop(self, request: Any) -> None:
        with self._lock:
            self._items.pop(SessionRegistry.key(request), None)

    def drop_user(self, user: str) -> None:
        """Forget every tab's view (and undo list) of ``user``."""
        with self._lock:
            for key in [k for k, v in self._items.items() if same_user(v.user, user)]:
                del self._items[key]


def kind_choices(t: MemoryTabTexts) -> list[tuple[str, str]]:
    """The kind filter's choices: (name in ``t``'s language, kind)."""
    return [(t.kinds[k], k) for k in KINDS]


def status_choices(t: MemoryTabTexts) -> list[tuple[str, str]]:
    """The kept/forgotten filter's choices: (name in ``t``'s language, status)."""
    return [(t.statuses[s], s) for s in STATUSES]


def status_name(memory: Memory, t: MemoryTabTexts) -> str:
    """The memory's status in ``t``'s language: kept, forgotten by the curve (the cold tier
    still finds it), or hidden by the user (never retrieved until restored)."""
    return t.statuses["hidden" if memory.hidden else "forgotten" if memory.archived else "kept"]


class MemoryTab:
    """Layout and handlers of the tab, for one :class:`~silicon_friend.web.app.WebApp`."""

    css = CSS

    def __init__(self, app: TabHost) -> None:
        self.app = app
        self.views = ViewRegistry()
        #: The components :meth:`view` fills, and the inputs of :meth:`memories` (set by :meth:`build`).
        self.outputs: list[Any] = []
        self.inputs: list[Any] = []
        self.knows: Any = None
        self.state: Any = None
        #: The handler that shows the tab: ``(name, value, search, kind, status, from, to, page, request)``.
        self.by_name = self.handlers()
        self.memories = self.by_name["memories"]

    @property
    def bank(self) -> Any:
        return self.app.engine.bank

    def _mt(self, request: Any) -> MemoryTabTexts:
        """The tab's texts in the language the browser tab picked (the language switch)."""
        return self.app._t(request).memory

    # -- rendering (every text in the language ``ui`` / ``t`` is given) ----------------------------
    @staticmethod
    def _kind(value: str, t: MemoryTabTexts) -> str:
        return t.kinds.get(value, value)

    def _knowledge_md(self, k: Knowledge, ui: "UITexts") -> str:
        t = ui.memory
        if k.empty:
            return f"### {t.knows_title}\n\n{t.knows_empty}"
        out = [f"### {t.knows_title}"]
        out.append(f"**{ui.portrait_title}**\n\n{inert_markdown(k.portrait) or ui.no_summary}")
        out.append(f"**{ui.summary_title}**\n\n{inert_markdown(k.summary) or ui.no_summary}")
        if k.days:
            out.append(f"**{t.daily_title}**")
            for date, events, mood in k.days:
                lines = [f"- **{date}**"]
                if events:
                    lines.append(f"  - {t.day_events}: {inert_markdown(excerpt(events, 400))}")
                if mood:
                    lines.append(f"  - {t.day_mood}: {inert_markdown(excerpt(mood, 400))}")
                out.append("\n".join(lines))
            if k.older_days:
                out.append(t.older_days.format(n=k.older_days))
        if k.stale:
            out.append(f"*{t.stale_note}*")
        return "\n\n".join(out)

    def knows_md(self, user: str, ui: "UITexts") -> str:
        """ "What I know about you" for ``user``, read from the store now."""
        return self._knowledge_md(knowledge(self.bank, user), ui)

    def _table(self, page: Page, t: MemoryTabTexts) -> dict[str, Any]:
        rows = [
            [
                r.memory.date,
                self._kind(r.memory.kind.value, t),
                excerpt(r.memory.text),
                r.memory.strength,
                round(r.retention, 2),
                r.memory.last_recall_date or "",
                status_name(r.memory, t),
            ]
            for r in page.rows
        ]
        return {"data": rows, "headers": list(t.columns)}

    @staticmethod
    def _info(page: Page, curves: int, flt: MemoryFilter, t: MemoryTabTexts) -> str:
        if not page.total:
            return t.none_found if flt != MemoryFilter() else t.no_memories
        info = t.page_info.format(
            first=page.first, last=page.last, total=page.total, page=page.number, pages=page.pages
        )
        caption = t.plot_caption.format(n=curves) if curves else ""
        return f"{info}  \n{t.select_hint} {caption}".strip()

    def _detail(self, user: str, memory: Memory, t: MemoryTabTexts) -> str:
        why = self.bank.explain(user, memory.memory_id).to_dict()
        facts = (t.facts_off if why.get("mode") == "off" else t.facts).format(
            strength=why["strength"],
            recalls=why["recalls"],
            last=memory.last_recall_date or "—",
            days=f"{float(why['time_scale_days']):g}",
            r=f"{float(why['retention']):.2f}",
        )
        status = status_name(memory, t)
        text = inert_markdown(memory.text).replace("\n", "  \n")
        today = self.app.engine.clock().date().isoformat()
        kind = self._kind(memory.kind.value, t)
        reason = fade_reason(why, t.reasons, kind, today)
        return f"**{memory.date} · {kind} · {status}**\n\n{text}\n\n**{t.why_title}**: {reason}  \n{facts}"

    def view(
        self,
        user: str,
        view: TabView,
        flt: MemoryFilter,
        page_number: float | int | None,
        ui: "UITexts",
        *,
        keep_selection: bool = False,
        reset_detail: bool = False,
        refill: bool = False,
    ) -> tuple[Any, ...]:
        """Every output of the tab for ``user`` (see :attr:`outputs`), in ``ui``'s language
        (``refill``: the edit boxes show the stored words even if the same memory stays open).

        With ``keep_selection`` the memory this user's view has open stays open; with nothing
        open, the detail is left as it is unless ``reset_detail`` (a sign-in: the tab may still
        show another name's memory), which closes it."""
        t = ui.memory
        rows = filtered(self.bank, user, flt)
        page = page_of(rows, int(page_number or 1))
        view.ids = [r.memory_id for r in page.rows]
        memories = [r.memory for r in page.rows if not r.memory.archived]
        figure = retention_figure(
            self.bank, user, memories=memories, max_curves=PLOT_CURVES, language=ui.language
        )
        curves = min(PLOT_CURVES, len([m for m in memories if m.kind.value in ("turn", "daily_summary")]))
        shown = (
            self._knowledge_md(knowledge(self.bank, user), ui),
            self._info(page, curves, flt, t),
            page.number,
            self._table(page, t),
            figure,
        )
        chosen = view.selected if keep_selection else None
        selected = find(self.bank, user, chosen) if chosen else None
        if keep_selection and (view.selected != chosen or (chosen is None and not reset_detail)):
            # Nothing was open when this redraw began, or a row was opened while it ran (a click
            # right after switching to the tab): the detail is left as the page shows it, so a
            # click's detail is never hidden by a redraw that started before it (or whose
            # output reached the page after it).
            selection: tuple[Any, ...] = (gr.update(),) * 5
        else:
            view.selected = selected.memory_id if selected else None
            selection = self._selection(user, selected, t)
            if selected is not None and view.filled == selected.memory_id and not refill:
                # The same memory stays open (a search, a tab switch, a language switch): the
                # edit boxes keep what the user typed and has not saved yet.
                selection = (*selection[:2], gr.update(), gr.update(), *selection[4:])
            view.filled = view.selected
        return (*shown, *selection, gr.update(visible=bool(view.undoable())))

    def _selection(self, user: str, memory: Memory | None, t: MemoryTabTexts) -> tuple[Any, ...]:
        """The detail, the edit box and the reply box (a chat turn's message and reply are
        edited apart: one box of both saved the reply into the message), the restore button."""
        if memory is None:
            hidden = gr.update(value="", visible=False)
            return gr.update(visible=False), "", gr.update(value=""), hidden, gr.update(visible=False)
        turn = memory.kind is MemoryKind.TURN and not memory.extra.get(ADDED_BY_HAND)  # a note has no reply
        return (
            gr.update(visible=True),
            self._detail(user, memory, t),
            gr.update(value=memory.query or "" if turn else memory.text),
            gr.update(value=memory.response or "" if turn else "", visible=turn),
            gr.update(visible=memory.archived),
        )

    def cleared(self, ui: "UITexts") -> tuple[Any, ...]:
        """The tab's outputs for a user with no memories (after "Forget me"), in ``ui``'s language."""
        empty = Page([], 1, 1, 0)
        return (
            self._knowledge_md(Knowledge("", "", [], 0, False), ui),
            ui.memory.no_memories,
            1,
            self._table(empty, ui.memory),
            None,
            *self._selection("", None, ui.memory),
            gr.update(visible=False),
        )

    # -- handlers -----------------------------------------------------------------------------
    def _open(
        self, name: str, request: gr.Request | None, form: Sequence[Any]
    ) -> tuple[str, TabView, MemoryFilter]:
        """The signed-in user, their view in this tab and the parsed filter; raises ``Refused``."""
        user = self.app._session(name, request).user
        try:
            flt = MemoryFilter.parse(*form)
        except MemoryBankError as e:
            raise Refused(str(e)) from e
        return user, self.views.get(request, user), flt

    def _run(
        self,
        name: str,
        request: gr.Request | None,
        form: Sequence[Any],
        page: Any,
        action: Callable[[str, TabView], bool] | None = None,
        reset_detail: bool = False,
        quiet: bool = False,
    ) -> tuple[Any, ...]:
        """Run ``action(user, view)`` (True: keep the selection open) and render the tab (see
        :meth:`view` for ``reset_detail``); a refusal or a library error is a toast and changes
        nothing on the page."""
        keep = (gr.update(),) * len(self.outputs)
        ui = self.app._t(request)
        try:
            user, view, flt = self._open(name, request, form)
        except Refused as e:
            if not quiet:
                self.app._warn(str(e), request)
            return keep
        keep_selection = True
        if action is not None:
            try:
                keep_selection = action(user, view)
            except MemoryNotFoundError:
                self.app._warn(ui.memory.gone, request)
                keep_selection = False
            except MemoryBankError as e:
                self.app._warn(str(e), request)
                return keep
        if not self.bank.has_user(user):
            return self.cleared(ui)
        return self.view(
            user,
            view,
            flt,
            page,
            ui,
            keep_selection=keep_selection,
            reset_detail=reset_detail,
            refill=action is not None,  # what an action stored is what the boxes show
        )

    def _handler(
        self,
        action: Callable[..., bool] | None,
        fn_name: str,
        *,
        step: int = 0,
        extra: Callable[[gr.Request, bool], Any] | None = None,
        reset_detail: bool = False,
        quiet: bool = False,
    ) -> Callable[..., tuple[Any, ...]]:
        """A Gradio handler over the tab's form: ``(name, value, search, kind, status, from, to,
        page, request[, reply])``; it runs ``action(user, view, value, request[, reply])`` (True:
        keep the selection open) on page ``page + step`` and renders the tab, plus
        ``extra(request, acted)`` if given. ``value`` is the text box the action reads (the edit
        box, or "Remember that…"); ``reply``, where the page sends it, the reply box of a turn.
        ``quiet``: a refused name changes nothing and says nothing (the handler this one follows,
        Remember Me, said it already)."""

        def handle(
            name: str,
            value: str,
            text: str,
            kind: str,
            status: str,
            since: str,
            until: str,
            page: float,
            request: gr.Request,
            reply: str | None = None,
        ) -> tuple[Any, ...]:
            done: list[bool] = []
            run = None
            if action is not None:

                def run(user: str, view: TabView) -> bool:
                    keep = (
                        action(user, view, value, request)
                        if reply is None
                        else action(user, view, value, request, reply)
                    )
                    done.append(True)
                    return keep

            nobody = self.app._tab(request).session is None and not self.app.auth and not (name or "").strip()
            if action is None and nobody:  # no one has said who they are: an empty tab, no warning
                return self.cleared(self.app._t(request))
            form = (text, kind, since, until, status)
            out = self._run(name, request, form, int(page or 1) + step, run, reset_detail, quiet)
            return out if extra is None else (*out, extra(request, bool(done)))

        handle.__name__ = fn_name
        return handle

    def handlers(self) -> dict[str, Callable[..., tuple[Any, ...]]]:
        """Every form handler of the tab, by name (also the name of its API endpoint)."""
        return {
            "memories": self._handler(None, "memories"),
            "signed_in": self._handler(None, "signed_in", reset_detail=True, quiet=True),
            "previous_page": self._handler(None, "previous_page", step=-1),
            "next_page": self._handler(None, "next_page", step=+1),
            # An edit and a delete redraw the chat too: it shows the new words, or no longer the turn.
            "save": self._handler(self._save, "save", extra=lambda r, _: self.app._render_tab(r)),
            "delete": self._handler(self._delete, "delete", extra=lambda r, _: self.app._render_tab(r)),
            "undo": self._handler(self._undo, "undo"),
            "restore": self._handler(self._restore, "restore"),
            "add": self._handler(self._add, "add", extra=lambda _, done: "" if done else gr.update()),
        }

    def select(self, name: str, evt: gr.SelectData, request: gr.Request) -> tuple[Any, ...]:
        """A click on a table row: open that memory (looked up in the page this tab was shown)."""
        try:
            user = self.app._session(name, request).user
        except Refused as e:
            self.app._warn(str(e), request)
            return (gr.update(),) * 5
        view = self.views.get(request, user)
        index = evt.index[0] if isinstance(evt.index, list | tuple) else evt.index
        if not isinstance(index, int) or not 0 <= index < len(view.ids):
            return (gr.update(),) * 5
        t = self._mt(request)
        found = find(self.bank, user, view.ids[index])
        if found is None:
            self.app._warn(t.gone, request)
            return (gr.update(),) * 5
        view.selected = view.filled = found.memory_id
        return self._selection(user, found, t)

    # -- actions (user, their view in this tab, the text box's value, the request) ---------------
    def _selected(self, view: TabView, request: gr.Request) -> str:
        if not view.selected:
            raise MemoryBankError(self._mt(request).pick_first)
        return view.selected

    def _save(
        self, user: str, view: TabView, value: str, request: gr.Request, reply: str | None = None
    ) -> bool:
        """The edit box's text, and for a chat turn the reply box's (``None``: the reply as stored)."""
        chosen = self._selected(view, request)
        stored = find(self.bank, user, chosen)
        response = None
        if stored is not None and stored.kind is MemoryKind.TURN:
            response = stored.response or "" if reply is None else reply
        memory = self.bank.update_memory(user, chosen, text=value, response=response)
        self.app._edited_everywhere(user, memory)  # every open chat of the user, not only this tab's
        self.app._info(self._mt(request).saved, request)
        return True

    def _delete(self, user: str, view: TabView, value: str, request: gr.Request) -> bool:
        deletion = delete_undoable(self.bank, user, self._selected(view, request))
        gone = deletion.memory
        view.deleted(deletion)
        view.selected = None
        self.app._drop_everywhere(user, gone.memory_id)  # every open chat of the user drops it
        self.app._info(self._mt(request).deleted.format(text=excerpt(gone.text, 60)), request)
        return False

    def _undo(self, user: str, view: TabView, value: str, request: gr.Request) -> bool:
        if not view.undoable():
            self.app._warn(self._mt(request).nothing_to_undo, request)
            return False
        memory = undo_delete(self.bank, user, view.undo.pop()[1])
        view.selected = memory.memory_id
        self.app._info(self._mt(request).undone.format(text=excerpt(memory.text, 60)), request)
        return True

    def _restore(self, user: str, view: TabView, value: str, request: gr.Request) -> bool:
        self.bank.restore(user, [self._selected(view, request)])
        self.app._info(self._mt(request).restored, request)
        return True

    def _add(self, user: str, view: TabView, value: str, request: gr.Request) -> bool:
        memory = self.bank.add_turn(
            user, (value or "").strip(), "", extra={ADDED_BY_HAND: True}, standalone=True
        )
        view.selected = memory.memory_id
        self.app._info(self._mt(request).added.format(text=excerpt(memory.text, 60)), request)
        return True

    def on_unload(self, request: gr.Request) -> None:
        self.views.drop(request)

    # -- layout -------------------------------------------------------------------------------
    def build(self, name: gr.Textbox, chatbot: gr.Chatbot, tab: gr.Tab) -> list[Any]:
        """Lay the tab out inside the current ``gr.Tab`` and wire its events; returns the
        outputs the app's own events (Remember Me, Forget me) update."""
        ui, tr = self.app.texts, self.app.i18n
        t = ui.memory
        # A filter changed while the last view is still being made is applied after it, not dropped.
        quiet: dict[str, Any] = {"show_progress": "hidden", "trigger_mode": "always_last"}
        knows = gr.Markdown(elem_id="sf-knows")
        #: the background summaries' state line (filled by the app's timer, like ``knows``)
        self.state = gr.Markdown(elem_id="sf-summary-state")
        self.knows = knows
        with gr.Row():
            new_memory = tr.add(
                gr.Textbox(label=t.add_label, placeholder=t.add_placeholder, scale=5, elem_id="sf-add-text"),
                label="memory.add_label",
                placeholder="memory.add_placeholder",
            )
            add = tr.add(gr.Button(t.add_button, scale=1, elem_id="sf-add"), value="memory.add_button")
        with gr.Row():
            text = tr.add(
                gr.Textbox(
                    label=t.search_label, placeholder=t.search_placeholder, scale=3, elem_id="sf-filter-text"
                ),
                label="memory.search_label",
                placeholder="memory.search_placeholder",
            )
            kind = tr.add(
                gr.Dropdown(
                    kind_choices(t), value="all", label=t.kind_label, scale=2, elem_id="sf-filter-kind"
                ),
                label="memory.kind_label",
                choices=lambda ui: kind_choices(ui.memory),
            )
            status = tr.add(
                gr.Dropdown(
                    status_choices(t), value="all", label=t.status_label, scale=2, elem_id="sf-filter-status"
                ),
                label="memory.status_label",
                choices=lambda ui: status_choices(ui.memory),
            )
            since = tr.add(
                gr.Textbox(label=t.since_label, scale=2, elem_id="sf-filter-since"),
                label="memory.since_label",
            )
            until = tr.add(
                gr.Textbox(label=t.until_label, scale=2, elem_id="sf-filter-until"),
                label="memory.until_label",
            )
            apply = tr.add(gr.Button(t.apply, scale=1, elem_id="sf-filter-apply"), value="memory.apply")
        info = gr.Markdown(elem_id="sf-memory-info")
        with gr.Row():
            previous = tr.add(
                gr.Button(t.previous, size="sm", elem_id="sf-page-prev"), value="memory.previous"
            )
            # No minimum: Gradio would refuse 0 or -3 before the handler, with a raw English
            # error; the handler clamps any number to the pages there are.
            page = gr.Number(value=1, precision=0, show_label=False, container=False, elem_id="sf-page")
            following = tr.add(gr.Button(t.next, size="sm", elem_id="sf-page-next"), value="memory.next")
        table = gr.Dataframe(
            headers=list(t.columns),
            interactive=False,
            wrap=False,
            column_widths=COLUMN_WIDTHS,
            max_height=640,
            elem_id="sf-memory-table",
        )
        with gr.Group(visible=False, elem_id="sf-memory-detail") as detail:
            detail_md = gr.Markdown(elem_id="sf-detail-text")
            edit = tr.add(
                gr.Textbox(label=t.edit_label, lines=3, elem_id="sf-edit-text"), label="memory.edit_label"
            )
            edit_reply = tr.add(
                gr.Textbox(label=t.edit_reply_label, lines=3, visible=False, elem_id="sf-edit-reply"),
                label="memory.edit_reply_label",
            )
            with gr.Row():
                save = tr.add(gr.Button(t.save, elem_id="sf-edit-save"), value="memory.save")
                restore = tr.add(
                    gr.Button(t.restore, visible=False, elem_id="sf-restore"), value="memory.restore"
                )
                delete = tr.add(
                    gr.Button(t.delete, variant="stop", elem_id="sf-delete"), value="memory.delete"
                )
        undo = tr.add(gr.Button(t.undo, visible=False, elem_id="sf-undo"), value="memory.undo")
        plot = tr.add(gr.Plot(label=t.plot_label, elem_id="sf-plot"), label="memory.plot_label")

        self.outputs = [knows, info, page, table, plot, detail, detail_md, edit, edit_reply, restore, undo]
        form = [text, kind, status, since, until, page]
        h = self.by_name
        self.inputs = [name, edit, *form]
        refresh = [
            apply.click,
            text.submit,
            since.submit,
            until.submit,
            kind.input,
            status.input,
            page.submit,
        ]
        gr.on([*refresh, tab.select], h["memories"], self.inputs, self.outputs, **quiet)
        previous.click(h["previous_page"], self.inputs, self.outputs, **quiet)
        following.click(h["next_page"], self.inputs, self.outputs, **quiet)
        table.select(self.select, [name], [detail, detail_md, edit, edit_reply, restore], **quiet)
        for button in ("undo", "restore"):
            {"undo": undo, "restore": restore}[button].click(h[button], self.inputs, self.outputs, **quiet)
        save.click(h["save"], [*self.inputs, edit_reply], [*self.outputs, chatbot], **quiet)
        delete.click(h["delete"], self.inputs, [*self.outputs, chatbot], **quiet)
        gr.on(
            [add.click, new_memory.submit],
            h["add"],
            [name, new_memory, *form],
            [*self.outputs, new_memory],
            **quiet,
        )
        return self.outputs
