"""What forgetting costs, as a curve: share of memories forgotten against recall@10, per setting.

    memorybank eval forgetting --locomo ../shared/data/locomo/locomo_dev.json \
        --paper-data ../shared/data/memorybank_eval --eval-data eval_data \
        --cache-dir runs/cache --out runs/eval/forgetting.json
    memorybank eval locomo --data FILE --forgetting sweep --out OUT.json    # LoCoMo only

Every data set is replayed in date order as in real use (see
:class:`~memory_bank.evaluation.benchmark.MemoryBankSystem`): the clock at each session's day, a
forgetting pass on each day the user comes back, and every incoming utterance first recalls
(reinforces) its top ``recall_k`` memories, as the chatbot does with each message. The questions
are asked at the end (LoCoMo: the last session's day; the paper's sets and ``eval_data/``: the
day after their last day). For each setting (:data:`POINTS`) the run reports turn recall@10
(and @3), the share of turns forgotten, the size of the live index at the end (memories and MB
of vectors) and, with the cold tier on, how often it was consulted. Results are written after
every setting, so an interrupted run resumes (``--resume``); embeddings are cached
(``--cache-dir``) and computed once, before the first setting.

Outputs next to ``OUT.json``: ``OUT.md`` (one table per data set) and ``OUT-tradeoff.png`` (one
panel per data set: x = share forgotten, y = recall@10, one line per family of settings).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from memory_bank.config import PAPER_FORGETTING, SELECTIVE_FORGETTING
from memory_bank.errors import InvalidInputError

logger = logging.getLogger(__name__)

K = 10  # the cut-off of the trade-off curve (recall@10)


@dataclasses.dataclass(frozen=True)
class Point:
    """One forgetting setting of the sweep: a family (a line of the chart) and the overrides of
    :class:`memory_bank.config.ForgettingConfig` (``None``: forgetting off)."""

    name: str
    family: str
    forgetting: dict[str, Any] | None
    recall_k: int = 2


def _threshold(tau: float, **extra: Any) -> dict[str, Any]:
    from memory_bank.config import CALENDAR_ONLY

    return {"mode": "paper", "tau": tau, "policy": "threshold", "threshold": 0.05, **CALENDAR_ONLY, **extra}


def _points() -> list[Point]:
    pts = [
        Point("off", "forgetting off", {"mode": "off"}, 0),
        Point("paper", "paper (tau 1, stochastic)", dict(PAPER_FORGETTING)),
    ]
    for tau in (7, 15, 30, 60, 90):
        pts.append(Point(f"threshold-{tau}", "calendar (threshold 0.05)", _threshold(tau)))
    for tau in (15, 30, 60):
        pts.append(Point(f"weighted-{tau}", "+ content weights", _threshold(tau, content_weights=True)))
    # The cold tier, consulted when the best live score is below ``cold_below`` ("always": on
    # every search, the most it can recover).
    for tau, below in ((7, 1.0), (7, 1.3), (7, 1.6), (7, None), (15, 1.3)):
        pts.append(
            Point(
                f"cold-{tau}-{below or 'always'}",
                f"+ content weights + cold tier (below {below or 'always'})",
                _threshold(
                    tau, content_weights=True, cold_tier=True, cold_below=below or 1e9, cold_rank="separate"
                ),
            )
        )
    # The cold tier ranked in one candidate set with the live memories, forgotten ones less a
    # penalty (``cold_rank: joint``, the bank's default way to rank the cold tier).
    for tau, below, penalty in (
        (7, 1.0, 0.1),
        (7, 1.3, 0.1),
        (7, 1.6, 0.1),
        (7, None, 0.1),
        (7, None, 0.05),
        (5, None, 0.1),
        (3, None, 0.1),
    ):
        pts.append(
            Point(
                f"joint-{tau}-{below or 'always'}-p{penalty:g}",
                f"+ content weights + cold tier ranked jointly (below {below or 'always'})",
                _threshold(
                    tau,
                    content_weights=True,
                    cold_tier=True,
                    cold_below=below or 1e9,
                    cold_rank="joint",
                    cold_penalty=penalty,
                ),
            )
        )
    # The bank's default, exactly as a user gets it (the cold tier on every search, no gate).
    pts.append(Point("default", "the default (SELECTIVE_FORGETTING)", dict(SELECTIVE_FORGETTING)))
    return pts


#: The settings swept, in order (``--points`` picks some by name).
POINTS: tuple[Point, ...] = tuple(_points())


def pick_points(names: str | None) -> list[Point]:
    if not names:
        return list(POINTS)
    by_name = {p.name: p for p in POINTS}
    wanted = [n.strip() for n in names.split(",") if n.strip()]
    unknown = [n for n in wanted if n not in by_name]
    if unknown:
        raise InvalidInputError(f"unknown sweep point(s) {unknown}; use some of {', '.join(by_name)}")
    if "off" not in wanted:
        wanted.insert(0, "off")  # the reference every other point is compared with
    return [by_name[n] for n in wanted]


# -- data sets ----------------------------------------------------------------------------------
@dataclasses.dataclass
class DataSet:
    name: str
    language: str
    haystacks: list[Any]


def paper_haystacks(memory_file: str | Path, labels_file: str | Path) -> list[Any]:
    """A memory file in the original format with our labels (the paper's sets, ``eval_data/``)
    as haystacks: one per user, a turn's id ``DATE#TURN``, its session its day; the labelled
    questions (not those about things that never happened) asked the day after the last day."""
    from memory_bank.evaluation.benchmark import Haystack, Probe
    from memory_bank.evaluation.paper import default_now, load_labels
    from memory_bank.original_format import load_memory_file, user_memories
    from memory_bank.records import MemoryKind

    data = load_memory_file(memory_file)
    labels = load_labels(labels_file)
    now = default_now(data)
    hays = []
    for key, record in data.items():
        user = key.strip()
        mems, _ = user_memories(user, record)
        turns = [m for m in mems if m.kind is MemoryKind.TURN and m.text.strip()]
        for m in turns:
            m.extra = {**m.extra, "id": f"{m.date}#{m.turn}", "session": m.date}
        probes = [
            Probe(
                qid=str(q.qid),
                question=q.question,
                category=q.type or "untyped",
                evidence=[f"{d}#{t}" for d, t in q.evidence],
                sessions=sorted({d for d, _ in q.evidence}),
            )
            for (u, _), q in sorted(labels.items())
            if u == user and q.evidence
        ]
        if turns and probes:
            hays.append(Haystack(user, turns, probes, now))
    return hays


def data_sets(args: argparse.Namespace) -> list[DataSet]:
    """The data sets named on the command line (each missing file is a clear error)."""
    from memory_bank.evaluation.locomo import haystack, load_locomo

    sets: list[DataSet] = []
    if args.locomo:
        sets.append(DataSet("LoCoMo dev", "en", [haystack(c) for c in load_locomo(args.locomo)]))
    labels = Path(args.eval_data) if args.eval_data else None
    if args.paper_data:
        if labels is None:
            raise InvalidInputError(
                "--paper-data needs --eval-data (our labels are in eval_data/paper_labels)"
            )
        root = Path(args.paper_data)
        for lang, sub in (("en", "en"), ("zh", "cn")):
            mem = root / sub / f"memory_bank_{sub}.json"
            lab = labels / "paper_labels" / f"probing_labels_{lang}.jsonl"
            sets.append(DataSet(f"paper {lang}", lang, paper_haystacks(mem, lab)))
    if labels is not None:
        for lang in ("en", "zh"):
            mem = labels / lang / f"memories_{lang}.json"
            lab = labels / lang / f"labels_{lang}.jsonl"
            sets.append(DataSet(f"eval_data {lang}", lang, paper_haystacks(mem, lab)))
    if not sets:
        raise InvalidInputError(
            "no data set given; pass --locomo FILE, --eval-data DIR and/or --paper-data DIR"
        )
    return sets


# -- running ------------------------------------------------------------------------------------
def prewarm(encoder: Any, hays: Sequence[Any]) -> None:
    """Embed, once, every text a replay will ask for (stored turns, utterances used as queries,
    questions), so each setting only reads the cache."""
    from memory_bank.records import index_text

    texts: list[str] = []
    for h in hays:
        texts += [index_text(m.text, m.context) for m in h.memories]
        texts += [m.text for m in h.memories]
        texts += [p.question for p in h.probes]
    save = getattr(encoder, "save", None)  # a CachingEncoder keeps what it computed
    for start in range(0, len(texts), 2048):
        encoder.encode(texts[start : start + 2048])
        if save:
            save()


def run_point(ds: DataSet, point: Point, encoder: Any) -> dict[str, Any]:
    """Replay ``ds`` under one setting; recall, share forgotten and live index size."""
    from memory_bank.evaluation.benchmark import MemoryBankSystem, evaluate

    system = MemoryBankSystem(
        encoder,
        name=point.name,
        language=ds.language,
        forgetting=point.forgetting,
        replay=True,
        recall_k=point.recall_k,
    )
    t0 = time.perf_counter()
    metrics, _ = evaluate(ds.haystacks, [system], [3, K])
    st = system.stats
    live = st.memories - st.forgotten
    return {
        "point": point.name,
        "family": point.family,
        "forgetting": point.forgetting,
        "recall_k": point.recall_k,
        "recall_at_10": metrics[point.name]["turn_recall"]["all"][str(K)],
        "recall_at_3": metrics[point.name]["turn_recall"]["all"]["3"],
        "turns": st.memories,
        "forgotten": st.forgotten,
        "share_forgotten": round(st.forgotten / st.memories, 4) if st.memories else 0.0,
        "live_memories": live,
        "live_index_mb": round(live * encoder.dim * 4 / 2**20, 3),
        "questions": metrics[point.name]["n"].get("all", 0),
        "cold_consulted": st.cold_consulted,
        "searches": st.searches,
        "seconds": round(time.perf_counter() - t0, 1),
    }


def sweep(
    sets: Sequence[DataSet],
    points: Sequence[Point],
    encoder_for: Callable[[str], Any],
    out: str | Path,
    *,
    run: dict[str, Any],
    resume: bool = False,
) -> dict[str, Any]:
    """Run every point on every data set, writing ``out`` (and its report) after each one."""
    from memory_bank.evaluation import report

    results: dict[str, Any] = {"run": run, "sets": {}}
    if resume and Path(out).is_file():
        results["sets"] = json.loads(Path(out).read_text(encoding="utf-8")).get("sets", {})
    for ds in sets:
        enc = encoder_for(ds.language)
        prewarm(enc, ds.haystacks)
        rows = results["sets"].setdefault(ds.name, {"language": ds.language, "encoder": enc.name, "rows": []})
        done = {r["point"] for r in rows["rows"]}
        for point in points:
            if point.name in done:
                continue
            row = run_point(ds, point, enc)
            rows["rows"].append(row)
            print(
                f"{ds.name:14s} {point.name:14s} recall@10 {100 * row['recall_at_10']:5.1f}  "
                f"forgot {100 * row['share_forgotten']:4.1f}%  live {row['live_memories']}  "
                f"({row['seconds']} s)",
                flush=True,
            )
            report.write_json(out, results)
            write_report(out, results)
    return results


# -- reporting ----------------------------------------------------------------------------------
def best_point(rows: Sequence[dict[str, Any]], *, max_drop: float = 0.02) -> dict[str, Any] | None:
    """The setting forgetting the largest share while keeping recall@10 within ``max_drop`` of off."""
    off = next((r for r in rows if r["point"] == "off"), None)
    if off is None:
        return None
    ok = [r for r in rows if r["point"] != "off" and r["recall_at_10"] >= off["recall_at_10"] - max_drop]
    return max(ok, key=lambda r: (r["share_forgotten"], r["recall_at_10"]), default=None)


def write_report(out: str | Path, results: dict[str, Any]) -> None:
    from memory_bank.evaluation import report

    chart = tradeoff_chart(report.sibling(out, "-tradeoff.png"), results["sets"])
    lines = ["# Forgetting: share forgotten against turn recall@10 (replayed in date order)", ""]
    lines.append(
        "Each utterance recalls (reinforces) its top `recall_k` memories before it is stored; a "
        "forgetting pass runs on each session day; the questions are asked at the end. "
        "`threshold` archives a memory when R = exp(-t / (tau * S)) < 0.05; content weights scale "
        "tau per turn (small talk 0.25, chat 1, personal 2); the cold tier searches archived "
        "memories when the live ones match poorly."
    )
    lines.append("")
    for name, ds in results["sets"].items():
        off = next((r for r in ds["rows"] if r["point"] == "off"), None)
        lines += [f"## {name} ({ds['encoder']})", ""]
        lines.append(
            report.md_table(
                [
                    "setting",
                    "recall_k",
                    "recall@10",
                    "vs off",
                    "recall@3",
                    "forgotten",
                    "live index",
                    "cold used",
                ],
                [
                    [
                        r["point"],
                        r["recall_k"],
                        report.pct(r["recall_at_10"]),
                        f"{100 * (r['recall_at_10'] - off['recall_at_10']):+.1f}" if off else "",
                        report.pct(r["recall_at_3"]),
                        f"{100 * r['share_forgotten']:.1f}% ({r['forgotten']} of {r['turns']})",
                        f"{r['live_memories']} ({r['live_index_mb']:.2f} MB)",
                        f"{r['cold_consulted']} of {r['searches']}" if r.get("cold_consulted") else "",
                    ]
                    for r in ds["rows"]
                ],
            )
        )
        best = best_point(ds["rows"])
        if best:
            lines += [
                "",
                f"Largest share forgotten within 2 points of off: **{best['point']}**, "
                f"{100 * best['share_forgotten']:.1f}% forgotten, recall@10 {report.pct(best['recall_at_10'])}.",
            ]
        lines.append("")
    if chart:
        lines += [f"![trade-off]({chart.name})", ""]
    lines.append(report.md_footer(results["run"]))
    report.write_markdown(report.sibling(out, ".md"), "\n".join(lines))


def tradeoff_chart(path: Path, sets: dict[str, Any]) -> Path | None:
    """One panel per data set: share forgotten (x) against recall@10 (y), a line per family."""
    from memory_bank.evaluation.report import _pyplot

    plt = _pyplot()
    if plt is None or not sets:
        return None
    n = len(sets)
    fig, axes = plt.subplots(1, n, figsize=(4.2 * n + 3.6, 4), dpi=110, squeeze=False)
    # One colour and marker per family, the same in every panel (more families than tab10 has).
    names = list(dict.fromkeys(r["family"] for ds in sets.values() for r in ds["rows"]))
    colours = plt.get_cmap("tab20")
    markers = "so^vD<>pP*Xhd"
    for ax, (name, ds) in zip(axes[0], sets.items(), strict=True):
        families: dict[str, list[dict[str, Any]]] = {}
        for r in ds["rows"]:
            families.setdefault(r["family"], []).append(r)
        for fam, rows in families.items():
            rows = sorted(rows, key=lambda r: r["share_forgotten"])
            i = names.index(fam)
            ax.plot(
                [100 * r["share_forgotten"] for r in rows],
                [100 * r["recall_at_10"] for r in rows],
                marker=markers[i % len(markers)],
                color=colours(i % 20),
                linestyle="-" if len(rows) > 1 else "none",
                label=fam,
            )
        off = next((r for r in ds["rows"] if r["point"] == "off"), None)
        if off:
            ax.axhline(100 * off["recall_at_10"] - 2, color="grey", linestyle=":", linewidth=1)
        ax.axvline(30, color="grey", linestyle=":", linewidth=1)
        ax.set_xlim(-2, 102)
        ax.set_ylim(0, 100)
        ax.set_xlabel("turns forgotten (%)")
        ax.set_ylabel("turn recall@10 (%)")
        ax.set_title(name)
        ax.grid(True, alpha=0.3)
    axes[0][-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


# -- command line -------------------------------------------------------------------------------
def add_sweep_parser(
    evsub: argparse._SubParsersAction, common: Callable[[argparse.ArgumentParser], None]
) -> None:
    p = evsub.add_parser(
        "forgetting",
        help="forgetting sweep: share forgotten vs recall@10 on LoCoMo, the paper's sets, eval_data/",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--locomo", help="LoCoMo JSON file (e.g. ../shared/data/locomo/locomo_dev.json)")
    p.add_argument("--paper-data", help="the paper's data folder (en/memory_bank_en.json, cn/...)")
    p.add_argument("--eval-data", help="our eval_data/ folder (its sets and the paper's labels)")
    sweep_args(p)
    p.add_argument("--cache-dir", help="keep embeddings here between runs")
    common(p)


def sweep_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--points",
        help=f"settings to run, comma-separated (default all: {', '.join(x.name for x in POINTS)})",
    )
    p.add_argument(
        "--resume", action="store_true", help="keep the settings already in --out and run the rest"
    )


def run_sweep_command(args: argparse.Namespace, sets: list[DataSet] | None = None) -> int:
    from memory_bank.evaluation import report
    from memory_bank.evaluation.encoders import eval_encoder

    points = pick_points(args.points)
    sets = sets if sets is not None else data_sets(args)
    encoders: dict[str, Any] = {}

    def encoder_for(language: str) -> Any:
        if language not in encoders:
            encoders[language] = eval_encoder(
                args.encoder if language == "en" else None, language, args.cache_dir
            )
        return encoders[language]

    run = report.run_info("eval forgetting", vars(args))
    results = sweep(sets, points, encoder_for, args.out, run=run, resume=args.resume)
    for name, ds in results["sets"].items():
        best = best_point(ds["rows"])
        if best:
            print(
                f"{name}: best within 2 points of off: {best['point']} ({100 * best['share_forgotten']:.1f}% forgotten)"
            )
    print(f"report: {report.sibling(args.out, '.md')}", file=sys.stderr)
    return 0


def locomo_sweep(args: argparse.Namespace) -> int:
    """``memorybank eval locomo --forgetting sweep``: the sweep on the ``--data`` file only."""
    from memory_bank.evaluation.locomo import haystack, load_locomo

    convs = load_locomo(args.data)
    if args.conversations:
        wanted = {c.strip() for c in args.conversations.split(",")}
        convs = [c for c in convs if c.sample_id in wanted]
        if not convs:
            raise InvalidInputError(f"no conversation in {args.data} has an id among {sorted(wanted)}")
    return run_sweep_command(args, [DataSet("LoCoMo", "en", [haystack(c) for c in convs])])
