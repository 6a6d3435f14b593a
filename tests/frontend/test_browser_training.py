"""Training in the browser, end to end: real uvicorn, a real Celery worker, Debian's chromium.

Flow: sign in → demo pool + held-out demo pool → probe with the tiny random model → planner →
launch an experiment (hard, easy, random; 2 steps; evaluated on the held-out pool every step) →
experiment page lists 3 runs → a run page goes from queued to succeeded with live charts and
downloads → the comparison renders. Plus: a bad setting shows the API's message and creates nothing;
"Train on this subset" opens the new run, which can be cancelled.
Screenshots go to /tmp/budgetlab-run.png and /tmp/budgetlab-experiment.png for a human look.
"""

import csv
import re
from pathlib import Path

import pytest

from tests.frontend.conftest import (
    TINY_MODEL,
    api_get,
    create_demo_pool,
    needs_chromium,
    probe_pool,
    sign_in,
)
from tests.frontend.test_browser import forecast_text

pytest.importorskip("playwright.sync_api")
from playwright.sync_api import Page, expect
from playwright.sync_api import TimeoutError as PlaywrightTimeout

pytestmark = needs_chromium

# Three runs train one after another on one solo worker; CPU-only machines may be shared and slow.
TRAIN_TIMEOUT_MS = 600_000
STRATEGIES = ("hard", "easy", "random")
RUN_CHARTS = ("reward", "learnable-share", "loss", "kl", "completion-length", "step-time", "eval-accuracy")


def problems_other_than(page: Page, *statuses: int) -> list[str]:
    # Chromium logs every failed fetch as a console error; a 4xx the test provokes on purpose is fine.
    return [p for p in page.problems if not any(f"status of {s}" in p for s in statuses)]


def open_planner(page: Page, probe: dict) -> None:
    page.click("#plan-link")
    page.wait_for_url(f"**/#/planner/{probe['id']}")
    expect(page.locator("#n-picked")).not_to_have_text("–")


def choose_strategies(page: Page, wanted: tuple[str, ...]) -> None:
    boxes = page.locator("#experiment-strategies input[name=experiment-strategy]")
    for i in range(boxes.count()):
        box = boxes.nth(i)
        box.set_checked(box.get_attribute("value") in wanted)


def plotted_points(page: Page, container_id: str) -> int:
    """Points Plotly holds in a chart (Plotly keeps the traces on the container as `.data`)."""
    return page.evaluate(
        "(id) => (document.getElementById(id).data || []).reduce((n, t) => n + (t.x ? t.x.length : 0), 0)",
        container_id)


