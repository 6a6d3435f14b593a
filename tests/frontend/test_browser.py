"""The browser frontend, end to end: a real uvicorn server, a real Celery worker, Debian's chromium.

Flow: sign in → demo pool → probe with the tiny random model → histogram → drill-down → planner →
freeze → JSONL export. Plus: untrusted prompt text is shown as text, a bad token shows the error.
Screenshots of the pool and planner pages go to /tmp/budgetlab-*.png for a human look.
"""

import json
import re
from pathlib import Path

import pytest

from tests.frontend.conftest import PROBE_TIMEOUT_MS, TINY_MODEL, api_get, create_demo_pool, needs_chromium, sign_in

pytest.importorskip("playwright.sync_api")
from playwright.sync_api import Page, expect

XSS = "<img src=x onerror=alert(1)>"

pytestmark = needs_chromium


def problems_other_than_expected_401(page: Page) -> list[str]:
    # Chromium logs every failed fetch as a console error; a 4xx the test provokes on purpose is fine.
    return [p for p in page.problems if "401" not in p]


def forecast_text(row: dict) -> str:
    """A predicted learnable share at step 0 and its 95% interval as the pages show them: "41.2% 30%–52%"."""
    low, share, high = (row[f"predicted_learnable_share{end}"] * 100 for end in ("_low", "", "_high"))
    return f"{share:.1f}% {low:.0f}%–{high:.0f}%"


def test_a_wrong_password_shows_the_error_and_pages_need_a_session(page: Page, server: str) -> None:
    page.goto(f"{server}/#/signin")
    page.fill("#signin-name", "admin")
    page.fill("#signin-password", "not the password")
    page.click("#signin-button")
    expect(page.locator("#error-box")).to_be_visible()
    expect(page.locator("#error-text")).to_contain_text("Sign-in failed")
    assert page.url.endswith("#/signin")

    # A page that needs a session, opened with a forged cookie, lands on sign-in with the server's message.
    page.context.add_cookies([{"name": "budgetlab_session", "value": "forged", "url": server, "httpOnly": True}])
    page.goto(f"{server}/#/pools")
    page.wait_for_url("**/#/signin")
    page.goto(f"{server}/#/experiments")
    page.wait_for_url("**/#/signin")
    assert page.evaluate("localStorage.length") == 0  # no credential is kept where scripts can read it
    assert problems_other_than_expected_401(page) == []


