"""The UI language switch: components register which of their properties show which text.

Every string lives in :mod:`silicon_friend.web.texts`; a component joins the switch with one line
where it is built::

    send = i18n.add(gr.Button(t.send), value="send")
    name = i18n.add(gr.Textbox(label=t.name_label), label="name_label", placeholder="name_placeholder")
    i18n.add(banner, value=lambda t: t.model_line.replace("{model}", model))

A property is given a :class:`~silicon_friend.web.texts.UITexts` field name (a dotted one reaches
into a nested table: ``"memory.add_label"`` is the memory tab's), or a function of the texts for
text that is composed. :meth:`Translations.updates` gives one ``gr.update`` per
registered component, in :attr:`Translations.components` order, for the language picked.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

import gradio as gr

from silicon_friend.web.texts import UI, UITexts

C = TypeVar("C")

#: A text of a component's property: a (dotted) :class:`UITexts` field name, or a function of the texts.
TextSource = str | Callable[[UITexts], Any]


class Translations:
    """The components whose texts follow the language switch, and where their texts come from."""

    def __init__(self) -> None:
        self._items: list[tuple[Any, dict[str, TextSource]]] = []

    def add(self, component: C, **props: TextSource) -> C:
        """Register ``component``: each keyword is a property (``label``, ``value``,
        ``placeholder``, ``info``...) and its text source. Returns the component."""
        for source in props.values():
            if isinstance(source, str):
                _check(source)
        self._items.append((component, dict(props)))
        return component

    @property
    def components(self) -> list[Any]:
        return [component for component, _ in self._items]

    def updates(self, texts: UITexts) -> list[Any]:
        """One ``gr.update`` per registered component with its texts in ``texts``' language."""
        return [
            gr.update(**{prop: resolve(source, texts) for prop, source in props.items()})
            for _, props in self._items
        ]


def resolve(source: TextSource, texts: UITexts) -> Any:
    if not isinstance(source, str):
        return source(texts)
    value: Any = texts
    for part in source.split("."):
        value = getattr(value, part)
    return value


def _check(source: str) -> None:
    """Raise ``KeyError`` unless ``source`` names a text of every language (checked where the
    component is built, so a typo fails at start-up, not at the first switch)."""
    for texts in UI.values():
        value: Any = texts
        for part in source.split("."):
            if not dataclasses.is_dataclass(value) or part not in value.__dataclass_fields__:
                raise KeyError(f"no UI text named {source!r} in silicon_friend.web.texts.UITexts")
            value = getattr(value, part)
