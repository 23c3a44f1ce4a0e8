"""Turn the pylock.toml that `pip lock` writes into a requirements lock: each package pinned by name and version with
the SHA-256 of the file pip chose (`make lock` runs this).

pylock.toml names each file by where this machine's pip found it (a local mirror's file:// address, say), so it
installs only where that address exists. A requirements file with hashes leaves finding the file to whatever index
pip is given and still refuses any file but the locked one: the same lock installs here and on a researcher's machine.

usage: python tools/lock_requirements.py PYLOCK OUT WHAT  (WHAT: what was locked, e.g. '.[rl,dev]')
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path


def requirement_lines(pylock: dict) -> list[str]:
    """``name==version \\`` and its ``--hash=sha256:...`` lines per package, sorted by name."""
    lines = []
    for package in sorted(pylock["packages"], key=lambda p: p["name"].lower()):
        files = [*package.get("wheels", []), *([package["sdist"]] if "sdist" in package else [])]
        hashes = sorted({f["hashes"]["sha256"] for f in files})
        if not hashes:
            raise SystemExit(f"{package['name']}: no sha256 in the pylock file")
        pins = "".join(f" \\\n    --hash=sha256:{h}" for h in hashes)
        lines.append(f"{package['name']}=={package['version']}{pins}")
    return lines


HEADER = """\
# The dependencies of {what}, each pinned with the SHA-256 of its file: written by `make lock` (pip lock, then
# tools/lock_requirements.py); do not edit. For Python 3.11 on x86_64 Linux; torch 2.13.0+cpu is the CPU wheel
# (pip's find-links here; https://download.pytorch.org/whl/cpu elsewhere: docs/cli.md).
"""


def main(argv: list[str]) -> None:
    pylock, out, what = Path(argv[0]), Path(argv[1]), argv[2]
    lines = requirement_lines(tomllib.loads(pylock.read_text()))
    tmp = out.with_suffix(out.suffix + ".tmp")  # a reader never sees half a lock
    tmp.write_text(HEADER.format(what=what) + "\n".join(lines) + "\n")
    tmp.replace(out)


if __name__ == "__main__":
    main(sys.argv[1:])