def test_probe_plan_freeze_export(page: Page, server: str, worker, tmp_path: Path) -> None:
    sign_in(page, server)

    # Demo pool
    with page.expect_response(lambda r: r.url.endswith("/api/pools/demo") and r.request.method == "POST") as created:
        page.click("#demo-button")
    assert created.value.status == 201, created.value.text()
    pool = created.value.json()
    link = page.locator(f"[data-testid=pool-link-{pool['id']}]")
    expect(link).to_be_visible()
    link.click()
    page.wait_for_url(f"**/#/pools/{pool['id']}")
    expect(page.locator("#pool-name")).to_have_text(pool["name"])
    expect(page.locator("#prompt-table tbody tr").first).to_be_visible()  # unscored prompts before any probe

    # The demo pool's probe preset fills the form: short answers, a terse template, temperature 0.7
    expect(page.locator("#probe-preset")).to_have_value("demo")
    expect(page.locator("#probe-template")).to_have_value(re.compile("Answer with the number only"))
    expect(page.locator("#probe-temperature")).to_have_value("0.7")

    # Probe with the tiny random model
    page.select_option("#probe-model", TINY_MODEL)
    page.fill("#probe-k", "4")
    page.fill("#probe-max-new-tokens", "16")
    with page.expect_response(lambda r: r.url.endswith("/api/probes") and r.request.method == "POST") as started:
        page.click("#probe-submit")
    assert started.value.status == 202, started.value.text()
    probe = started.value.json()
    assert (probe["k"], probe["max_new_tokens"], probe["temperature"]) == (4, 16, 0.7)
    assert "Answer with the number only" in probe["template"]
    expect(page.locator("#job-progress")).to_be_visible()
    expect(page.locator("#job-state")).to_have_attribute("data-status", "succeeded", timeout=PROBE_TIMEOUT_MS)
    expect(page.locator("#job-progress-text")).to_contain_text(f"{pool['prompt_count']} / {pool['prompt_count']}")

    # Difficulty histogram (Plotly draws an svg) and its summary
    expect(page.locator("#difficulty-histogram svg.main-svg").first).to_be_visible()
    expect(page.locator("#summary-count")).to_have_text(str(pool["prompt_count"]))
    # Why the never-solved prompts fail (the tiny random model solves next to nothing)
    failures = api_get(page, server, f"/api/probes/{probe['id']}/failures")
    assert failures["never_solved"] == sum(failures["prompts"].values()) > 0
    expect(page.locator("#failures")).to_contain_text(f"Why the {failures['never_solved']} never-solved prompts fail")
    expect(page.locator("#failures-wrong")).to_contain_text(str(failures["prompts"]["wrong_answer"]))
    rows = page.locator("#prompt-table tbody tr")
    expect(rows.first).to_be_visible()
    assert rows.count() == min(50, pool["prompt_count"])
    # Scored rows show a pass rate with its Wilson interval: "0.25 [0.07, 0.59]"
    expect(page.locator("#prompt-table tbody tr td.wilson").first).to_have_text(
        re.compile(r"^\d\.\d\d \[\d\.\d\d, \d\.\d\d\]$"))

    # Sorting by difficulty flips the order
    expect(page.locator("#sort-difficulty")).to_have_attribute("aria-sort", "descending")
    page.click("#sort-difficulty button")
    expect(page.locator("#sort-difficulty")).to_have_attribute("aria-sort", "ascending")

    # Drill-down: the k completions with their marks
    rows.first.click()
    drawer = page.locator("#drilldown")
    expect(drawer).to_be_visible()
    expect(page.locator("#drilldown-samples li")).to_have_count(4)
    expect(page.locator("#drilldown-prompt")).not_to_be_empty()
    page.screenshot(path="/tmp/budgetlab-drilldown.png")
    page.click("#drilldown-close")
    expect(drawer).to_be_hidden()

    page.evaluate("window.scrollTo(0, 0)")
    expect(page.locator("#job-status")).to_contain_text("samples/s")
    page.screenshot(path="/tmp/budgetlab-pool-top.png")
    page.screenshot(path="/tmp/budgetlab-pool.png", full_page=True)

    # Budget planner
    page.click("#plan-link")
    page.wait_for_url(f"**/#/planner/{probe['id']}")
    expect(page.locator("#launch-demo-experiment")).to_be_visible()  # the demo pool's one-click experiment
    page.select_option("#planner-strategy", "hard")
    page.select_option("#budget-kind", "count")
    def preview_of_five(response) -> bool:  # not an earlier, still in-flight preview of the default budget
        return (response.url.endswith("/api/selections/preview") and response.status == 200
                and response.request.post_data_json["budget"]["value"] == 5)

    with page.expect_response(preview_of_five) as previewed:
        page.fill("#budget-value", "5")
    preview = previewed.value.json()
    expect(page.locator("#n-picked")).to_have_text("5")
    expect(page.locator("#predicted-share")).to_have_text(re.compile(r"^\d+\.\d%$"))
    expect(page.locator("#strategy-comparison tbody tr")).to_have_count(9)
    expect(page.locator("#selection-histogram svg.main-svg").first).to_be_visible()
    expect(page.locator("#picked-prompts tbody tr")).to_have_count(len(preview["prompts"]))
    assert preview["strategy"] == "hard" and preview["n"] == 5

    # Money budget shows its cost field; band shows its limits
    expect(page.locator("#cost-field")).to_be_hidden()
    page.select_option("#budget-kind", "money")
    expect(page.locator("#cost-field")).to_be_visible()
    page.select_option("#budget-kind", "count")
    page.fill("#budget-value", "5")
    expect(page.locator("#band-fields")).to_be_hidden()

    # Freeze and export
    page.fill("#subset-name", "hard-5")
    with page.expect_response(lambda r: r.url.endswith("/api/subsets") and r.request.method == "POST") as frozen:
        page.click("#freeze-button")
    assert frozen.value.status == 201, frozen.value.text()
    subset = frozen.value.json()
    assert subset["n"] == 5 and subset["strategy"] == "hard"
    expect(page.locator("#frozen-subset")).to_be_visible()
    expect(page.locator(f"#subset-table tr[data-subset-id='{subset['id']}']")).to_be_visible()
    # The frozen subset shows its forecast at step 0 with the 95% interval, in the card and in the list.
    forecast = forecast_text(subset)
    expect(page.locator("#frozen-forecast")).to_contain_text(f"predicted learnable share at step 0 {forecast}")
    expect(page.locator(f"#subset-table tr[data-subset-id='{subset['id']}']")).to_contain_text(forecast)
    expect(page.locator("#subset-table thead")).to_contain_text("at step 0")

    with page.expect_download() as download_info:
        page.click("#export-jsonl")
    download = download_info.value
    assert download.suggested_filename == f"subset-{subset['id']}.jsonl"
    target = tmp_path / download.suggested_filename
    download.save_as(target)
    lines = target.read_text().splitlines()
    assert len(lines) == 5
    first = json.loads(lines[0])
    assert "prompt" in first and "answer" in first

    page.evaluate("window.scrollTo(0, 0)")
    page.screenshot(path="/tmp/budgetlab-planner.png", full_page=True)
    assert page.problems == []


