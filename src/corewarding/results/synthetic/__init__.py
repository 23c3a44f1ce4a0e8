"""Synthetic wing: synthetic result sets in the real on-disk formats (``values``: their numbers; ``folders``: run
folders, push records and quality reports) and the preview store built from them (``preview``).

The generators are re-exported here: tests, the benchmarks and the command line call ``synthetic.write_result_set``.
"""

from corewarding.results.synthetic.folders import write_push_record, write_quality_report, write_result_set, write_run
from corewarding.results.synthetic.values import SYNTHETIC_CHECKER_VERSION, SyntheticSpec

__all__ = [
    "SYNTHETIC_CHECKER_VERSION",
    "SyntheticSpec",
    "write_push_record",
    "write_quality_report",
    "write_result_set",
    "write_run",
]
