"""What ``corewarding --help`` says: every command in its group, the internal ones apart, and an example per group."""

from __future__ import annotations

import argparse

# (group, commands): what a researcher runs, in the order of the work.
USER_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("data", ("data",)),
    ("training", ("train", "demo", "checkpoint", "config", "matrix", "rewards")),
    ("evaluation", ("evaluate", "audit")),
    ("results", ("results", "report", "claims", "dashboard")),
    ("publishing", ("publish", "publish-data")),
    ("orchestration", ("pipeline", "deploy", "worker", "pool-key")),
)
# What the pipeline's own parts call: the DVC stages in dvc.yaml.
INTERNAL = ("cell",)

EXAMPLES: dict[str, tuple[str, ...]] = {
    "train": (
        "corewarding train method=co_rewarding_1 base_model=tiny dataset=tiny",
        "corewarding train method=co_rewarding_2 base_model=qwen3-8b-base dataset=math backend=verl --dry-run",
    ),
    "demo": ("corewarding demo", "corewarding demo schedule.total_steps=2"),
    "checkpoint": ("corewarding checkpoint merge co_rewarding_2__qwen3-8b-base__math --step 40",),
    "config": (
        "corewarding config show method=co_rewarding_1 dataset=math",
        "corewarding config show co_rewarding_2__qwen3-8b-base__math --verl",
        "corewarding config snapshot --check",
    ),
    "matrix": ("corewarding matrix list --matrix paper",),
    "rewards": ("corewarding rewards score --method majority_voting --input rollouts.jsonl --output rewarded.jsonl",),
    "evaluate": ("corewarding evaluate --run runs/gt_grpo__tiny__tiny --benchmarks math500 benchmark.limit=20",),
    "audit": (
        "corewarding audit --matrix paper_v3 --dry-run",
        "corewarding audit --matrix paper_v3 --cell gt_grpo__qwen3-4b-base__math --benchmarks math500",
    ),
    "results": (
        "corewarding results ingest --runs runs",
        "corewarding results info",
        "corewarding results synthetic --out /tmp/preview",
        "corewarding results synthetic --out /tmp/preview --matrix paper_v3 --matrix paper_v3_seeds",
        "corewarding results forget-synthetic",
    ),
    "report": ("corewarding report --matrix paper --out report.html",),
    "claims": ("corewarding claims", "corewarding claims --checker strict --json"),
    "dashboard": ("corewarding dashboard --port 8501",),
    "publish": ("corewarding publish runs/gt_grpo__tiny__tiny --out /tmp/publish",),
    "publish-data": ("corewarding publish-data math --out /tmp/publish-data",),
    "pipeline": (
        "corewarding pipeline run --matrix demo",
        "corewarding pipeline run --matrix demo --method gt_grpo,co_rewarding_1",
        "corewarding pipeline run --matrix paper_v3 --dry-run",
        "corewarding pipeline run --matrix paper_v3 --dry-run --json",
        "corewarding pipeline cells --matrix paper --method gt_grpo",
    ),
    "cell": ("corewarding cell train gt_grpo__tiny__tiny --matrix demo",),
    "worker": ("corewarding worker --pool gpu --limit 1 --store /mnt/shared/corewarding",),
    "deploy": ("corewarding deploy --work-pool gpu",),
    "pool-key": ("corewarding pool-key create ~/.config/corewarding/pool.key",),
}

GROUP_OVERRIDES = "method=co_rewarding_2 base_model=qwen3-8b-base dataset=math backend=verl"
KEY_OVERRIDES = "optimizer.lr=1e-6 schedule.total_steps=2 seed=1 verl.nnodes=2"
NEW_KEY_OVERRIDE = "+note=first-try"
TRAIN_OVERRIDES = f"""\
overrides: Hydra's key=value over configs/ (configs/config.yaml and its groups):
  pick a group's file:      {GROUP_OVERRIDES}
                            (configs/method/, configs/base_model/, configs/dataset/ ...)
  set any key:              {KEY_OVERRIDES}
  add a key the config lacks: {NEW_KEY_OVERRIDE}
                            (at the top: each section's typed schema refuses a key it does not know;
                            verl's own keys go in verl.overrides='[key=value]')
A wrong key or value fails in a second, naming it, before anything is loaded. --dry-run composes and validates
only: the local backend says the config is valid; backend=verl prints the cell's GPU, host-memory and disk estimate
and a JSON line of its validated verl launch (no GPU needed)."""


def overview() -> str:
    """The top-level epilog: every command in its group, the internal ones under their own heading."""
    width = max(len(name) for _, names in USER_GROUPS for name in names)
    lines = ["commands by what they do:"]
    for group, names in USER_GROUPS:
        lines.append(f"  {group + ':':15s}{', '.join(names)}")
    lines += [
        "",
        "internal commands (called by the DVC stages in dvc.yaml):",
        f"  {'cell':{width}s}  one step of one matrix cell (what `dvc repro` runs)",
        "",
        "start here: make demo (the CPU pipeline), then `corewarding dashboard`; each command's --help has examples.",
    ]
    return "\n".join(lines)


def attach_examples(commands: dict[str, argparse.ArgumentParser]) -> None:
    """Give each command's parser an example epilog (kept after any epilog it has); ``train`` also explains
    overrides. A command's sub-commands (``pipeline run``, ``results synthetic``) get the group's examples of their
    own. A command with no group or no example is a programming error, caught by the tests."""
    grouped = {name for _, names in USER_GROUPS for name in names} | set(INTERNAL)
    has_examples = {name for name, parser in commands.items() if "examples:" in (parser.epilog or "")}
    missing = sorted(set(commands) - grouped) + sorted(set(commands) - set(EXAMPLES) - has_examples)
    if missing:
        raise RuntimeError(f"commands without a help group or example: {', '.join(missing)}")
    for name, parser in commands.items():
        parts = [parser.epilog] if parser.epilog else []
        if name == "train":
            parts.append(TRAIN_OVERRIDES)
        if name not in has_examples:
            parts.append("examples:\n" + "\n".join(f"  {line}" for line in EXAMPLES[name]))
        parser.epilog = "\n\n".join(parts)
        parser.formatter_class = argparse.RawDescriptionHelpFormatter
        for action, sub_parser in sub_commands(parser).items():
            _add_examples(sub_parser, [line for line in EXAMPLES.get(name, ()) if line.split()[2:3] == [action]])


def sub_commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """A command's own sub-commands by name (``run`` and ``cells`` of ``pipeline``); none for most."""
    found: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found.update(action.choices)
    return found


def _add_examples(parser: argparse.ArgumentParser, lines: list[str]) -> None:
    """Append ``lines`` as the parser's examples, after any epilog it has; nothing when there are none."""
    if not lines or "examples:" in (parser.epilog or ""):
        return
    parts = [parser.epilog] if parser.epilog else []
    parts.append("examples:\n" + "\n".join(f"  {line}" for line in lines))
    parser.epilog = "\n\n".join(parts)
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