def test_bad_setting_shows_the_error_and_a_single_run_can_be_cancelled(page: Page, server: str, worker) -> None:
    sign_in(page, server)
    pool = create_demo_pool(page)
    probe = probe_pool(page, pool, k=2, max_new_tokens=8)
    open_planner(page, probe)

    # The preset fills the steps, the model is the probe's (another one asks for a confirmation: the
    # forecast would not apply); without a held-out pool nothing is evaluated.
    presets = api_get(page, server, "/api/training/presets")["presets"]
    expect(page.locator("#training-preset")).to_have_value("quick_cpu")
    expect(page.locator("#training-steps")).to_have_value(str(presets["quick_cpu"]["max_steps"]))
    expect(page.locator("#training-model")).to_have_value(probe["model"])
    expect(page.locator("#training-other-model-row")).to_be_hidden()
    page.select_option("#training-model", "SmolLM2-135M-Instruct")
    expect(page.locator("#training-other-model-row")).to_contain_text("the forecast will not apply")
    page.select_option("#training-preset", "paper")
    expect(page.locator("#training-steps")).to_have_value(str(presets["paper"]["max_steps"]))
    page.select_option("#training-preset", "quick_cpu")
    if not any("held-out" in p["name"] for p in api_get(page, server, "/api/pools") if p["has_answers"]):
        expect(page.locator("#eval-pool")).to_have_value("none")
    expect(page.locator("#experiment-strategies input:checked")).to_have_count(6)

    # max_steps = 0: the API's 422 message is shown and no experiment (nor subset) is created.
    experiments_before = api_get(page, server, "/api/experiments")
    subsets_before = api_get(page, server, f"/api/subsets?probe_id={probe['id']}")
    page.select_option("#training-model", TINY_MODEL)
    page.fill("#training-steps", "0")
    with page.expect_response(lambda r: r.url.endswith("/api/experiments") and r.request.method == "POST") as bad:
        page.click("#launch-experiment")
    assert bad.value.status == 422, bad.value.text()
    expect(page.locator("#error-box")).to_be_visible()
    expect(page.locator("#error-text")).to_contain_text("max_steps")
    assert page.url.endswith(f"#/planner/{probe['id']}")
    assert api_get(page, server, "/api/experiments") == experiments_before
    assert api_get(page, server, f"/api/subsets?probe_id={probe['id']}") == subsets_before

    # Freeze a subset; training it with the bad setting fails the same way, then a good one opens the run.
    page.fill("#budget-value", "4")
    expect(page.locator("#n-picked")).to_have_text("4")
    page.fill("#subset-name", "hard-4")
    with page.expect_response(lambda r: r.url.endswith("/api/subsets") and r.request.method == "POST") as frozen:
        page.click("#freeze-button")
    subset = frozen.value.json()
    runs_before = api_get(page, server, "/api/runs")
    with page.expect_response(lambda r: r.url.endswith("/api/runs") and r.request.method == "POST") as bad_run:
        page.click("#train-subset")
    assert bad_run.value.status == 422, bad_run.value.text()
    expect(page.locator("#error-text")).to_contain_text("max_steps")
    assert api_get(page, server, "/api/runs") == runs_before
    # A preview finishing afterwards (editing the budget, or leaving its field, triggers one) leaves that
    # message alone: it clears only its own.
    with page.expect_response(lambda r: r.url.endswith("/api/selections/preview")) as late_preview:
        page.fill("#budget-value", "4")
    assert late_preview.value.status == 200
    expect(page.locator("#error-text")).to_contain_text("max_steps")

    page.fill("#training-steps", "1")
    with page.expect_response(lambda r: r.url.endswith("/api/runs") and r.request.method == "POST") as started:
        page.click("#train-subset")
    assert started.value.status == 201, started.value.text()
    run = started.value.json()
    assert run["subset_id"] == subset["id"] and run["model"] == TINY_MODEL
    assert run["settings"]["max_steps"] == 1
    page.wait_for_url(f"**/#/runs/{run['id']}")
    expect(page.locator("#run-title")).to_contain_text("hard")
    expect(page.locator("#run-settings-table")).to_contain_text(f"#{subset['id']}")

    # Cancel it (it may already be done: a 1-step run on the tiny model is quick).
    status = page.locator("#run-status")
    expect(status).to_have_attribute("data-status", re.compile(r"^(queued|running|succeeded)$"))
    try:
        page.click("#run-cancel", timeout=5_000)
    except PlaywrightTimeout:  # hidden: the run finished first
        assert status.get_attribute("data-status") == "succeeded"
    expect(status).to_have_attribute("data-status", re.compile(r"^(cancelled|succeeded)$"), timeout=TRAIN_TIMEOUT_MS)
    expect(page.locator("#run-cancel")).to_be_hidden()

    # The single run is listed on the experiments page.
    page.click("#nav-experiments")
    page.wait_for_url("**/#/experiments")
    expect(page.locator(f"#run-list tr[data-run-id='{run['id']}']")).to_be_visible()
    assert problems_other_than(page, 422, 409) == []  # 409: the cancel came after the run finished


