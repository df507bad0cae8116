"""Our labelled evaluation set (``eval_data/``): its source format and the files built from it.

Each simulated user is one text file under ``eval_data/src/{en,zh}/``, written by hand::

    # user: Marcus Reid
    # personality: gruff, dry-humoured ...          (any "# key: value" goes to meta_information)

    ## 2024-03-04                                   (a day of dialog)
    U: the user's message
    A: the companion's reply
    ...

    ### questions
    Q: What kind of tomatoes am I trying to grow?
    A: Cherokee Purple.
    T: single                                       (single | multi | date | absent)
    E: 2024-03-04#2, 2024-03-05#0                   (evidence turns: day#index, 0-based; empty if absent)

:func:`build` turns a folder of them into the three files the harness reads, in the paper's
formats: ``memories_{lang}.json`` (the original memory-file format), ``questions_{lang}.jsonl``
(``{user: [question, ...]}`` per line) and ``labels_{lang}.jsonl`` (our label format, as in
``eval_data/paper_labels``). ``scripts/eval_build_dataset.py`` writes and checks them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from memory_bank.errors import InvalidInputError

TYPES = ("single", "multi", "date", "absent")
_DAY = re.compile(r"^##\s+(\d{4}-\d{2}-\d{2})\s*$")
_EVIDENCE = re.compile(r"^(\d{4}-\d{2}-\d{2})#(\d+)$")


def parse_user(path: str | Path) -> dict[str, Any]:
    """One source file -> ``{"user", "meta", "history": {day: [(q, r)]}, "questions": [...]}``."""
    p = Path(path)
    user: str | None = None
    meta: dict[str, str] = {}
    history: dict[str, list[list[str]]] = {}
    questions: list[dict[str, Any]] = []
    day: str | None = None
    in_questions = False

    def fail(n: int, msg: str) -> InvalidInputError:
        return InvalidInputError(f"{p}:{n}: {msg}")

    for n, raw in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("### questions"):
            in_questions = True
            continue
        if line.startswith("##"):
            m = _DAY.match(line)
            if not m:
                raise fail(n, f"a day heading must be '## YYYY-MM-DD', got {line!r}")
            day = m.group(1)
            if day in history:
                raise fail(n, f"day {day} appears twice")
            history[day] = []
            continue
        if line.startswith("#"):
            key, _, value = line[1:].partition(":")
            if key.strip() == "user":
                user = value.strip()
            else:
                meta[key.strip()] = value.strip()
            continue
        tag, sep, text = line.partition(":")
        if not sep or tag not in ("U", "A", "Q", "T", "E"):
            raise fail(n, f"expected 'U:', 'A:', 'Q:', 'T:' or 'E:', got {line[:40]!r}")
        text = text.strip()
        if in_questions:
            if tag == "Q":
                questions.append({"question": text, "answer": None, "type": None, "evidence": []})
            elif not questions:
                raise fail(n, "'A:', 'T:' or 'E:' before the first 'Q:'")
            elif tag == "A":
                questions[-1]["answer"] = text
            elif tag == "T":
                if text not in TYPES:
                    raise fail(n, f"type must be one of {', '.join(TYPES)}, got {text!r}")
                questions[-1]["type"] = text
            elif tag == "E":
                questions[-1]["evidence"] = [e.strip() for e in text.split(",") if e.strip()]
            else:
                raise fail(n, "'U:' inside the questions")
        else:
            if day is None:
                raise fail(n, "dialog before the first '## YYYY-MM-DD' heading")
            if tag == "U":
                history[day].append([text, ""])
            elif tag == "A":
                if not history[day] or history[day][-1][1]:
                    raise fail(n, "'A:' without a 'U:' before it")
                history[day][-1][1] = text
            else:
                raise fail(n, f"'{tag}:' outside the questions section")
    if not user:
        raise InvalidInputError(f"{p}: missing '# user: NAME'")
    for i, q in enumerate(questions):
        where = f"{p}: question {i} ({q['question'][:40]!r})"
        if not q["answer"] or not q["type"]:
            raise InvalidInputError(f"{where}: needs 'A:' and 'T:'")
        parsed = []
        for e in q["evidence"]:
            m = _EVIDENCE.match(e)
            if not m:
                raise InvalidInputError(f"{where}: evidence {e!r} is not DAY#INDEX")
            d, t = m.group(1), int(m.group(2))
            if d not in history or t >= len(history[d]):
                raise InvalidInputError(f"{where}: evidence {e} names no turn")
            parsed.append({"date": d, "turn": t})
        if (q["type"] == "absent") != (not parsed):
            raise InvalidInputError(f"{where}: 'absent' questions, and only they, have no evidence")
        q["evidence"] = parsed
    return {"user": user, "meta": meta, "history": history, "questions": questions}


def build(src: str | Path) -> dict[str, Any]:
    """Every ``*.txt`` in ``src`` (sorted) -> ``{"memory": ..., "questions": [...], "labels": [...]}``."""
    files = sorted(Path(src).glob("*.txt"))
    if not files:
        raise InvalidInputError(f"no user files (*.txt) in {src}")
    memory: dict[str, Any] = {}
    questions: list[dict[str, list[str]]] = []
    labels: list[dict[str, Any]] = []
    for f in files:
        u = parse_user(f)
        name = u["user"]
        if name in memory:
            raise InvalidInputError(f"{f}: user {name!r} is defined twice")
        memory[name] = {
            "name": name,
            "history": {
                d: [{"query": q, "response": r} for q, r in turns] for d, turns in u["history"].items()
            },
            "summary": {},
            "personality": {},
            "overall_history": "",
            "overall_personality": "",
            "meta_information": {"name": name, **u["meta"]},
        }
        questions.append({name: [q["question"] for q in u["questions"]]})
        labels += [
            {
                "user": name,
                "qid": i,
                "question": q["question"],
                "evidence": q["evidence"],
                "answer": q["answer"],
                "type": q["type"],
            }
            for i, q in enumerate(u["questions"])
        ]
    return {"memory": memory, "questions": questions, "labels": labels}


def file_names(lang: str) -> dict[str, str]:
    return {
        "memory": f"memories_{lang}.json",
        "questions": f"questions_{lang}.jsonl",
        "labels": f"labels_{lang}.jsonl",
    }


def render(built: dict[str, Any], lang: str) -> dict[str, str]:
    """The built set as file name -> exact file text (what is written and checked)."""
    names = file_names(lang)
    return {
        names["memory"]: json.dumps(built["memory"], ensure_ascii=False, indent=1) + "\n",
        names["questions"]: "".join(json.dumps(q, ensure_ascii=False) + "\n" for q in built["questions"]),
        names["labels"]: "".join(json.dumps(lab, ensure_ascii=False) + "\n" for lab in built["labels"]),
    }


def counts(built: dict[str, Any]) -> dict[str, Any]:
    mem = built["memory"]
    turns = [len(t) for u in mem.values() for t in u["history"].values()]
    types: dict[str, int] = {}
    for lab in built["labels"]:
        types[lab["type"]] = types.get(lab["type"], 0) + 1
    return {
        "users": len(mem),
        "days": len(turns),
        "turns": sum(turns),
        "turns_per_day": [min(turns), max(turns)] if turns else [0, 0],
        "questions": len(built["labels"]),
        "types": dict(sorted(types.items())),
    }
