"""The model card (``README.md``) of a published checkpoint, written with huggingface_hub's card classes.

Metadata: base model, training datasets, license, library, pipeline tag, tags, and a model-index with the step's
evaluated metrics. Body: what the model is, the method, the training configuration, the training log at that step,
the evaluation table, provenance, usage and the paper's citation. Nothing in it depends on when it is written.
"""

from __future__ import annotations

from typing import Any

from huggingface_hub import ModelCard, ModelCardData

from corewarding.hub.evals import StepEvals, eval_results
from corewarding.hub.paper import ARXIV_ID, LICENSE, PAPER_TITLE, PAPER_URL, bibtex, method_text
from corewarding.hub.run_source import RunSource

TRAINING_KEYS: list[tuple[str, str | tuple[str, ...]]] = [  # (label, dotted config key or keys)
    ("Backend", "backend"),
    ("Prompts per step", "grpo.train_batch_size"),
    ("Rollouts per prompt (G)", "grpo.n"),
    ("Rollout temperature / top-p", ("grpo.temperature", "grpo.top_p")),
    ("Max prompt / response tokens", ("grpo.max_prompt_length", "grpo.max_response_length")),
    ("Learning rate", "optimizer.lr"),
    ("Weight decay", "optimizer.weight_decay"),
    ("Warm-up ratio", "optimizer.warmup_ratio"),
    ("Gradient clipping", "optimizer.grad_clip"),
    ("PPO clip ratio (low / high)", ("grpo.clip_ratio_low", "grpo.clip_ratio_high")),
    ("KL loss coefficient", "grpo.kl_coef"),
    ("Epochs / planned steps", ("schedule.epochs", "schedule.total_steps")),
    ("Checkpoint every", "schedule.save_freq"),
    ("Answer voting", "vote.canonicalize"),
    ("Teacher EMA (start / end rate)", ("method.teacher.ema.alpha_start", "method.teacher.ema.alpha_end")),
    ("Seed", "seed"),
]
LOG_KEYS = [
    ("reward_mean", "mean reward"),
    ("label_accuracy", "pseudo-label accuracy"),
    ("response_length_mean", "mean response length (tokens)"),
    ("entropy_mean", "mean token entropy"),
]


def training_datasets(source: RunSource) -> list[str]:
    """The Hub datasets the run trained on: the set's source, plus the rephrased release when it trained on it."""
    found = []
    dataset_source = source.get("dataset.source")
    if dataset_source and "/" in str(dataset_source):
        found.append(str(dataset_source))
    views = source.get("method.views") or []
    uses_rephrased = "rephrased" in views or source.get("method.train_on") == "rephrased"
    release = source.get("dataset.rephrased_release")
    if uses_rephrased and release and source.get("dataset.rephrased_source") != "generate":
        found.append(str(release))
    return found


def card_tags(source: RunSource) -> list[str]:
    """Tags: the project, the paper, GRPO, and the cell's method, dataset and base model."""
    tags = ["corewarding", "co-rewarding", "grpo", "reinforcement-learning", "reasoning", f"arxiv:{ARXIV_ID}"]
    tags += [str(source.get("method.hub_name") or source.cell.method).lower(), source.cell.method.replace("_", "-")]
    tags += [f"dataset-{source.cell.dataset}", f"base-{source.cell.base_model}"]
    return list(dict.fromkeys(tags))


def card_data(source: RunSource, repo_id: str, evals: StepEvals) -> ModelCardData:
    results = eval_results(evals.rows)
    return ModelCardData(
        base_model=source.get("base_model.hf_id") or None,
        datasets=training_datasets(source) or None,
        license=LICENSE,
        library_name="transformers",
        pipeline_tag="text-generation",
        tags=card_tags(source),
        model_name=repo_id.split("/")[-1] if results else None,
        eval_results=results or None,
    )


def model_card(source: RunSource, step: int, repo_id: str, evals: StepEvals, provenance: dict[str, Any]) -> ModelCard:
    """The card of ``step`` of a run, to be saved as the repo's ``README.md``."""
    data = card_data(source, repo_id, evals)
    sections = [
        _intro(source, step, repo_id),
        "## Method\n\n" + method_text(source.cell.method, source.get("method.reward")),
        _training(source, step, provenance),
        _evaluation(source, evals),
        _provenance(provenance),
        _usage(repo_id),
        f"## Citation\n\n```bibtex\n{bibtex()}\n```",
    ]
    return ModelCard(f"---\n{data.to_yaml()}\n---\n\n" + "\n\n".join(sections) + "\n")


def _hub_name(source: RunSource, group: str) -> str:
    return str(source.get(f"{group}.hub_name") or getattr(source.cell, group))


