"""The paper's probing-question evaluation (§4.2): retrieval over a memory file.

Questions files hold one JSON object per line, ``{user: [question, ...]}``; user keys are
matched after stripping spaces (the paper's data has keys like ``' Jason '``). Label files (ours,
in ``eval_data/``) hold one object per question::

    {"user", "qid", "question", "evidence": [{"date": "YYYY-MM-DD", "turn": i}], "answer", "type"}

A question is a *hit at k* when any evidence turn is among the top-k retrieved memories, and its
*full recall at k* is the share of its evidence turns found there. Questions whose evidence is
empty (the event never happened) are reported but not scored for retrieval.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory_bank.errors import InvalidInputError

if TYPE_CHECKING:
    from memory_bank.bank import MemoryBank


@dataclasses.dataclass
class Question:
    user: str
    qid: int
    question: str
    evidence: list[tuple[str, int]] = dataclasses.field(default_factory=list)
    answer: str | None = None
    type: str | None = None


def _jsonl(path: str | Path) -> list[Any]:
    p = Path(path)
    if not p.is_file():
        raise InvalidInputError(f"file {str(p)!r} does not exist")
    out = []
    for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise InvalidInputError(f"{p}:{i}: not valid JSON ({e.msg})") from e
    return out


def load_questions(path: str | Path) -> list[Question]:
    """Probing questions in the paper's format, in file order."""
    questions = []
    for item in _jsonl(path):
        if not isinstance(item, dict):
            raise InvalidInputError(f"{path}: each line must be an object {{user: [questions]}}")
        for user, qs in item.items():
            if not isinstance(qs, list) or not all(isinstance(q, str) for q in qs):
                raise InvalidInputError(f"{path}: user {user!r} must map to a list of question strings")
            questions += [Question(user.strip(), i, q) for i, q in enumerate(qs)]
    return questions


