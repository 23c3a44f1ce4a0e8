"""``corewarding data ...``: prepare, rephrase and import-rephrased, each composing configs/data.yaml; track lists a
set's DVC stages."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from corewarding.config import ConfigError, compose_config, load_group_option
from corewarding.pipeline.dvc import DVC_PARAMS, add_data_stages, is_dvc_repo, set_stages
from corewarding.schemas import DatasetConfig, section_of
from corewarding.tiny.data import write_tiny_dataset

DATA_EXAMPLES = """examples:
  corewarding data prepare tiny
  corewarding data prepare math500 datasource.local_file=../shared/data/benchmarks/math500/test.jsonl
  corewarding data rephrase tiny
  corewarding data import-rephrased math --pairs ../shared/data/upstream/math/train_pairs.parquet
  corewarding data track math && dvc repro import_rephrased@math   # DVC knows a set's stages once listed
"""


def _compose(name: str, overrides: list[str], rephrase: str | None = None) -> Any:
    extra = [f"rephrase={rephrase}"] if rephrase else []
    return compose_config([f"datasource={name}", *extra, *overrides], config_name="data")


def _print_report(report: Any) -> None:
    """One summary line (stderr) and the counts as JSON (stdout); the per-row lists stay in the report file."""
    from corewarding.data.prepare import report_path  # pyarrow: imported when used

    print(report.summary(), file=sys.stderr)
    brief = report.brief(str(report_path(Path(report.output))))
    print(json.dumps(brief, indent=2, ensure_ascii=False, default=str))


def _prepare(args: argparse.Namespace) -> int:
    cfg = _compose(args.name, args.overrides)  # config errors come before the heavy imports
    from corewarding.data.prepare import prepare  # pyarrow: imported when used

    _print_report(prepare(cfg))
    return 0


def _rephrase(args: argparse.Namespace) -> int:
    rephraser = None
    if not any(o.startswith("rephrase=") for o in args.overrides):
        try:
            rephraser = load_group_option("datasource", args.name).datasource.get("rephraser")
        except KeyError as exc:
            print(f"error: {exc.args[0]}", file=sys.stderr)
            return 2
        if not rephraser:
            print(f"error: datasource {args.name} names no rephraser; pass rephrase=NAME", file=sys.stderr)
            return 2
    cfg = _compose(args.name, args.overrides, rephrase=rephraser)
    from corewarding.data.rephrase.run import rephrase  # transformers: imported when used

    _print_report(rephrase(cfg))
    return 0


def _import(args: argparse.Namespace) -> int:
    if bool(args.original) != bool(args.rewrite):
        print("error: --original and --rewrite go together", file=sys.stderr)
        return 2
    cfg = _compose(args.name, args.overrides, rephrase="release")
    from corewarding.data.rephrase.importer import import_rephrased  # pyarrow: imported when used

    _print_report(import_rephrased(cfg, args.pairs, args.original, args.rewrite))
    return 0


def _tiny(args: argparse.Namespace) -> int:
    dataset = section_of(compose_config(["dataset=tiny", *args.overrides]), DatasetConfig)
    if dataset.tiny is None:
        raise ConfigError("dataset.tiny: missing (n_train, n_test, seed of the generated set)")
    paths = write_tiny_dataset(Path(dataset.train_files).parent, **asdict(dataset.tiny))
    print(json.dumps({name: str(path) for name, path in paths.items()}))
    return 0


def _track(args: argparse.Namespace) -> int:
    if not is_dvc_repo(Path.cwd()):
        print(f"error: {Path.cwd()} is not the checkout's root (no .dvc/ and dvc.yaml here)", file=sys.stderr)
        return 2
    stages = [stage for name in args.names for stage in set_stages(name)]  # an unknown set: DvcError, one line
    changed = add_data_stages(Path(DVC_PARAMS), stages)
    print(f"{DVC_PARAMS}: {'listed' if changed else 'already lists'} {', '.join(stages)}")
    return 0


def add_subcommands(sub: Any) -> None:
    """Register ``data prepare|rephrase|import-rephrased`` on the top-level subparsers."""
    data = sub.add_parser(
        "data",
        help="prepare, validate and rephrase data sets (configs/datasource/NAME.yaml)",
        epilog=DATA_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    ).add_subparsers(dest="action", required=True)
    for action, func, text in (
        ("prepare", _prepare, "source -> validated verl parquet + quality report (JSON)"),
        ("rephrase", _rephrase, "rephrase a prepared set with an LLM (rephrase=... picks the backend)"),
    ):
        parser = data.add_parser(action, help=text)
        parser.add_argument("name", help="a datasource: math, dapo14k, openrs, amc_ttt, math500, ..., tiny")
        parser.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. datasource.local_file=PATH")
        parser.set_defaults(func=func)
    imp = data.add_parser("import-rephrased", help="a released rephrasing -> the same aligned outputs, checked")
    imp.add_argument("name", help="math, dapo14k or openrs")
    imp.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. rephrase.on_failure=drop")
    imp.add_argument("--pairs", help="a released pair file (parquet/json/jsonl); default: the Hub release")
    imp.add_argument("--original", help="aligned verl parquet of the originals (with --rewrite)")
    imp.add_argument("--rewrite", help="aligned verl parquet of the rewrites (with --original)")
    imp.set_defaults(func=_import)
    track = data.add_parser("track", help="list sets' DVC stages in params.yaml, so `dvc repro prepare@SET` finds them")
    track.add_argument("names", nargs="+", help="datasources: math, dapo14k, ..., tiny (configs/datasource/)")
    track.set_defaults(func=_track)
    tiny = data.add_parser("tiny", help="write the demo's generated training set (dataset=tiny) where it trains from")
    tiny.add_argument("overrides", nargs="*", help="training-config overrides, e.g. paths.artifacts_dir=DIR")
    tiny.set_defaults(func=_tiny)
