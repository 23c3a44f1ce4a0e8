"""The dataset card (``README.md``) of a published rephrased training set, with huggingface_hub's card classes.

Metadata: license, task category, language, size, tags, source dataset, and one viewer configuration per file.
Body: what the set is, its files, how the rephrasings were made (from the rephrase report and the set's configured
rephraser), their quality, provenance, usage and the paper's citation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from huggingface_hub import DatasetCard, DatasetCardData

from corewarding.hub.paper import ARXIV_ID, LICENSE, PAPER_TITLE, PAPER_URL, bibtex

CONFIGS = [  # (viewer configuration, file, what it holds)
    ("pairs", "train_pairs.parquet", "one row per question: the original and the rephrased question, the answer"),
    ("original", "train_original.parquet", "the original questions in verl's training format"),
    ("rephrased", "train_rephrased.parquet", "the rephrased questions, aligned row for row with `original`"),
]
GENERATION_KEYS = ("model", "backend", "temperature", "top_p", "max_new_tokens", "enable_thinking", "seed")
SIZES = [(1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M")]


@dataclass(frozen=True)
class SetFacts:
    """What the card reports about a set, gathered by ``dataset_folder``."""

    name: str
    hub_name: str
    source: str | None  # the set's Hub id
    rows: int
    columns: list[str]
    files: dict[str, dict[str, Any]]  # published file -> size and sha256
    report: dict[str, Any]  # the rephrase (or import) quality report; empty when absent
    rephraser: str | None  # the set's configured rephraser (configs/rephrase/NAME.yaml)
    settings: dict[str, Any]  # that rephraser's settings


def size_category(rows: int) -> str:
    return next((label for limit, label in SIZES if rows < limit), "n>1M")


def card_data(facts: SetFacts) -> DatasetCardData:
    present = [(name, file) for name, file, _ in CONFIGS if file in facts.files]
    configs = [
        {"config_name": name, "data_files": [{"split": "train", "path": file}], **({"default": True} if i == 0 else {})}
        for i, (name, file) in enumerate(present)
    ]
    return DatasetCardData(
        license=LICENSE,
        language=["en"],
        task_categories=["text-generation"],
        size_categories=[size_category(facts.rows)],
        pretty_name=f"Co-rewarding rephrased {facts.hub_name}",
        source_datasets=[facts.source] if facts.source else None,
        tags=["corewarding", "co-rewarding", "rephrasing", "math", "reasoning", f"arxiv:{ARXIV_ID}"],
        configs=configs,
    )


def dataset_card(facts: SetFacts, repo_id: str) -> DatasetCard:
    """The card of a rephrased set, to be saved as the dataset repo's ``README.md``."""
    sections = [
        _intro(facts, repo_id),
        _files(facts),
        _rephrasing(facts),
        _quality(facts.report),
        _provenance(facts),
        f'## Usage\n\n```python\nfrom datasets import load_dataset\n\npairs = load_dataset("{repo_id}", "pairs", '
        'split="train")\n```',
        f"## Citation\n\n```bibtex\n{bibtex()}\n```",
    ]
    return DatasetCard(f"---\n{card_data(facts).to_yaml()}\n---\n\n" + "\n\n".join(s for s in sections if s) + "\n")


def _intro(facts: SetFacts, repo_id: str) -> str:
    source = f" (`{facts.source}`)" if facts.source else ""
    return (
        f"# {repo_id.split('/')[-1]}\n\n"
        f"The {facts.rows} training questions of **{facts.hub_name}**{source}, each paired with a rephrased copy "
        "that asks the same thing and keeps the answer. Co-rewarding-I trains on both copies and rewards each with "
        f"the majority answer of the other (*{PAPER_TITLE}*, [arXiv:{ARXIV_ID}]({PAPER_URL})). Built with "
        f"corewarding from the set `{facts.name}`.\n\nThe original questions keep the license of their source "
        "dataset."
    )


def _files(facts: SetFacts) -> str:
    lines = ["## Files\n", "| File | Holds |", "| --- | --- |"]
    for _, file, what in CONFIGS:
        if file in facts.files:
            lines.append(f"| `{file}` | {what} |")
    for file in sorted(f for f in facts.files if f.endswith(".quality.json")):
        lines.append(f"| `{file}` | the quality report of the step that wrote it |")
    lines.append(f"\nColumns of `train_pairs.parquet`: {', '.join(f'`{c}`' for c in facts.columns)}.")
    return "\n".join(lines)


def _rephrasing(facts: SetFacts) -> str:
    report = facts.report
    stage = report.get("stage")
    if stage == "import-rephrased":
        return (
            "## How the rephrasings were made\n\n"
            f"Imported from the released rephrasings `{report.get('source')}` with `corewarding data import-rephrased "
            f"{facts.name}`, then checked with the same row validation as prepared data and the same rewrite checks "
            "as generated rephrasings."
        )
    if stage != "rephrase":
        return "## How the rephrasings were made\n\nNo rephrase report was found beside the data."
    text = (
        "## How the rephrasings were made\n\n"
        f"Generated with `corewarding data rephrase {facts.name}`: model `{report.get('model')}` "
        f"(backend `{report.get('backend')}`), {report.get('generations')} generations for {report.get('rows_in')} "
        "questions. A rewrite is accepted when it holds the answer markers in order, is neither the template "
        "placeholder, empty nor the original question, and keeps the question's numbers; a rejected question is "
        f"generated again with a new seed. Questions still rejected: `on_failure={report.get('on_failure')}` "
        "(`keep_original`: the original stands in as its own rephrasing)."
    )
    recorded = (str(report.get("model")), str(report.get("backend")))
    if facts.settings and recorded == (str(facts.settings.get("model")), str(facts.settings.get("backend"))):
        rows = "\n".join(f"| {k} | `{facts.settings[k]}` |" for k in GENERATION_KEYS if k in facts.settings)
        text += (
            f"\n\nSettings of the set's rephraser (`configs/rephrase/{facts.rephraser}.yaml`), whose model and "
            f"backend the report records:\n\n| Setting | Value |\n| --- | --- |\n{rows}"
        )
    return text


def _counts(title: str, counts: Any) -> str:
    if not isinstance(counts, dict) or not counts:
        return ""
    return f"\n\n{title}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))


def _quality(report: dict[str, Any]) -> str:
    if not report:
        return ""
    text = f"## Quality\n\nRows in {report.get('rows_in')}, rows out {report.get('rows_out')}."
    text += _counts("Dropped, by reason", report.get("dropped"))
    text += _counts("Flagged (kept), by reason", report.get("flagged"))
    text += _counts("Rephrasings rejected after every retry, by reason", report.get("rejected"))
    return text


def _provenance(facts: SetFacts) -> str:
    lines = ["## Provenance\n", "| File | Bytes | SHA-256 |", "| --- | --- | --- |"]
    lines += [f"| `{f}` | {m['size']} | `{m['sha256']}` |" for f, m in sorted(facts.files.items())]
    return "\n".join(lines)
