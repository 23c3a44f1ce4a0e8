"""``corewarding audit``: evaluate the paper's released Hub checkpoints under the paper's protocol.

One Prefect flow run per checkpoint (the pipeline's cell flow with its audit step), on this machine or on a work
pool like training cells; then each is ingested into the results store with source ``released``. Ctrl-C stops it;
the same command resumes, and finished checkpoints are not evaluated again.
"""

from __future__ import annotations

import argparse

from corewarding.cli.lazy import handler


def add_subcommands(sub: argparse._SubParsersAction) -> None:
    """Register ``audit``."""
    audit = sub.add_parser(
        "audit",
        help="evaluate the paper's released Hub checkpoints under the paper's protocol (Prefect flow runs)",
        description="Evaluate the released checkpoint (hub repo of each cell) on the matrix's benchmarks; its "
        "scores are stored apart from reproduction runs (source 'released') with the settings that produced them. "
        "Trailing arguments are evaluation overrides, e.g. seed=1 benchmark.limit=50.",
    )
    audit.add_argument("--matrix", default="paper_v3", help="configs/matrix/NAME.yaml (default: paper_v3, 72 cells)")
    audit.add_argument("--cell", help="comma-separated cell ids (default: every cell of the matrix)")
    audit.add_argument("--method", help="comma-separated methods")
    audit.add_argument("--base-model", help="comma-separated base models")
    audit.add_argument("--dataset", help="comma-separated datasets")
    audit.add_argument("--benchmarks", default=None, help="names or suites (default: the matrix's evaluation's)")
    audit.add_argument(
        "--generation", choices=["auto", "vllm", "transformers"], default="auto",
        help="auto (default): vllm where a CUDA device and vllm are here, else transformers",
    )  # fmt: skip
    audit.add_argument("--work-pool", default=None, help="one flow run per checkpoint on this Prefect work pool")
    audit.add_argument("--force", action="store_true", help="evaluate again checkpoints audited with these settings")
    audit.add_argument("--dry-run", action="store_true", help="print evaluations, samples and a GPU-time estimate")
    audit.add_argument(
        "--json", action="store_true",
        help="print the report (with --dry-run: the estimate) as one JSON document on stdout; the table goes to stderr",
    )  # fmt: skip
    audit.add_argument("--config", action="append", default=[], help="configs/pipeline.yaml override, repeatable")
    audit.add_argument("overrides", nargs="*", help="evaluation overrides of every checkpoint (seed=1, ...)")
    audit.set_defaults(func=handler("corewarding.cli.audit_run:audit"))
