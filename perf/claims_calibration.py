"""The claims rule's calibration sweep (results/calibration.py), larger than the suite's: per setting (seeds 2, 3, 5,
10 x seed-to-problem variance ratio 0.1, 1, 10), the false-verdict rate of identical methods with their own seeds and
with one-seed cells borrowing within their family and size, the detection rate of the effect the power formula
designs for those seeds, and the false-verdict rate with a lender of another family (never used).

Usage: ``python perf/claims_calibration.py [--stores 2000] [--json out.json]``; prints a markdown table
(docs/results.md keeps the figures it printed, with the machine).
"""

from __future__ import annotations

import argparse
import json
import time

from corewarding.results.calibration import Setting, calibrate, designed_effect


def _pct(count: int, stores: int) -> str:
    return f"{100 * count / stores:.1f}%"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--stores", type=int, default=2000, help="simulated stores per setting")
    parser.add_argument("--json", default=None, help="also write the rates here")
    args = parser.parse_args()
    start = time.monotonic()
    rows = []
    print(
        "| seeds | ratio | false (own seeds) | false (borrowed) | false (other family) | designed effect | detected |"
    )
    print("|---|---|---|---|---|---|---|")
    for seeds in (2, 3, 5, 10):
        for ratio in (0.1, 1.0, 10.0):
            own = calibrate(Setting(seeds, ratio), args.stores, rng_seed=seeds * 100 + int(ratio * 10))
            lent = calibrate(Setting(seeds, ratio, layout="borrowed"), args.stores, rng_seed=7 + seeds)
            other = calibrate(Setting(seeds, ratio, layout="mismatched"), args.stores // 4, rng_seed=3 + seeds)
            effect = designed_effect(Setting(seeds, ratio))
            fits = Setting(seeds, ratio).base + effect <= 0.95
            found = calibrate(Setting(seeds, ratio, effect), args.stores, rng_seed=1000 + seeds) if fits else None
            detected = _pct(found.right, found.stores) if found else "(beyond the score's range)"
            print(f"| {seeds} | {ratio:g} | {_pct(own.decided, own.stores)} | {_pct(lent.decided, lent.stores)} | "
                  f"{_pct(other.decided, other.stores)} | {100 * effect:.1f} points | {detected} |")  # fmt: skip
            rows.append({"seeds": seeds, "ratio": ratio, "false_own": own.decided_rate,
                         "false_borrowed": lent.decided_rate, "false_other_family": other.decided_rate,
                         "designed_effect": effect,
                         "detected": found.right / found.stores if found else None})  # fmt: skip
    print(f"\n{args.stores} stores per setting, {time.monotonic() - start:.0f} s")
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"stores": args.stores, "rows": rows}, out, indent=1)


if __name__ == "__main__":
    main()
