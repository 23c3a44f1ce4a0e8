"""The pipeline's sections (``configs/pipeline.yaml``): a work pool's cell runs, its shared store and its alerts."""

from __future__ import annotations

import re
from dataclasses import dataclass

from corewarding.schemas.reading import Rule, setting

POSITIVE_NUMBER = Rule(lambda v: v > 0, "a number > 0")


@dataclass(frozen=True)
class CellsConfig:
    """``cells`` (configs/pipeline.yaml): the cell runs of a work pool."""

    max_attempts: float = setting("starts of a cell whose worker died, at most", POSITIVE_NUMBER)
    lease_timeout_s: float = setting("a lease older than this is a dead worker's", POSITIVE_NUMBER)
    poll_s: float = setting("how often the parent looks at its cell runs", POSITIVE_NUMBER)


@dataclass(frozen=True)
class StoreConfig:
    """``store`` (configs/pipeline.yaml): the shared artifact store of a work pool."""

    url: str | None = setting("an fsspec URL or path (null or empty: none)")
    dvc_remote: str | None = setting("or a DVC remote's name: its URL + /corewarding")
    sync_interval_s: float = setting("seconds between pushes of a training run", POSITIVE_NUMBER)

    @property
    def configured(self) -> bool:
        """Whether a store is named (an empty string means none, as null does)."""
        return bool(self.url or self.dvc_remote)


ALERT_EVENTS = ("cell_failed", "collapse", "claim_changed")
_BLOCK_NAME = re.compile(r"(?:[a-z0-9-]+/)?[a-z0-9-]+")  # Prefect's rule for block type slugs and document names


@dataclass(frozen=True)
class AlertsConfig:
    """``alerts`` (configs/pipeline.yaml): a message through a Prefect notification block for each failed cell, new
    collapse flag or changed claim verdict (docs/orchestration.md#alerts)."""

    block: str | None = setting(
        "the notification block (null or empty: no alerts)",
        Rule(lambda v: not v or bool(_BLOCK_NAME.fullmatch(v)),
             "<block-type-slug>/<block-name> or a block's name (lowercase letters, digits, dashes; never a URL), "
             "or null"),
    )  # fmt: skip
    events: tuple[str, ...] = setting(
        "what sends a message",
        Rule(lambda v: all(e in ALERT_EVENTS for e in v), f"a list of {', '.join(ALERT_EVENTS)}"),
    )
    claims_file: str | None = setting("the claims whose verdicts are watched (null: configs/claims.yaml)")