def load_labels(path: str | Path) -> dict[tuple[str, int], Question]:
    """Our labels, keyed by (stripped user, qid)."""
    out = {}
    for item in _jsonl(path):
        try:
            q = Question(
                item["user"].strip(),
                int(item["qid"]),
                item["question"],
                [(e["date"], int(e["turn"])) for e in item.get("evidence", [])],
                item.get("answer"),
                item.get("type"),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise InvalidInputError(f"{path}: malformed label {item!r}: {e}") from e
        out[(q.user, q.qid)] = q
    return out


def attach_labels(questions: list[Question], labels: dict[tuple[str, int], Question]) -> list[Question]:
    for q in questions:
        lab = labels.get((q.user, q.qid))
        if lab is not None:
            if lab.question != q.question:
                raise InvalidInputError(
                    f"label for {q.user!r} #{q.qid} is for another question ({lab.question!r} != {q.question!r})"
                )
            q.evidence, q.answer, q.type = lab.evidence, lab.answer, lab.type
    return questions


def retrieve(
    bank: MemoryBank, questions: list[Question], k: int, *, now: str | None = None
) -> list[dict[str, Any]]:
    """One output record per question: the ranked memories retrieved for it."""
    rows = []
    for q in questions:
        hits = bank.search(q.user, q.question, k, now=now)
        rows.append(
            {
                "user": q.user,
                "qid": q.qid,
                "question": q.question,
                "retrieved": [
                    {
                        "kind": h.memory.kind.value,
                        "date": h.memory.date,
                        "turn": h.memory.turn,
                        "score": round(h.score, 6),
                        "text": h.memory.text,
                        "memory_id": h.memory.memory_id,
                    }
                    for h in hits
                ],
            }
        )
    return rows


def score(questions: list[Question], rows: list[dict[str, Any]], ks: list[int]) -> dict[str, Any]:
    """hit@k and full-evidence recall@k over labelled questions (overall and per label type)."""
    by_key = {(r["user"], r["qid"]): r for r in rows}
    per: dict[str, dict[str, list[float]]] = {}
    for q in questions:
        if not q.evidence:
            continue
        got = [(m["date"], m["turn"]) for m in by_key[(q.user, q.qid)]["retrieved"] if m["kind"] == "turn"]
        gold = set(q.evidence)
        for group in ("all", q.type or "untyped"):
            bucket = per.setdefault(group, {})
            for k in ks:
                top = set(got[:k])
                bucket.setdefault(f"hit@{k}", []).append(float(bool(gold & top)))
                bucket.setdefault(f"recall@{k}", []).append(len(gold & top) / len(gold))
    return {
        group: {
            "n": len(next(iter(m.values()))),
            **{name: round(sum(v) / len(v), 4) for name, v in m.items()},
        }
        for group, m in per.items()
    }


# -- running the evaluation (``memorybank eval retrieval``) ---------------------------------
def default_now(data: dict[str, Any]) -> str:
    """The day after the last dated memory in a memory file: when the questions are asked."""
    import datetime as dt

    days = [d for user in data.values() for d in (user.get("history") or {})]
    if not days:
        return dt.date.today().isoformat()
    return (dt.date.fromisoformat(max(days)[:10]) + dt.timedelta(days=1)).isoformat()


def check_users(questions: list[Question], data: dict[str, Any], source: str) -> None:
    known = {k.strip() for k in data}
    missing = sorted({q.user for q in questions} - known)
    if missing:
        raise InvalidInputError(
            f"{source}: questions for users not in the memory file: {', '.join(map(repr, missing[:5]))}"
        )


def metric_ks(k: int) -> list[int]:
    """The cut-offs reported for a run retrieving ``k`` memories: 1, 2, 3, 5, 10, ... up to ``k``."""
    return sorted({x for x in (1, 2, 3, 5, 10, 20, 50) if x <= k} | {k})


def retrieve_proposed(
    data: dict[str, Any],
    questions: list[Question],
    k: int,
    encoder: Any,
    *,
    now: str,
    proposal: str = "proposed-v2",
) -> list[dict[str, Any]]:
    """Like :func:`retrieve`, ranked by a proposal of :mod:`memory_bank.evaluation.variants` (no store)."""
    import datetime as dt

    from memory_bank.evaluation.variants import PROPOSALS, rank_memories
    from memory_bank.original_format import user_memories
    from memory_bank.records import RETRIEVABLE_KINDS

    by_user: dict[str, list[Question]] = {}
    for q in questions:
        by_user.setdefault(q.user, []).append(q)
    keys = {key.strip(): key for key in data}
    rows: dict[tuple[str, int], dict[str, Any]] = {}
    for user, qs in by_user.items():
        mems, _ = user_memories(user, data[keys[user]])
        mems = [m for m in mems if m.kind in RETRIEVABLE_KINDS and m.text.strip()]
        ranked = rank_memories(
            mems,
            [q.question for q in qs],
            encoder,
            k,
            proposal=PROPOSALS[proposal],
            now=dt.date.fromisoformat(now[:10]),
        )
        for q, idx in zip(qs, ranked, strict=True):
            rows[(q.user, q.qid)] = {
                "user": q.user,
                "qid": q.qid,
                "question": q.question,
                "retrieved": [
                    {
                        "kind": mems[i].kind.value,
                        "date": mems[i].date,
                        "turn": mems[i].turn,
                        "score": None,
                        "text": mems[i].text,
                        "memory_id": mems[i].memory_id,
                    }
                    for i in idx
                ],
            }
    return [rows[(q.user, q.qid)] for q in questions]


def write_jsonl(path: str | Path, rows: list[dict[str, Any]]) -> Path:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    with p.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    return p


def report_markdown(title: str, results: dict[str, Any], charts: dict[str, Path]) -> str:
    from memory_bank.evaluation import report

    m = results["metrics"]
    ks = results["ks"]
    lines = [f"# {title}", ""]
    d = results["dataset"]
    lines.append(
        f"{d['users']} users, {d['turns']} turns, {d['questions']} questions "
        f"({d['labelled']} with evidence turns, {d['absent']} about things that never happened). "
        f"Ranker: `{results['config']['ranker']}`, encoder `{results['config']['encoder']}`, top-k {results['config']['k']}."
    )
    lines += [
        "",
        "hit@k: an evidence turn is among the top k; recall@k: the share of evidence turns there.",
        "",
    ]
    groups = ["all", *sorted(g for g in m if g != "all")]
    header = ["questions", "n", *[f"hit@{k}" for k in ks], *[f"recall@{k}" for k in ks]]
    rows = [
        [
            g,
            m[g]["n"],
            *[report.pct(m[g][f"hit@{k}"]) for k in ks],
            *[report.pct(m[g][f"recall@{k}"]) for k in ks],
        ]
        for g in groups
    ]
    lines += [report.md_table(header, rows), ""]
    for name in ("curve", "types"):
        if name in charts:
            lines += [f"![{name}]({charts[name].name})", ""]
    lines.append(report.md_footer(results["run"]))
    return "\n".join(lines)


def write_report(out: str | Path, title: str, results: dict[str, Any]) -> dict[str, Path]:
    """``OUT.json`` + ``OUT.md`` + charts next to the per-question ``OUT.jsonl``."""
    from memory_bank.evaluation import report

    report.write_json(report.sibling(out, ".json"), results)
    m, ks = results["metrics"], results["ks"]
    charts: dict[str, Path] = {}
    if "all" in m:
        curve = report.recall_curves(
            report.sibling(out, "-curve.png"),
            {
                "hit@k": {k: m["all"][f"hit@{k}"] for k in ks},
                "full-evidence recall@k": {k: m["all"][f"recall@{k}"] for k in ks},
            },
            title=title,
            ylabel="score",
        )
        if curve:
            charts["curve"] = curve
        groups = ["all", *sorted(g for g in m if g != "all")]
        k = ks[-1]
        bars = report.grouped_bars(
            report.sibling(out, "-types.png"),
            [f"{g} ({m[g]['n']})" for g in groups],
            {
                f"hit@{k}": [m[g][f"hit@{k}"] for g in groups],
                f"recall@{k}": [m[g][f"recall@{k}"] for g in groups],
            },
            title=f"{title}: by question type",
            ylabel="%",
        )
        if bars:
            charts["types"] = bars
    report.write_markdown(report.sibling(out, ".md"), report_markdown(title, results, charts))
    return charts
