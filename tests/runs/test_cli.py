"""`budgetlab train`, `experiment` and `compare` from a terminal, training in-process (--local)."""

import re

from typer.testing import CliRunner

from backend.cli import app
from tests.runs.conftest import make_subset
from tests.subsets.conftest import make_probed_pool
from tests.worker.model_fixtures import TINY_MODEL

SETS = ["--set", f"model={TINY_MODEL}", "--set", "lora_rank=4", "--set", "num_generations=2", "--set", "batch_size=2",
        "--set", "max_completion_length=8", "--set", "max_steps=2"]


def test_experiment_then_compare(service_env, service_tiny_model):
    probed = make_probed_pool(10, seed=8)
    held_out = make_probed_pool(4, seed=9)
    result = CliRunner().invoke(app, ["experiment", str(probed.probe_id), "--strategies", "hard,easy", "--count", "3",
                                      *SETS, "--set", f"eval_pool_id={held_out.pool_id}", "--set", "eval_every=1",
                                      "--local"])
    assert result.exit_code == 0, result.output
    experiment_id = int(re.search(r"Experiment (\d+)", result.output).group(1))
    table = CliRunner().invoke(app, ["compare", str(experiment_id)])
    assert table.exit_code == 0, table.output
    lines = table.output.splitlines()
    assert lines[0].split()[:4] == ["strategy", "run", "status", "N"]
    assert [line.split()[0] for line in lines[1:3]] == ["hard", "easy"]
    assert all(line.split()[2] == "succeeded" and line.split()[3] == "3" for line in lines[1:3])
    assert lines[3].startswith("fit over 2 runs")
    assert table.output in result.output  # experiment ends by printing the same table


def test_train_a_subset_and_bad_input(service_env, service_tiny_model):
    subset_id = make_subset(4)
    result = CliRunner().invoke(app, ["train", str(subset_id), *SETS, "--local"])
    assert result.exit_code == 0, result.output
    assert re.search(r"Done: run \d+; adapter under .*adapter", result.output)
    bad = CliRunner().invoke(app, ["train", str(subset_id), *SETS, "--set", "batch_size=3", "--local"])
    assert bad.exit_code == 1 and "must be divisible by num_generations (2)" in bad.output
    typo = CliRunner().invoke(app, ["train", str(subset_id), "--set", "max_steps"])
    assert typo.exit_code == 1 and "write key=value" in typo.output
    unknown = CliRunner().invoke(app, ["compare", "999999"])
    assert unknown.exit_code == 1 and "999999" in unknown.output


def test_train_refuses_another_model_than_the_probes_unless_allowed(service_env):
    subset_id = make_subset(4)  # probed with the tiny model
    refused = CliRunner().invoke(app, ["train", str(subset_id), "--set", "model=SmolLM2-135M-Instruct"])
    assert refused.exit_code == 1
    assert "Leave model out to train 'tiny-random-SmolLM2'" in refused.output and "allow_other_model" in refused.output
