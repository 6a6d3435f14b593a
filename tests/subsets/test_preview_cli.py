"""`budgetlab preview` prints the forecast at step 0 with its interval, and says so when there is none."""

from typer.testing import CliRunner

from backend.cli import app
from tests.subsets.conftest import make_probed_pool


def test_cli_preview_prints_the_forecast_with_its_interval(service_env):
    probed = make_probed_pool(20)
    result = CliRunner().invoke(app, ["preview", str(probed.probe_id), "--count", "5"])
    assert result.exit_code == 0, result.output
    assert "predicted learnable share at step 0" in result.output and "(95% " in result.output
    assert "mean pass" in result.output and "learnable" in result.output.split("strategy", 1)[1]


def test_cli_preview_of_a_label_free_probe_shows_agreement_and_no_forecast(service_env):
    probed = make_probed_pool(20, label_free=True)
    result = CliRunner().invoke(app, ["preview", str(probed.probe_id), "--count", "5"])
    assert result.exit_code == 0, result.output
    assert "no learnable-share forecast (label-free)" in result.output and "Label the prompts" in result.output
    table = result.output.split("strategy", 1)[1]
    assert "mean agree" in table and "\nband" not in table and "\nlearnable" not in table
