"""`make demo` compares the table it printed with README.md's and names the rows that differ, README's value first;
the tables here are hand-made (plain_table's layout), and README.md's own table must parse as the pipeline's."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from corewarding.cpu import cpu_fields, cpu_record
from corewarding.matrix import load_matrix
from corewarding.pipeline.readme_table import RowDifference, check, compare, find_table, main
from corewarding.pipeline.run_summary import CellReport, PipelineReport, format_report, plain_table

ROOT = Path(__file__).resolve().parents[2]
HEADER = ["cell", "train", "mean reward", "label acc", "evaluation (newest step, 95% CI)"]
BODY = [
    ["gt_grpo__tiny__tiny", "done", "0.417", "0.583", "tiny avg@4 @12 = 0.062 [0.000, 0.156]"],
    ["entropy__tiny__tiny", "done", "-0.193", "0.625", "tiny avg@4 @12 = 0.062 [0.000, 0.156]"],
    ["co_rewarding_1__tiny__tiny", "done", "0.211", "0.490", "tiny avg@4 @12 = 0.062 [0.000, 0.156]"],
]


def _readme(body: list[list[str]]) -> str:
    """README-like text: prose, the table in a code block (trailing spaces stripped, as an editor does), a note."""
    table = "\n".join(line.rstrip() for line in plain_table(HEADER, body).splitlines())
    return f"# title\n\nIt ends with this table:\n\n```\n{table}\n\nA plumbing check.\n```\n\n## Next\n"


def _printed(body: list[list[str]], after: str = "\nA plumbing check, not a result.\n") -> str:
    """What the pipeline prints: log lines, the table (padded), what follows it."""
    return "INFO prefect: Finished in state Completed()\n" + plain_table(HEADER, body) + "\n" + after


def _changed(row: int, column: int, value: str) -> list[list[str]]:
    body = [list(r) for r in BODY]
    body[row][column] = value
    return body


def test_the_same_table_matches_and_cells_with_spaces_are_whole() -> None:
    readme, printed = find_table(_readme(BODY)), find_table(_printed(BODY))
    assert readme is not None and printed is not None
    assert readme.columns == tuple(HEADER) and list(readme.rows) == [r[0] for r in BODY]
    assert readme.rows["entropy__tiny__tiny"]["evaluation (newest step, 95% CI)"] == BODY[1][4]
    assert readme.rows["entropy__tiny__tiny"]["mean reward"] == "-0.193"
    assert compare(readme, printed) == []
    assert check(_printed(BODY), _readme(BODY)) == []


def test_one_differing_row_is_named_with_readmes_value_first() -> None:
    printed = _printed(_changed(2, 2, "0.215"))  # README 0.211, printed 0.215: the order of the two matters
    differences = compare(find_table(_readme(BODY)), find_table(printed))  # type: ignore[arg-type]
    assert differences == [RowDifference("co_rewarding_1__tiny__tiny", (("mean reward", "0.211", "0.215"),))]
    assert check(printed, _readme(BODY)) == [
        "co_rewarding_1__tiny__tiny: mean reward 0.211 in README.md, 0.215 printed"
    ]
    wider = _printed(_changed(0, 4, "tiny avg@4 @12 = 0.062 [0.000, 0.188]"))  # only the interval's end differs
    assert check(wider, _readme(BODY)) == [
        "gt_grpo__tiny__tiny: evaluation (newest step, 95% CI) tiny avg@4 @12 = 0.062 [0.000, 0.156] in README.md, "
        "tiny avg@4 @12 = 0.062 [0.000, 0.188] printed"
    ]


def test_a_row_missing_on_either_side_says_which_side_lacks_it() -> None:
    extra = ["co_rewarding_3__tiny__tiny", "done", "0.294", "0.542", "-"]
    printed = _printed([BODY[0], BODY[2], extra])
    assert check(printed, _readme(BODY)) == [
        "entropy__tiny__tiny: in README.md, not printed",
        "co_rewarding_3__tiny__tiny: printed, not in README.md",
    ]


def test_rows_end_where_the_table_does() -> None:
    failed = "FAILED entropy__tiny__tiny: train: boom"  # format_report's line right under the table, no blank line
    table = find_table(_printed(BODY[:2], after=f"{failed}\nresults are in the DuckDB store\n"))
    assert table is not None and list(table.rows) == [BODY[0][0], BODY[1][0]]
    twice = find_table(_printed(BODY[:1]) + "\n" + _printed(BODY[1:]))  # the final table is the one compared
    assert twice is not None and list(twice.rows) == [BODY[1][0], BODY[2][0]]


def test_no_table_is_said_not_compared() -> None:
    assert check("Traceback (most recent call last):\n", _readme(BODY)) == [
        "no results table printed: nothing compared"
    ]
    assert check(_printed(BODY), "# title\n") == ["no results table in README.md: nothing compared"]


def test_readmes_table_has_the_pipelines_columns_and_the_demo_matrixs_cells() -> None:
    readme = find_table((ROOT / "README.md").read_text())
    assert readme is not None
    cells = [cell.cell_id for cell in load_matrix("demo").cells]
    assert list(readme.rows) == cells
    printed = format_report(PipelineReport("demo", [CellReport(c, f"/nonexistent/{c}") for c in cells]))
    table = find_table(printed)
    assert table is not None and table.columns == readme.columns


def test_the_command_logs_a_match_or_each_differing_row_and_exits_0(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(_readme(BODY))
    same, different = tmp_path / "same.txt", tmp_path / "different.txt"
    same.write_text(_printed(BODY))
    different.write_text(_printed(_changed(1, 3, "0.521")))
    with caplog.at_level(logging.INFO, logger="corewarding.pipeline.readme_table"):
        assert main([str(same), str(readme)]) == 0
        assert [r.getMessage() for r in caplog.records] == ["the table matches README.md"]
        caplog.clear()
        assert main([str(different), str(readme)]) == 0
    messages = [r.getMessage() for r in caplog.records]
    assert all(r.levelno == logging.WARNING for r in caplog.records)
    assert messages[0].startswith("warning: the table differs from README.md's in 1 line(s)")
    assert messages[1:] == ["  entropy__tiny__tiny: label acc 0.625 in README.md, 0.521 printed"]


def test_only_the_model_name_and_flags_of_the_first_processor_are_read(tmp_path: Path) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    first = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 9R14\nmicrocode\t: 0xa101148\n"
    first += "flags\t\t: fpu sse4_2 avx2 avx512f\nbugs\t\t: sysret_ss_attrs\n"
    cpuinfo.write_text(first + "\nprocessor\t: 1\nmodel name\t: Other\nflags\t\t: fpu\n")
    assert cpu_fields(cpuinfo) == {"model name": "AMD EPYC 9R14", "flags": "fpu sse4_2 avx2 avx512f"}
    assert cpu_fields(tmp_path / "absent") == {}


def test_a_run_records_its_cpu_and_the_kernels_asked_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """run.json's ``cpu``: model, vector flags (allow-listed: no other /proc/cpuinfo flag) and ATEN_CPU_CAPABILITY."""
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nmodel name\t: Xeon Q\nflags\t\t: fpu vme avx2 fma avx512f ht\nserial\t: 42\n")
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "avx2")
    assert cpu_record(cpuinfo) == {"model": "Xeon Q", "vector_flags": ["avx2", "fma", "avx512f"], "kernels": "avx2"}
    monkeypatch.delenv("ATEN_CPU_CAPABILITY")
    assert cpu_record(cpuinfo)["kernels"] is None
