"""A 401 from the Prefect API is one line naming the server and the setting (never the credentials); any other HTTP
error, or a 401 of another client (the Hub's), still goes up as it was."""

from __future__ import annotations

import httpx
import pytest
from prefect.exceptions import PrefectHTTPStatusError
from prefect.settings import PREFECT_API_URL, temporary_settings

from corewarding.cli.errors import refused_credentials, run_reporting_errors


def _status_error(status: int, url: str = "http://user:pw@10.0.0.5:4200/api/work_pools/p") -> httpx.HTTPStatusError:
    request = httpx.Request("GET", url, headers={"Authorization": "Basic c2VjcmV0"})
    return httpx.HTTPStatusError("refused", request=request, response=httpx.Response(status, request=request))


def test_a_prefect_401_is_one_line_and_other_errors_go_up(capsys: pytest.CaptureFixture[str]) -> None:
    refused = PrefectHTTPStatusError.from_httpx_error(_status_error(401))

    def deploy() -> int:
        raise refused

    line = (
        "error: the Prefect server at http://10.0.0.5:4200/api refused the credentials (HTTP 401): set "
        "PREFECT_API_AUTH_STRING to the server's PREFECT_SERVER_API_AUTH_STRING\n"
    )
    for configured in ("http://user:pw@10.0.0.5:4200/api", None):  # PREFECT_API_URL, or else the request's URL
        with temporary_settings(updates={PREFECT_API_URL: configured}):
            assert run_reporting_errors(deploy) == 2
        assert capsys.readouterr().err == line  # no user:password, no auth header
    assert refused_credentials(PrefectHTTPStatusError.from_httpx_error(_status_error(500))) is None
    assert refused_credentials(_status_error(401, "https://huggingface.co/api/models/x")) is None  # not Prefect's
    forbidden = PrefectHTTPStatusError.from_httpx_error(_status_error(403))

    def other() -> int:
        raise forbidden

    with pytest.raises(PrefectHTTPStatusError):
        run_reporting_errors(other)