@pytest.mark.timeout(1800)
def test_experiment_from_the_planner_to_the_comparison(page: Page, server: str, worker, tmp_path: Path) -> None:
    sign_in(page, server)
    pool = create_demo_pool(page)
    held_out = create_demo_pool(page, "#demo-heldout-button")
    assert "held-out" in held_out["name"] and held_out["has_answers"]
    probe = probe_pool(page, pool, k=2, max_new_tokens=8)
    open_planner(page, probe)

    # Launch: 3 strategies, quick_cpu with the tiny model, 2 steps, evaluated on 10 held-out prompts every step.
    page.fill("#budget-value", "8")
    expect(page.locator("#n-picked")).to_have_text("8")
    choose_strategies(page, STRATEGIES)
    page.select_option("#training-preset", "quick_cpu")
    page.select_option("#training-model", TINY_MODEL)
    page.fill("#training-steps", "2")
    expect(page.locator("#eval-pool")).to_have_value(str(held_out["id"]))  # the held-out pool is the default
    page.fill("#eval-every", "1")
    page.fill("#eval-samples", "10")
    page.click("#training-more summary")  # GRPO and LoRA settings, prefilled from the preset
    expect(page.locator("#training-num-generations")).to_have_value("4")
    page.fill("#training-num-generations", "2")
    page.fill("#training-max-completion-length", "8")
    with page.expect_response(lambda r: r.url.endswith("/api/experiments") and r.request.method == "POST") as launched:
        page.click("#launch-experiment")
    assert launched.value.status == 201, launched.value.text()
    sent = launched.value.request.post_data_json
    assert sent["probe_id"] == probe["id"] and sent["strategies"] == list(STRATEGIES)
    assert sent["budget"] == {"kind": "count", "value": 8, "cost_per_prompt": None}
    assert sent["preset"] == "quick_cpu"
    assert sent["settings"] == {"max_steps": 2, "eval_pool_id": held_out["id"], "eval_every": 1,  # the probe's model
                                "eval_samples": 10, "ood_pool_ids": [], "num_generations": 2, "batch_size": 4,
                                "max_completion_length": 8, "learning_rate": 1e-4, "lora_rank": 8, "lora_alpha": 16,
                                "temperature": 1, "beta": 0, "warmup_ratio": 0, "weight_decay": 0, "adam_beta2": 0.999,
                                "max_grad_norm": 1, "seed": 0}
    experiment = launched.value.json()
    assert len(experiment["runs"]) == 3

    # Experiment page: 3 runs with status badges linking to their pages.
    page.wait_for_url(f"**/#/experiments/{experiment['id']}")
    rows = page.locator("#experiment-runs tbody tr")
    expect(rows).to_have_count(3)
    expect(page.locator("#experiment-status")).to_have_attribute("data-status", re.compile(r"^(queued|running|mixed)$"))
    for run in experiment["runs"]:
        expect(page.locator(f"#experiment-runs tr[data-run-id='{run['id']}'] .badge")).to_be_visible()

    # The last-created run trains last (one solo worker): its page sees the status change.
    last = max(run["id"] for run in experiment["runs"])
    page.click(f"[data-testid=run-link-{last}]")
    page.wait_for_url(f"**/#/runs/{last}")
    status = page.locator("#run-status")
    expect(status).to_have_attribute("data-status", re.compile(r"^(queued|running)$"))
    expect(page.locator("#run-progress")).to_be_visible()
    expect(page.locator("#run-cancel")).to_be_visible()
    for chart in RUN_CHARTS:
        expect(page.locator(f"#run-chart-{chart} .main-svg").first).to_be_visible()
    expect(status).to_have_attribute("data-status", "succeeded", timeout=TRAIN_TIMEOUT_MS)
    expect(page.locator("#run-progress-text")).to_have_text("2 / 2 steps")
    expect(page.locator("#run-cancel")).to_be_hidden()
    expect(page.locator("#run-error")).to_be_hidden()
    # Plotly.react put the logged steps into the charts: 2 training steps, evaluation at steps 0, 1, 2.
    assert plotted_points(page, "run-chart-reward") >= 2
    assert plotted_points(page, "run-chart-eval-accuracy") >= 3
    expect(page.locator("#run-library-versions")).to_contain_text("trl")

    # Polling stopped once the run finished (the last poll fetched the figures after the final status).
    polled = []
    page.on("request", lambda r: polled.append(r.url) if f"/api/runs/{last}" in r.url and "/moved" not in r.url
            else None)
    page.wait_for_timeout(4500)
    assert polled == []

    # Downloads carry the token: metrics CSV, TRL config, LoRA adapter.
    with page.expect_download() as metrics_download:
        page.click("#download-metrics")
    target = tmp_path / metrics_download.value.suggested_filename
    metrics_download.value.save_as(target)
    table = list(csv.DictReader(target.read_text().splitlines()))
    assert len(table) >= 3 and "eval/accuracy" in table[0]  # steps 0, 1, 2
    with page.expect_download() as config_download:
        page.click("#download-config")
    assert config_download.value.suggested_filename.endswith(".json")
    with page.expect_download() as adapter_download:
        page.click("#download-adapter")
    assert adapter_download.value.suggested_filename.endswith(".zip")

    # What moved: the trained policy re-probed on the subset (8 prompts) and the held-out pool, against the base.
    expect(page.locator("#run-moved")).to_contain_text("Not re-probed yet")
    page.click("#run-reprobe")
    expect(page.locator("#moved-training-transitions")).to_be_visible(timeout=TRAIN_TIMEOUT_MS)
    expect(page.locator("#moved-evaluation-by-tier")).to_be_visible(timeout=TRAIN_TIMEOUT_MS)
    expect(page.locator("#moved-training")).to_contain_text("8 prompts; mean pass rate")
    expect(page.locator("#moved-evaluation")).to_contain_text(f"{held_out['prompt_count']} prompts; mean pass rate")
    page.evaluate("window.scrollTo(0, 0)")
    page.screenshot(path="/tmp/budgetlab-run.png", full_page=True)

    # Back to the experiment: every run finishes, the comparison renders.
    page.click("#run-experiment-link")
    page.wait_for_url(f"**/#/experiments/{experiment['id']}")
    expect(page.locator("#experiment-status")).to_have_attribute("data-status", "succeeded", timeout=TRAIN_TIMEOUT_MS)
    expect(page.locator("#experiment-cancel")).to_be_hidden()
    for chart in ("compare-eval-accuracy", "compare-learnable-share", "compare-scatter"):
        expect(page.locator(f"#{chart} .main-svg").first).to_be_visible()
    expect(page.locator("#compare-r2")).to_contain_text("R²")
    compare_rows = page.locator("#compare-table > tbody > tr[data-run-id]")  # each with a hidden reproduce row
    expect(compare_rows).to_have_count(3)
    table = api_get(page, server, f"/api/experiments/{experiment['id']}/compare")["table"]
    expect(page.locator("#compare-table thead")).to_contain_text("Predicted learnable share (step 0)")
    expect(page.locator("#compare-table thead")).to_contain_text("Measured learnable share (mean over steps)")
    for strategy in STRATEGIES:
        row = page.locator(f"#compare-table > tbody > tr[data-strategy='{strategy}']")
        expect(row).to_contain_text("%")
        expect(row).to_contain_text("pts")
        # The step-0 forecast with its 95% interval, next to the measured mean over steps.
        [api_row] = [r for r in table if r["strategy"] == strategy]
        expect(row.locator("[data-col=predicted-share]")).to_have_text(forecast_text(api_row))
        measured = api_row["measured_learnable_share"] * 100
        error = (api_row["measured_learnable_share"] - api_row["predicted_learnable_share"]) * 100
        expect(row.locator("[data-col=measured-share]")).to_have_text(
            f"{measured:.1f}%{'+' if error >= 0 else '−'}{abs(error):.1f} pts vs forecast")
        # Accuracies and the gain carry their 95% intervals; a gain whose interval holds 0 says so.
        low, high = api_row["final_accuracy_interval"]
        expect(row.locator("[data-col=final-accuracy]")).to_contain_text(f"{low * 100:.1f}–{high * 100:.1f}%")
        expect(row.locator("[data-col=gain]")).to_contain_text(" to ")
        if api_row["gain_beyond_noise"] is False:
            expect(row.locator("[data-col=gain]")).to_contain_text("within noise")
    reproduce = page.locator(f"#reproduce-{last}")
    expect(reproduce).to_be_hidden()
    page.click(f"[data-testid=reproduce-toggle-{last}]")
    expect(reproduce).to_be_visible()
    for text in ("subset_id", "max_steps", "eval_samples", "trl"):
        expect(reproduce).to_contain_text(text)

    # The capacity boundary: every run re-probed (the last one already was, from its page), gain by tier.
    with page.expect_response(lambda r: r.url.endswith("/reprobe") and r.request.method == "POST") as reprobed:
        page.click("#experiment-reprobe")
    assert reprobed.value.status == 202, reprobed.value.text()
    expect(page.locator("#capacity-table tbody tr")).to_have_count(3, timeout=TRAIN_TIMEOUT_MS)
    expect(page.locator("#capacity-pending")).to_have_count(0, timeout=TRAIN_TIMEOUT_MS)
    expect(page.locator("#capacity-plot .main-svg").first).to_be_visible()
    for strategy in STRATEGIES:
        expect(page.locator(f"#capacity-table tr[data-strategy='{strategy}']")).to_contain_text("→")
    page.evaluate("window.scrollTo(0, 0)")
    page.screenshot(path="/tmp/budgetlab-experiment.png", full_page=True)

    # The experiments list links to it.
    page.click("#nav-experiments")
    expect(page.locator(f"#experiment-list tr[data-experiment-id='{experiment['id']}']")).to_be_visible()
    assert page.problems == []


def test_switching_probes_moves_the_probe_label_to_the_new_model(page: Page, server: str) -> None:
    """Only the current probe's model option reads "(the probe's)": the previous probe's loses it."""
    sign_in(page, server)
    labels = page.evaluate("""async ([first, second]) => {
        const { trainingForm } = await import("/static/training.js");
        const form = trainingForm({ alive: true });
        const model = form.element.querySelector("#training-model");
        while (![...model.options].some((o) => o.value === first)) await new Promise((r) => setTimeout(r, 50));
        form.setProbe({ model: first });
        form.setProbe({ model: second });
        form.setProbe({ model: "/checkpoints/tuned" });  // not listed: added with the label
        form.setProbe({ model: first });
        return [...model.options].map((o) => o.textContent);
    }""", [TINY_MODEL, "SmolLM2-135M-Instruct"])
    assert [label for label in labels if "(the probe's)" in label] == [f"{TINY_MODEL} (the probe's)"], labels
    assert "SmolLM2-135M-Instruct" in labels and "/checkpoints/tuned" in labels
    assert page.problems == []
