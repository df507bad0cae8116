"""The web app's one refusal: an action that cannot run as asked (no name yet, not signed in, a
bad filter). Its message is shown as a toast that leaves the page usable."""

from __future__ import annotations


class Refused(Exception):
    """An action that cannot run as asked; its message is shown as a toast."""
