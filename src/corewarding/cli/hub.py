"""``corewarding publish`` (a run's checkpoints) and ``corewarding publish-data`` (a rephrased training set).

Each prints one JSON line per published folder: repo_id, folder, step, built, pushed, commit, created_commit and
the commit of every revision. Bad input (a missing run folder, checkpoint, step or data file) exits 2 with
``error: ...`` naming the path; a push the Hub refused or that kept failing exits 1. The token is read from
``HF_TOKEN`` or the Hugging Face cache (``hf auth login``), never from an option.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from corewarding.hub.errors import PublishInputError, PushError
from corewarding.hub.run_source import resolve_run_dir

if TYPE_CHECKING:
    from corewarding.hub.publish import PushOptions


def _fail(message: object, code: int) -> int:
    print(f"error: {message}", file=sys.stderr)
    return code


def _options(args: argparse.Namespace) -> PushOptions:
    from corewarding.hub.publish import PushOptions  # huggingface_hub: imported when used

    return PushOptions(private=args.private, retries=args.retries)


def _publish(args: argparse.Namespace) -> int:
    from corewarding.hub.publish import publish_run  # huggingface_hub: imported when used

    steps = "all" if args.all_steps else (str(args.step) if args.step is not None else "last")
    try:
        run_dir = resolve_run_dir(args.run, Path(args.runs_dir))
        results = publish_run(
            run_dir,
            org=args.org,
            push=args.push,
            steps=steps,
            out=Path(args.out) if args.out else None,
            step_branches=not args.no_step_branches,
            options=_options(args),
        )
    except PublishInputError as exc:
        return _fail(exc, 2)
    except PushError as exc:
        return _fail(exc, 1)
    for result in results:
        print(json.dumps(result.summary()), flush=True)
    return 0


def _publish_data(args: argparse.Namespace) -> int:
    from corewarding.hub.publish import publish_dataset  # huggingface_hub: imported when used

    try:
        result = publish_dataset(
            args.set,
            org=args.org,
            push=args.push,
            data_dir=Path(args.data_dir),
            out=Path(args.out) if args.out else None,
            options=_options(args),
        )
    except PublishInputError as exc:
        return _fail(exc, 2)
    except PushError as exc:
        return _fail(exc, 1)
    print(json.dumps(result.summary()), flush=True)
    return 0


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--push", action="store_true", help="upload to the Hub (default: build the folder only)")
    parser.add_argument("--org", default=None, help="Hub organisation (default: the config's hub.org)")
    parser.add_argument("--out", default=None, help="where to build the folder(s)")
    parser.add_argument("--private", action="store_true", help="create a missing repo as private")
    parser.add_argument("--retries", type=int, default=4, help="retries of a Hub call on 5xx/429/dropped connections")


def add_subcommands(sub: argparse._SubParsersAction) -> None:
    """Add ``publish`` and ``publish-data`` to the top-level parser."""
    publish = sub.add_parser(
        "publish",
        help="build (and --push) the Hub folder of a run's checkpoint step(s): weights, model card, config",
        description="Build the Hub folder of a run's checkpoint(s) under --out (default <run>/publish/global_step_N) "
        "and push with --push: each step to the branch global_step_N, the run's newest step also to main. "
        "Repo: {org}/{Method}-{Model}-{Set}. Token: $HF_TOKEN or `hf auth login`; endpoint: $HF_ENDPOINT.",
    )
    publish.add_argument("run", help="a run folder, or a cell id (its folder under --runs-dir)")
    which = publish.add_mutually_exclusive_group()
    which.add_argument("--step", type=int, default=None, help="this checkpoint step (default: the newest)")
    which.add_argument("--all-steps", action="store_true", help="every saved checkpoint step")
    publish.add_argument("--runs-dir", default="runs", help="where cell ids are looked up (default: runs)")
    publish.add_argument(
        "--no-step-branches", action="store_true", help="push the newest step to main only, not also to global_step_N"
    )
    _common(publish)
    publish.set_defaults(func=_publish)

    data = sub.add_parser(
        "publish-data",
        help="build (and --push) the Hub dataset folder of a rephrased training set",
        description="Build the Hub folder of data/<set>/ (train_pairs.parquet, the aligned parquets, the quality "
        "reports, a dataset card) under --out (default <data-dir>/<set>/publish) and push it with --push to "
        "{org}/<the name of the set's released rephrasing>, e.g. Co-rewarding-RephrasedDAPO-14k "
        "(Co-rewarding-Rephrased{hub_name} for a set without one).",
    )
    data.add_argument("set", help="a training set with a rephrasing, e.g. math, dapo14k, openrs, tiny")
    data.add_argument("--data-dir", default="data", help="where the prepared sets live (default: data)")
    _common(data)
    data.set_defaults(func=_publish_data)