def upload_evil_pool(page: Page) -> dict:
    rows = [{"prompt": f"What is 2+2? {XSS}", "answer": "4"},
            {"prompt": "<script>window.pwned = 1</script> and 3+3?", "answer": f"6 {XSS}"}]
    payload = "".join(json.dumps(row) + "\n" for row in rows).encode()
    page.set_input_files("#upload-file",
                         files=[{"name": "evil.jsonl", "mimeType": "application/jsonl", "buffer": payload}])
    page.fill("#upload-name", f"evil {XSS}")
    page.fill("#upload-answer-field", "answer")
    with page.expect_response(lambda r: r.url.endswith("/api/pools") and r.request.method == "POST") as uploaded:
        page.click("#upload-submit")
    assert uploaded.value.status == 201, uploaded.value.text()
    pool = uploaded.value.json()
    link = page.locator(f"[data-testid=pool-link-{pool['id']}]")
    expect(link).to_have_text(f"evil {XSS}")
    link.click()
    page.wait_for_url(f"**/#/pools/{pool['id']}")
    return pool


def assert_no_injected_markup(page: Page) -> None:
    assert page.locator("img").count() == 0
    assert page.evaluate("document.querySelectorAll('#page script').length") == 0
    assert page.evaluate("window.pwned === undefined")


def test_untrusted_prompt_text_is_shown_as_text(page: Page, server: str) -> None:
    sign_in(page, server)
    upload_evil_pool(page)
    expect(page.locator("#pool-name")).to_have_text(f"evil {XSS}")
    table = page.locator("#prompt-table")
    expect(table).to_contain_text(f"What is 2+2? {XSS}")
    expect(table).to_contain_text("<script>window.pwned = 1</script>")
    expect(table).to_contain_text(f"6 {XSS}")
    assert_no_injected_markup(page)
    page.goto(f"{server}/#/pools")
    expect(page.locator("#pool-table")).to_contain_text(f"evil {XSS}")
    assert_no_injected_markup(page)
    assert page.problems == []


def test_an_adaptive_probe_shows_its_saving(page: Page, server: str, worker) -> None:
    """The probe form's adaptive option: the probe runs in rounds, and the job box says how many samples it saved."""
    sign_in(page, server)
    pool = create_demo_pool(page)
    page.click(f"[data-testid=pool-link-{pool['id']}]")
    page.wait_for_url(f"**/#/pools/{pool['id']}")
    expect(page.locator("#probe-preset")).to_have_value("demo")
    page.select_option("#probe-model", TINY_MODEL)
    page.fill("#probe-k", "6")
    page.fill("#probe-max-new-tokens", "4")
    page.click("#probe-adaptive summary")
    page.select_option("#probe-adaptive-strategy", "hard")
    page.fill("#probe-adaptive-percent", "10")
    with page.expect_response(lambda r: r.url.endswith("/api/probes") and r.request.method == "POST") as started:
        page.click("#probe-submit")
    assert started.value.status == 202, started.value.text()
    probe = started.value.json()
    assert probe["adaptive"]["strategy"] == "hard" and probe["adaptive"]["n"] == pool["prompt_count"] // 10
    expect(page.locator("#probe-adaptive-summary")).to_contain_text(f"hard at N = {probe['adaptive']['n']}")
    expect(page.locator("#job-state")).to_have_attribute("data-status", "succeeded", timeout=PROBE_TIMEOUT_MS)
    final = api_get(page, server, f"/api/probes/{probe['id']}")
    expect(page.locator("#job-progress-text")).to_have_text(f"{final['samples_drawn']:,} samples")
    assert 0 < final["samples_drawn"] < pool["prompt_count"] * 6
    expect(page.locator("#probe-adaptive-summary")).to_contain_text(
        f"{final['samples_drawn']:,} of {pool['prompt_count'] * 6:,} samples drawn, ")
    saved = float(re.search(r"(\d+)% saved", page.locator("#probe-adaptive-summary").inner_text()).group(1))
    assert saved == pytest.approx(100 * final["samples_saved"], abs=0.51)
    assert page.problems == []


