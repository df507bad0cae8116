"""Our labelled set (eval_data/): built files match the sources, sizes, label sanity, parser errors."""

from __future__ import annotations

import json

import pytest

from memory_bank.errors import InvalidInputError
from memory_bank.evaluation.dataset import build, counts, parse_user, render
from memory_bank.evaluation.paper import attach_labels, load_labels, load_questions
from memory_bank.original_format import load_memory_file
from tests.conftest import REPO

DATA = REPO / "eval_data"


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_built_files_are_up_to_date(lang) -> None:  # type: ignore[no-untyped-def]
    for name, text in render(build(DATA / "src" / lang), lang).items():
        assert (DATA / lang / name).read_text(encoding="utf-8") == text, (
            f"eval_data/{lang}/{name} is out of date: run scripts/eval_build_dataset.py"
        )


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_size_and_labels(lang) -> None:  # type: ignore[no-untyped-def]
    built = build(DATA / "src" / lang)
    c = counts(built)
    assert c["users"] == 6 and c["days"] == 30
    assert c["turns_per_day"][0] >= 4 and c["turns_per_day"][1] <= 8
    per_user: dict[str, list[dict]] = {}
    for lab in built["labels"]:
        per_user.setdefault(lab["user"], []).append(lab)
    for user, labs in per_user.items():
        assert 8 <= len(labs) <= 10, user
        assert {"single", "multi", "absent"} <= {lab["type"] for lab in labs}, user
    assert c["types"]["date"] >= 6
    # The files load with the paper's loaders (same formats as the paper's data and our labels).
    data = load_memory_file(DATA / lang / f"memories_{lang}.json")
    qs = attach_labels(
        load_questions(DATA / lang / f"questions_{lang}.jsonl"),
        load_labels(DATA / lang / f"labels_{lang}.jsonl"),
    )
    assert len(qs) == c["questions"] and set(data) == set(per_user)
    for q in qs:
        for day, turn in q.evidence:
            assert data[q.user]["history"][day][turn]["query"]


def test_label_format_matches_paper_labels() -> None:
    ours = json.loads((DATA / "en" / "labels_en.jsonl").read_text(encoding="utf-8").splitlines()[0])
    paper = json.loads(
        (DATA / "paper_labels" / "probing_labels_en.jsonl").read_text(encoding="utf-8").splitlines()[0]
    )
    assert list(ours) == list(paper)
    assert list(ours["evidence"][0]) == list(paper["evidence"][0])


def test_the_heap_sort_question_is_answered_no() -> None:
    labels = [
        json.loads(line)
        for line in (DATA / "en" / "labels_en.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    (heap,) = [lab for lab in labels if lab["question"] == "Did we write a heap sort together?"]
    assert heap["type"] == "absent" and heap["evidence"] == [] and heap["answer"].startswith("No")


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("## 2024-01-01\nU: hi\nA: hello\n", "missing '# user"),
        ("# user: X\nU: hi\n", "before the first"),
        ("# user: X\n## 2024-01-01\nA: hello\n", "without a 'U:'"),
        (
            "# user: X\n## 2024-01-01\nU: hi\n### questions\nQ: ?\nA: a\nT: single\nE: 2024-01-01#3\n",
            "names no turn",
        ),
        (
            "# user: X\n## 2024-01-01\nU: hi\n### questions\nQ: ?\nA: a\nT: absent\nE: 2024-01-01#0\n",
            "absent",
        ),
        ("# user: X\n## 2024-01-01\nU: hi\n### questions\nQ: ?\nA: a\nT: weird\n", "type must be"),
        ("# user: X\n## May 1\nU: hi\n", "YYYY-MM-DD"),
    ],
)
def test_parser_errors_name_the_line(tmp_path, text, error) -> None:  # type: ignore[no-untyped-def]
    p = tmp_path / "u.txt"
    p.write_text(text, encoding="utf-8")
    with pytest.raises(InvalidInputError, match=error):
        parse_user(p)