def _intro(source: RunSource, step: int, repo_id: str) -> str:
    method, model, dataset = (_hub_name(source, g) for g in ("method", "base_model", "dataset"))
    hf_id = source.get("base_model.hf_id")
    base = (
        f"[`{hf_id}`](https://huggingface.co/{hf_id})"
        if hf_id
        else f"`{source.cell.base_model}`, a model built locally (not on the Hub)"
    )
    total = source.get("schedule.total_steps")
    position = f" of {total} planned" if total else ""
    return (
        f"# {repo_id.split('/')[-1]}\n\n"
        f"**{method}** checkpoint of **{model}** trained with GRPO on **{dataset}**: "
        f"step {step}{position} of the run `{source.cell.cell_id}`.\n\n"
        f"- Base model: {base}\n"
        f"- Method: {method} (`{source.cell.method}`)\n"
        f"- Training set: {dataset} (`{source.cell.dataset}`)\n\n"
        f"It was produced with corewarding, a platform for reproducing *{PAPER_TITLE}* "
        f"([arXiv:{ARXIV_ID}]({PAPER_URL}))."
    )


def _value(source: RunSource, key: str | tuple[str, ...]) -> str | None:
    keys = key if isinstance(key, tuple) else (key,)
    values = [source.get(k) for k in keys]
    if all(v is None for v in values):
        return None
    return " / ".join("–" if v is None else f"`{v}`" for v in values)


def _training(source: RunSource, step: int, provenance: dict[str, Any]) -> str:
    rows = [(label, _value(source, key)) for label, key in TRAINING_KEYS]
    table = "\n".join(f"| {label} | {value} |" for label, value in rows if value is not None)
    text = (
        "## Training\n\n| Setting | Value |\n| --- | --- |\n"
        f"{table}\n\nThe full resolved configuration of the run is `training_config.yaml` in this repository."
    )
    log = provenance.get("training_log") or {}
    shown = [(label, log[key]) for key, label in LOG_KEYS if isinstance(log.get(key), int | float)]
    if shown:
        text += f"\n\nTraining log at step {step} (`training_metrics.jsonl` holds every step up to it): " + ", ".join(
            f"{label} {value:.4g}" for label, value in shown
        )
        if isinstance(log.get("val_accuracy"), int | float):
            text += f"; validation accuracy {log['val_accuracy']:.4g} (at step {log['val_step']})"
        text += "."
    return text


def _percent(value: Any) -> str:
    return "–" if value is None else f"{100 * float(value):.1f}"


def _evaluation(source: RunSource, evals: StepEvals) -> str:
    if not evals.rows:
        note = f"\n\n{evals.stale} row(s) evaluated on other weights were left out." if evals.stale else ""
        return (
            "## Evaluation\n\nThis checkpoint has not been evaluated yet "
            f"(`corewarding evaluate --run {source.cell.cell_id}`).{note}"
        )
    checkers = sorted({str(r["checker"]) for r in evals.rows})
    lines = [
        "## Evaluation\n",
        "Scores in percent from `corewarding evaluate`, with 95% bootstrap confidence intervals over problems. "
        f"Checker used: {', '.join(f'`{c}`' for c in checkers)}. A benchmark is scored with `math_verify` "
        "(symbolic equivalence of the last `\\boxed{}` answer, via Math-Verify) where it has it, else `strict` "
        "(exact match after normalisation); other benchmarks use their own tool. The base model column is the "
        "same evaluation before RL, where it was run. The model-index metadata holds the same values as fractions.\n",
        "| Benchmark | Metric | Checker | Score | 95% CI | Base model | Samples per problem | Problems | Temperature |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in evals.rows:
        base = evals.base.get((str(r["benchmark"]), str(r["checker"]), str(r["metric"])))
        ci = f"{_percent(r.get('ci_low'))}–{_percent(r.get('ci_high'))}" if r.get("ci_low") is not None else "–"
        lines.append(
            f"| {r['benchmark']} | {r['metric']} | {r['checker']} | {_percent(r['value'])} | {ci} | "
            f"{_percent(base['value']) if base else '–'} | {r.get('n') or '–'} | {r.get('num_problems') or '–'} | "
            f"{r.get('temperature') if r.get('temperature') is not None else '–'} |"
        )
    if evals.stale:
        lines.append(f"\n{evals.stale} row(s) evaluated on other weights than these were left out.")
    return "\n".join(lines)


def _provenance(provenance: dict[str, Any]) -> str:
    lines = [
        "## Provenance\n",
        f"- Training code: corewarding `{provenance.get('code_version') or 'unknown'}`",
        f"- Config hash: `{provenance.get('config_hash') or 'unknown'}`",
        f"- Checkpoint: `{provenance['checkpoint']}` (step {provenance['step']})",
        f"- Weights fingerprint (as recorded by the evaluation): `{provenance['weights_fingerprint']}`",
    ]
    data = provenance.get("data_files") or {}
    if data:
        lines.append("\n| Data | File | SHA-256 |\n| --- | --- | --- |")
        lines += [f"| {role} | `{d.get('file')}` | `{d.get('sha256')}` |" for role, d in sorted(data.items())]
    lines.append("\n`provenance.json` holds the same in machine-readable form.")
    return "\n".join(lines)


def _usage(repo_id: str) -> str:
    return (
        "## Usage\n\n```python\nfrom transformers import AutoModelForCausalLM, AutoTokenizer\n\n"
        f'tokenizer = AutoTokenizer.from_pretrained("{repo_id}")\n'
        f'model = AutoModelForCausalLM.from_pretrained("{repo_id}")\n```\n\n'
        "When several checkpoint steps of the run are published, each is on its own branch: pass "
        '`revision="global_step_N"`.'
    )
