"""Reading a file the user named (a dataset, a config): its text, or one line saying what is
wrong with it, as the caller's error."""

from __future__ import annotations

from pathlib import Path

from finetune.errors import FinetuneError


def read_user_text(path: Path, what: str, error: type[FinetuneError]) -> str:
    """The UTF-8 text of ``path`` (a BOM, as Notepad and Excel write it, is not part of it), or
    ``error`` naming the file and the fix; ``what`` names the file the caller wants."""
    try:
        return path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise error(f"{what} not found: {path}") from None
    except IsADirectoryError:
        raise error(f"{path} is a folder; give the {what}") from None
    except UnicodeDecodeError as e:
        raise error(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from e
    except OSError as e:
        raise error(f"{path}: cannot read it ({e.strerror or e})") from e