def test_untrusted_text_in_the_drilldown(page: Page, server: str, worker) -> None:
    """Prompt, gold answer and model completions in the drill-down are text too."""
    sign_in(page, server)
    upload_evil_pool(page)
    page.select_option("#probe-model", TINY_MODEL)
    page.fill("#probe-k", "2")
    page.fill("#probe-max-new-tokens", "8")
    page.click("#probe-submit")
    expect(page.locator("#job-state")).to_have_attribute("data-status", "succeeded", timeout=PROBE_TIMEOUT_MS)
    page.locator("#prompt-table tbody tr", has_text="2+2").click()
    expect(page.locator("#drilldown-prompt")).to_have_text(f"What is 2+2? {XSS}")
    expect(page.locator("#drilldown-samples li")).to_have_count(2)
    page.click("#drilldown-close")
    page.locator("#prompt-table tbody tr", has_text="3+3").click()
    expect(page.locator("#drilldown-prompt")).to_have_text("<script>window.pwned = 1</script> and 3+3?")
    assert_no_injected_markup(page)
    assert page.problems == []


def test_a_running_probe_shows_its_partial_histogram(page: Page, server: str) -> None:
    """While a probe runs, the pool page draws the histogram of the shards done so far and says it is partial."""
    from sqlalchemy import delete, update

    from backend.database import session_scope
    from backend.jobs.service import transition
    from backend.jobs.tables import Job, JobStatus
    from backend.probes.tables import PromptScore
    from tests.subsets.conftest import K, make_probed_pool

    running = make_probed_pool(40, finished=False)
    with session_scope() as session:  # the first shard's 16 prompts are scored, the job runs on
        session.execute(delete(PromptScore).where(PromptScore.probe_id == running.probe_id,
                                                  PromptScore.prompt_id.in_(running.prompt_ids[16:])))
        transition(session, session.get(Job, running.job_id), JobStatus.running, "test")
        session.execute(update(Job).where(Job.id == running.job_id).values(progress_done=16))
    sign_in(page, server)
    page.goto(f"{server}/#/pools/{running.pool_id}")
    expect(page.locator("#job-state")).to_have_attribute("data-status", "running")
    expect(page.locator("#difficulty-card")).to_have_attribute("data-partial", "true")
    expect(page.locator("#difficulty-histogram svg.main-svg").first).to_be_visible()
    expect(page.locator("#summary-count")).to_have_text("16")
    expect(page.locator("#difficulty-card")).to_contain_text("Partial: 16 of 40 prompts scored so far")
    expect(page.locator("#plan-link")).to_be_hidden()  # planning waits for the whole probe

    with session_scope() as session:  # the other shards finish, and with them the probe
        session.add_all(PromptScore(probe_id=running.probe_id, prompt_id=prompt_id, k=K, correct_count=correct,
                                    pass_rate=correct / K, agreement=max(correct, K - correct) / K,
                                    base_wrong=False, difficulty=1 - correct / K)
                        for prompt_id, correct in zip(running.prompt_ids[16:], running.correct[16:], strict=True))
        session.execute(update(Job).where(Job.id == running.job_id).values(progress_done=40))
        transition(session, session.get(Job, running.job_id), JobStatus.succeeded, "test")
    expect(page.locator("#difficulty-card")).to_have_attribute("data-partial", "false")
    expect(page.locator("#summary-count")).to_have_text("40")
    expect(page.locator("#plan-link")).to_be_visible()
    assert page.problems == []
