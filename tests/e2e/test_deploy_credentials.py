"""`corewarding deploy` against a real Prefect server that requires an auth string, given the wrong one: one line
naming the server and the setting to fix, exit 2, and the string itself nowhere in the output."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.prefect_server import prefect_server

BIN = Path(sys.executable).parent
ROOT = Path(__file__).resolve().parents[2]


def test_deploy_with_a_wrong_auth_string_is_one_line_and_never_shows_it(tmp_path: Path) -> None:
    wrong = "corewarding:not-the-Secret-7Qx"
    with prefect_server(tmp_path / "server-home", auth="corewarding:pool-secret") as env:
        env = {**env, "PREFECT_API_AUTH_STRING": wrong}
        done = subprocess.run([str(BIN / "corewarding"), "deploy", "--work-pool", "p"], env=env, cwd=ROOT,
                              capture_output=True, text=True, timeout=300)  # fmt: skip
    api_url = env["PREFECT_API_URL"]
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.splitlines() == [
        f"error: the Prefect server at {api_url} refused the credentials (HTTP 401): set PREFECT_API_AUTH_STRING to "
        "the server's PREFECT_SERVER_API_AUTH_STRING"
    ]
    assert "not-the-Secret" not in done.stdout + done.stderr and "pool-secret" not in done.stdout + done.stderr
