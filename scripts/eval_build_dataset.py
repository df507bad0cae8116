"""Build (or check) eval_data/{en,zh}/ from the hand-written sources in eval_data/src/.

.venv/bin/python scripts/eval_build_dataset.py            # write the files, print counts
.venv/bin/python scripts/eval_build_dataset.py --check    # exit 1 if the files are out of date
.venv/bin/python scripts/eval_build_dataset.py --show en  # each question with its evidence turns
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from memory_bank.evaluation.dataset import build, counts, render  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", default=str(REPO / "eval_data"), help="the eval_data folder")
    ap.add_argument("--check", action="store_true", help="only check that the built files are up to date")
    ap.add_argument("--show", choices=["en", "zh"], help="print every question with its evidence turns")
    args = ap.parse_args()
    root = Path(args.root)
    stale = []
    for lang in ("en", "zh"):
        src = root / "src" / lang
        if not src.is_dir():
            continue
        built = build(src)
        if args.show == lang:
            mem = built["memory"]
            for lab in built["labels"]:
                print(
                    f"\n[{lab['user']} #{lab['qid']} {lab['type']}] {lab['question']}\n  -> {lab['answer']}"
                )
                for e in lab["evidence"]:
                    turn = mem[lab["user"]]["history"][e["date"]][e["turn"]]
                    print(f"  {e['date']}#{e['turn']}: {turn['query']}")
        for name, text in render(built, lang).items():
            path = root / lang / name
            if args.check:
                if not path.is_file() or path.read_text(encoding="utf-8") != text:
                    stale.append(str(path))
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text, encoding="utf-8")
        print(f"{lang}: {json.dumps(counts(built), ensure_ascii=False)}", file=sys.stderr)
    if stale:
        print("out of date (run scripts/eval_build_dataset.py): " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
