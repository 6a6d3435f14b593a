"""The labeling loop in the browser, as a manager runs it (issue 8 §6): upload an unlabeled pool →
label-free probe with the tiny model → freeze hard 20 → export for Label Studio → import a labeled
Label Studio export → the probe shows pass rates for those prompts → a short training run on the
subset succeeds. Real uvicorn, a real Celery worker, Debian's chromium."""

import json
import re
from pathlib import Path

import pytest

from tests.frontend.conftest import PROBE_TIMEOUT_MS, TINY_MODEL, api_get, needs_chromium, sign_in

pytest.importorskip("playwright.sync_api")
from playwright.sync_api import Page, expect

pytestmark = needs_chromium

TRAIN_TIMEOUT_MS = 600_000
POOL_SIZE = 40
SUBSET = 20


def sums(i: int) -> tuple[int, int]:
    return 3 + i % 7, 5 + i // 7


def upload_unlabeled_pool(page: Page) -> dict:
    rows = [{"id": f"p{i}", "prompt": f"What is {a} + {b}? Answer with a number."}
            for i, (a, b) in ((i, sums(i)) for i in range(POOL_SIZE))]
    payload = "".join(json.dumps(row) + "\n" for row in rows).encode()
    page.set_input_files("#upload-file", files=[{"name": "unlabeled.jsonl", "mimeType": "application/jsonl",
                                                 "buffer": payload}])
    page.fill("#upload-name", "unlabeled sums")
    page.fill("#upload-id-field", "id")
    page.select_option("#upload-task-type", "numeric")
    with page.expect_response(lambda r: r.url.endswith("/api/pools") and r.request.method == "POST") as uploaded:
        page.click("#upload-submit")
    assert uploaded.value.status == 201, uploaded.value.text()
    pool = uploaded.value.json()
    assert pool["has_answers"] is False and pool["prompt_count"] == POOL_SIZE
    page.click(f"[data-testid=pool-link-{pool['id']}]")
    page.wait_for_url(f"**/#/pools/{pool['id']}")
    return pool


def annotate(tasks: list[dict]) -> list[dict]:
    """What Label Studio exports once an annotator has answered every task (its JSON export format)."""
    out = []
    for n, task in enumerate(tasks, 1):
        a, b = sums(int(task["data"]["budgetlab_id"][1:]))
        out.append({"id": n, "data": task["data"], "annotations": [{
            "id": n, "completed_by": 1, "was_cancelled": False, "result": [{
                "from_name": "answer", "to_name": "prompt", "type": "textarea", "value": {"text": [str(a + b)]}}]}]})
    return out


def test_unlabeled_pool_to_a_trained_subset(page: Page, server: str, worker, tmp_path: Path) -> None:
    sign_in(page, server)
    pool = upload_unlabeled_pool(page)

    # Label-free probe
    page.select_option("#probe-model", TINY_MODEL)
    page.fill("#probe-k", "4")
    page.fill("#probe-max-new-tokens", "8")
    with page.expect_response(lambda r: r.url.endswith("/api/probes") and r.request.method == "POST") as started:
        page.click("#probe-submit")
    probe = started.value.json()
    assert started.value.status == 202 and probe["label_free"] is True
    expect(page.locator("#job-state")).to_have_attribute("data-status", "succeeded", timeout=PROBE_TIMEOUT_MS)

    # Freeze hard 20 in the planner
    page.click("#plan-link")
    page.wait_for_url(f"**/#/planner/{probe['id']}")
    page.select_option("#planner-strategy", "hard")
    page.select_option("#budget-kind", "count")
    page.fill("#budget-value", str(SUBSET))
    expect(page.locator("#n-picked")).to_have_text(str(SUBSET))
    # The preview's picks can go to annotators without freezing
    page.select_option("[data-testid=selection-labeling-format]", "csv")
    with page.expect_download() as preview_download:
        page.click("[data-testid=selection-labeling-export]")
    picked = tmp_path / preview_download.value.suggested_filename
    preview_download.value.save_as(picked)
    assert picked.read_text().splitlines()[0] == "id,prompt,answer" and len(picked.read_text().splitlines()) == 21
    page.fill("#subset-name", "hard-20 to label")
    with page.expect_response(lambda r: r.url.endswith("/api/subsets") and r.request.method == "POST") as frozen:
        page.click("#freeze-button")
    subset = frozen.value.json()
    assert frozen.value.status == 201 and subset["n"] == SUBSET

    # Export for Label Studio from the subset page
    page.click("#frozen-subset-link")
    page.wait_for_url(f"**/#/subsets/{subset['id']}")
    page.select_option("[data-testid=labeling-format]", "label-studio")
    with page.expect_download() as download_info:
        page.click("[data-testid=labeling-export]")
    tasks_file = tmp_path / download_info.value.suggested_filename
    download_info.value.save_as(tasks_file)
    tasks = json.loads(tasks_file.read_text())
    assert len(tasks) == SUBSET and all(task["data"]["budgetlab_id"].startswith("p") for task in tasks)
    expect(page.locator("[data-testid=subset-exports]")).to_contain_text("Label Studio tasks (JSON)")

    # The annotators' work comes back as a Label Studio export; import it
    labeled = tmp_path / "project-1-at-2026.json"
    labeled.write_text(json.dumps(annotate(tasks)))
    page.set_input_files("[data-testid=labels-file]", str(labeled))
    page.click("[data-testid=labels-import]")
    expect(page.locator("[data-testid=labels-report-title]")).to_contain_text("Imported as label set")
    expect(page.locator("[data-testid=report-matched] .stat-value")).to_have_text(str(SUBSET))
    expect(page.locator("[data-testid=report-new] .stat-value")).to_have_text(str(SUBSET))
    page.screenshot(path="/tmp/budgetlab-subset-labeled.png", full_page=True)

    # The probe now has pass rates for exactly those prompts, graded from the stored samples
    read = api_get(page, server, f"/api/probes/{probe['id']}")
    assert read["graded_prompts"] == SUBSET and read["label_free"] is True
    page.goto(f"{server}/#/pools/{pool['id']}")
    expect(page.locator("#prompt-table tbody tr").first).to_be_visible()
    wilson = page.locator("#prompt-table tbody tr td.wilson")
    expect(wilson.filter(has_text=re.compile(r"^\d\.\d\d \[\d\.\d\d, \d\.\d\d\]$"))).to_have_count(SUBSET)
    labels = api_get(page, server, f"/api/pools/{pool['id']}/labels")
    assert (labels["labeled"], labels["unlabeled"]) == (SUBSET, POOL_SIZE - SUBSET)
    expect(page.locator("[data-testid=labels-labeled]")).to_contain_text(str(SUBSET))
    page.screenshot(path="/tmp/budgetlab-pool-labeled.png", full_page=True)

    # A short training run on the now labeled subset
    page.goto(f"{server}/#/subsets/{subset['id']}")
    page.fill("#subset-train-steps", "1")
    with page.expect_response(lambda r: r.url.endswith("/api/runs") and r.request.method == "POST") as launched:
        page.click("#subset-train")
    assert launched.value.status == 201, launched.value.text()
    run = launched.value.json()
    page.wait_for_url(f"**/#/runs/{run['id']}")
    expect(page.locator("#run-status")).to_have_attribute("data-status", "succeeded", timeout=TRAIN_TIMEOUT_MS)
    assert page.problems == []
