"""What a run never pushed to the Hub says about it (matrix table, run page): a paper cell, or a run naming its own
org, names the repo it would go to; a tiny or demo cell under the paper's org is not meant for the Hub (issue 33: the
tiny runs read "not published (TMLR-Group-HF/...)" as if the paper's org were their target)."""

from __future__ import annotations

import doctest

import dashboard.released_table
from corewarding.matrix import Cell, hub_repo_id, load_matrix
from dashboard.released_table import hub_note


def test_paper_cells_name_their_repo_and_tiny_cells_are_not_meant_for_the_hub() -> None:
    paper = load_matrix("paper_v3").cells[-1]
    assert hub_note(paper.cell_id, hub_repo_id(paper)) == f"not published (its Hub repo would be {hub_repo_id(paper)})"
    for cell in load_matrix("demo").cells:
        note = hub_note(cell.cell_id, hub_repo_id(cell))  # the default org, as a run without hub.org records it
        assert note == "not published: a tiny/demo cell, not meant for the Hub", (cell, note)
        assert "TMLR-Group-HF" not in note
    tiny = Cell("majority_voting", "tiny-qwen3", "tiny")
    assert hub_note(tiny.cell_id, hub_repo_id(tiny, "my-lab")).startswith(
        "not published (its Hub repo would be my-lab/"
    )
    assert hub_note(tiny.cell_id, float("nan")) == "not published: a tiny/demo cell, not meant for the Hub"  # type: ignore[arg-type]


def test_hub_note_examples() -> None:
    assert doctest.testmod(dashboard.released_table).failed == 0
