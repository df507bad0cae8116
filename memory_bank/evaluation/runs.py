"""Running a retrieval benchmark end to end and writing its results, report and charts.

:func:`run_benchmark` evaluates systems on haystacks (see :mod:`memory_bank.evaluation.benchmark`)
and writes ``OUT.json`` (run metadata, metrics per system, one record per question with the
ranked ids of every system), ``OUT.md`` (tables and charts) and ``OUT-*.png``.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from memory_bank.evaluation import report
from memory_bank.evaluation.benchmark import Haystack, System, evaluate

logger = logging.getLogger(__name__)


def _progress(total: int, desc: str) -> Any:
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="run", disable=None, file=sys.stderr)


def run_benchmark(
    *,
    name: str,
    haystacks: Sequence[Haystack],
    systems: Sequence[System],
    ks: Sequence[int],
    out: str | Path,
    config: Mapping[str, Any],
    primary: str,
    category_names: Mapping[str, str] | None = None,
    dataset: Mapping[str, Any] | None = None,
    notes: Sequence[str] = (),
    system_notes: Mapping[str, str] | None = None,
    extra: Callable[[], Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """Evaluate and write the results; returns the results object (as written to ``out``).

    ``extra`` is called after the run; what it returns is added to the results.
    """
    info = report.run_info(name, config)
    with _progress(len(haystacks), f"{name}: {len(systems)} systems") as bar:
        metrics, ranked = evaluate(haystacks, systems, ks, progress=bar.update)
    questions = []
    for hay in haystacks:
        for p in hay.probes:
            questions.append(
                {
                    "conversation": hay.user,
                    "qid": p.qid,
                    "question": p.question,
                    "category": p.category,
                    "answer": p.answer,
                    "evidence": p.evidence,
                    "evidence_sessions": p.sessions,
                    "retrieved": ranked[primary][hay.user][p.qid],
                    "retrieved_by_system": {s: ranked[s][hay.user][p.qid] for s in ranked if s != primary},
                }
            )
    counts = {
        "haystacks": len(haystacks),
        "turns": sum(len(h.memories) for h in haystacks),
        "questions": sum(len(h.probes) for h in haystacks),
        **(dict(dataset) if dataset else {}),
    }
    results: dict[str, Any] = {
        "run": info,
        "dataset": counts,
        "ks": list(ks),
        "primary": primary,
        "category_names": dict(category_names or {}),
        "systems": metrics,
        "system_config": {s.name: getattr(s, "config", lambda: {})() for s in systems},
        **(dict(extra()) if extra else {}),
        "questions": questions,
    }
    report.write_json(out, results)
    charts = write_charts(out, results, title=name)
    report.write_markdown(
        report.sibling(out, ".md"),
        markdown(results, charts, title=name, notes=notes, system_notes=system_notes or {}),
    )
    return results


def _cats(results: Mapping[str, Any]) -> list[str]:
    groups = {g for m in results["systems"].values() for g in m["turn_recall"] if g != "all"}
    return sorted(groups, key=lambda g: (not g.isdigit(), int(g) if g.isdigit() else 0, g))


def _label(results: Mapping[str, Any], cat: str) -> str:
    name = results.get("category_names", {}).get(cat)
    return f"{cat} {name}" if name else cat


def write_charts(out: str | Path, results: Mapping[str, Any], *, title: str) -> dict[str, Path]:
    systems = results["systems"]
    charts: dict[str, Path] = {}
    for level in ("turn_recall", "session_recall"):
        curves = {
            s: {int(k): v for k, v in m[level].get("all", {}).items()} for s, m in systems.items() if m[level]
        }
        path = report.recall_curves(
            report.sibling(out, f"-{level.replace('_', '-')}.png"),
            curves,
            title=f"{title}: {level.replace('_', ' ')}@k",
            ylabel=level.replace("_", " ") + "@k",
        )
        if path:
            charts[level] = path
    cats = _cats(results)
    k = "10" if 10 in results["ks"] else str(results["ks"][-1])
    if cats:
        series = {
            s: [m["turn_recall"].get(c, {}).get(k, 0.0) for c in ["all", *cats]] for s, m in systems.items()
        }
        path = report.grouped_bars(
            report.sibling(out, "-categories.png"),
            ["all", *[_label(results, c) for c in cats]],
            series,
            title=f"{title}: turn recall@{k} by category",
            ylabel=f"turn recall@{k} (%)",
        )
        if path:
            charts["categories"] = path
    return charts


def markdown(
    results: Mapping[str, Any],
    charts: Mapping[str, Path],
    *,
    title: str,
    notes: Sequence[str] = (),
    system_notes: Mapping[str, str] | None = None,
) -> str:
    ks = [str(k) for k in results["ks"]]
    systems = results["systems"]
    lines = [f"# {title}", ""]
    d = results["dataset"]
    lines.append(
        f"{d['haystacks']} histories, {d['turns']} turns, {d['questions']} questions. "
        f"Primary system: `{results['primary']}`."
    )
    lines += ["", *notes, ""] if notes else [""]
    for level, heading in (("turn_recall", "Turn recall@k (%)"), ("session_recall", "Session recall@k (%)")):
        rows = [[s, *[report.pct(m[level].get("all", {}).get(k)) for k in ks]] for s, m in systems.items()]
        lines += [f"## {heading}", "", report.md_table(["system", *[f"@{k}" for k in ks]], rows), ""]
        if level in charts:
            lines += [f"![{heading}]({charts[level].name})", ""]
    cats = _cats(results)
    if cats:
        k = "10" if 10 in results["ks"] else ks[-1]
        header = ["system", "all", *[_label(results, c) for c in cats]]
        rows = [
            [s, *[report.pct(m["turn_recall"].get(c, {}).get(k)) for c in ["all", *cats]]]
            for s, m in systems.items()
        ]
        first = next(iter(systems.values()))
        rows.append(["questions", first["n"].get("all", 0), *[first["n"].get(c, 0) for c in cats]])
        lines += [f"## Turn recall@{k} by category (%)", "", report.md_table(header, rows), ""]
        if "categories" in charts:
            lines += [f"![by category]({charts['categories'].name})", ""]
    if system_notes:
        lines += ["## Systems", ""] + [f"- `{s}`: {t}" for s, t in system_notes.items()] + [""]
    lines.append(report.md_footer(results["run"]))
    return "\n".join(lines)
