// One GRPO training run: its job, live curves, downloads and everything needed to reproduce it.
import { api, download } from "../api.js";
import { h, replace } from "../dom.js";
import { ACTIVE_STATUSES, card, createdText, emptyState, fmt, notify, renderFigure, reportError, restartablePolling, startPolling, statusBadge } from "../ui.js";

// (figure key from GET /api/runs/{id}/figures, container id)
const CHARTS = [
  ["reward", "run-chart-reward"],
  ["learnable_share", "run-chart-learnable-share"],
  ["loss", "run-chart-loss"],
  ["kl", "run-chart-kl"],
  ["completion_length", "run-chart-completion-length"],
  ["step_time", "run-chart-step-time"],
  ["eval_accuracy", "run-chart-eval-accuracy"],
];
const PROGRESS_KINDS = { succeeded: "ok", failed: "bad", cancelled: "muted", cancelling: "warn" };

export async function renderRun(ctx, runId) {
  const state = { run: null, pools: new Map(), adapterShown: null, settingsJson: "", oodLoaded: false };

  // ---------- skeleton ----------
  const crumbExperiment = h("span", null);
  const title = h("h1", { id: "run-title" }, `Run #${runId}`);
  const facts = h("div", { class: "facts", id: "run-facts" });
  const caveat = h("div", { class: "warning", id: "run-forecast-caveat", "data-testid": "run-forecast-caveat", hidden: true });
  const status = h("span", { id: "run-status", "data-testid": "run-status", "data-status": "" });
  const cancel = h("button", { type: "button", id: "run-cancel", "data-testid": "run-cancel", "data-needs": "manager", class: "btn btn-ghost btn-small btn-danger", hidden: true }, "Cancel");
  const fill = h("div", { class: "progress-fill" });
  const progress = h("div", { class: "progress", role: "progressbar", id: "run-progress", "data-testid": "run-progress", "aria-valuemin": "0" }, fill);
  const numbers = h("div", { class: "job-numbers", id: "run-numbers" });
  const message = h("p", { class: "muted small job-message", id: "run-message" });
  const error = h("div", { class: "inline-error", id: "run-error", "data-testid": "run-error", hidden: true });
  const ood = h("div", { id: "run-ood" });
  const charts = new Map(CHARTS.map(([key, id]) => [key, h("div", { id, "data-testid": id, class: "plot plot-small" })]));
  const downloads = h("div", { class: "row", id: "run-downloads" });
  const settingsBox = h("div", { id: "run-settings" }, emptyState("Loading…"));
  const reprobeButton = h("button", { type: "button", id: "run-reprobe", "data-testid": "run-reprobe", "data-needs": "manager", class: "btn btn-primary btn-small", hidden: true }, "Re-probe with the adapter");
  const movedBox = h("div", { id: "run-moved", "data-testid": "run-moved" }, emptyState("Available once the run has trained."));

  ctx.root.append(
    h("div", { class: "page-head" },
      h("p", { class: "crumbs" }, h("a", { href: "#/experiments" }, "Experiments"), " / ", crumbExperiment, h("span", null, `run #${runId}`)),
      title, facts, caveat),
    card("Training", { id: "run-job-card", actions: cancel },
      h("div", { class: "job-head" }, h("span", { class: "job-title" }, `Run #${runId}`), status),
      progress, numbers, message, error, ood),
    card("Curves", { id: "run-curves", subtitle: "Logged by TRL every step; refreshed while the run trains." },
      h("div", { class: "chart-grid" }, [...charts.values()])),
    card("What moved", { id: "run-moved-card", actions: reprobeButton, subtitle: "The trained policy (base model + this run's adapter) probed with the subset's probe settings, on the subset and the evaluation pool, against the base model." },
      movedBox),
    h("div", { class: "grid grid-2 align-start" },
      card("Downloads", { id: "run-downloads-card" }, downloads),
      card("Reproduce", { id: "run-reproduce", subtitle: "The subset, seed, settings and library versions this run used." }, settingsBox)));

  cancel.addEventListener("click", async () => {
    if (!state.run) return;
    cancel.disabled = true;
    try {
      const job = await api(`/api/jobs/${state.run.job.id}/cancel`, { method: "POST" });
      renderJob({ ...state.run, job });
      notify("Cancel requested: the run stops after the current step.");
    } catch (err) {
      reportError(err);
      cancel.disabled = false;
    }
  });

  reprobeButton.addEventListener("click", async () => {
    reprobeButton.disabled = true;
    try {
      renderMoved(await api(`/api/runs/${runId}/reprobe`, { method: "POST" }));
      pollMoved();
    } catch (err) {
      reportError(err);
    } finally {
      reprobeButton.disabled = false;
    }
  });

  // ---------- what moved ----------
  const SCOPE_TITLES = { training: "Training subset", evaluation: "Evaluation pool" };
  // Until every re-probe has its comparison, or one of its probes ended without one.
  const pollMoved = restartablePolling(ctx, async () => {
    const moved = await api(`/api/runs/${runId}/moved`);
    if (!ctx.alive) return false;
    renderMoved(moved);
    return moved.scopes.some((s) => !s.comparison && Object.values(s.status).every((x) => ACTIVE_STATUSES.has(x) || x === "succeeded"));
  });

  function renderMoved(moved) {
    if (!moved.scopes.length) {
      replace(movedBox, emptyState("Not re-probed yet: probe the trained policy to see which prompts moved between tiers."));
      return;
    }
    replace(movedBox, moved.scopes.map((scope) => h("section", { class: "stack", id: `moved-${scope.scope}`, "data-testid": `moved-${scope.scope}` },
      h("h3", null, `${SCOPE_TITLES[scope.scope] || scope.scope}: probe #${scope.probe_id} against #${scope.baseline_probe_id ?? "–"}`),
      scope.comparison ? movedComparison(scope) : h("p", { class: "muted" },
        `After training: ${scope.status.after}; base model: ${scope.status.before}.`))));
  }

  function movedComparison(scope) {
    const c = scope.comparison;
    const id = `moved-${scope.scope}`;
    return [
      h("p", { class: "muted small" }, `${fmt.int(c.prompts)} prompts; mean pass rate ${fmt.pct(c.pass_before)} → ${fmt.pct(c.pass_after)}; `
        + `${fmt.int(c.newly_solved_count)} never solved before are solved at least once now.`),
      h("table", { class: "table", id: `${id}-transitions` },
        h("thead", null, h("tr", null, h("th", null, "before ↓ / after →"), c.tiers.map((t) => h("th", { class: "num" }, t)))),
        h("tbody", null, c.tiers.map((t, i) => h("tr", null, h("th", null, t), c.transitions[i].map((n, j) => h("td", { class: `num${i === j ? " muted" : ""}` }, fmt.int(n))))))),
      h("h4", null, "Gain by the base model's tier (the capacity boundary)"),
      h("table", { class: "table", id: `${id}-by-tier` },
        h("thead", null, h("tr", null, ["tier", "prompts", "pass before", "pass after", "gain"].map((x) => h("th", null, x)))),
        h("tbody", null, c.by_tier.map((row) => h("tr", null, h("td", null, row.tier), h("td", { class: "num" }, fmt.int(row.prompts)),
          h("td", { class: "num" }, fmt.pct(row.pass_before)), h("td", { class: "num" }, fmt.pct(row.pass_after)),
          h("td", { class: "num" }, `${row.gain >= 0 ? "+" : ""}${fmt.num(100 * row.gain, 1)} pt`))))),
      c.newly_solved.length ? h("details", { id: `${id}-newly-solved` },
        h("summary", null, `Never solved before, solved now (${fmt.int(c.newly_solved_count)})`),
        h("ul", { class: "plain-list" }, c.newly_solved.map((p) => h("li", null,
          h("span", { class: "mono" }, `${p.external_id}: ${p.correct_before}/${p.k_before} → ${p.correct_after}/${p.k_after} `),
          h("span", null, p.text))))) : null,
    ];
  }

  // ---------- rendering ----------
  function renderHead(run) {
    title.textContent = `Run #${run.id} · ${run.strategy || "subset"}`;
    replace(crumbExperiment, run.experiment_id != null
      ? [h("a", { href: `#/experiments/${run.experiment_id}`, id: "run-experiment-link" }, `experiment #${run.experiment_id}`), " / "]
      : null);
    replace(facts,
      fact("Strategy", run.strategy || "–"),
      fact("Subset", `${run.subset_name || "subset"} · #${run.subset_id}`),
      fact("Model", run.model),
      fact("Grading", run.grading_policy || "–"),
      fact("Evaluation pool", poolName(run.eval_pool_id)),
      fact("Created", createdText(run)));
    // Difficulty (and so the subset's forecast) holds for the probe's model and grading only.
    caveat.hidden = run.forecast_applies !== false;
    replace(caveat, run.forecast_applies === false
      ? [h("strong", null, "The difficulty forecast does not apply to this run: "), `it ${(run.forecast_caveats || []).join("; ")}.`]
      : null);
  }

  function renderJob(run) {
    state.run = run;
    const job = run.job;
    const active = ACTIVE_STATUSES.has(job.status);
    const done = job.progress_done ?? 0;
    const total = job.progress_total ?? run.settings.max_steps ?? 0;
    const share = total > 0 ? Math.min(1, done / total) : (job.status === "succeeded" ? 1 : 0);
    status.dataset.status = job.status;
    replace(status, statusBadge(job.status));
    cancel.hidden = !active;
    cancel.disabled = job.status === "cancelling";
    cancel.textContent = job.status === "cancelling" ? "Cancelling…" : "Cancel";
    fill.className = `progress-fill ${PROGRESS_KINDS[job.status] || ""}`.trim();
    fill.style.width = `${(share * 100).toFixed(1)}%`;
    progress.setAttribute("aria-valuemax", String(total));
    progress.setAttribute("aria-valuenow", String(done));
    replace(numbers,
      h("span", { id: "run-progress-text" }, `${fmt.int(done)} / ${fmt.int(total)} steps`),
      active && job.eta_seconds != null && h("span", { id: "run-eta" }, `${fmt.duration(job.eta_seconds)} left`),
      !active && job.finished_at && h("span", { class: "muted" }, `finished ${fmt.date(job.finished_at)}`));
    message.textContent = job.message || "";
    error.hidden = job.status !== "failed";
    replace(error, job.status === "failed" ? [h("strong", null, "The run failed: "), job.error || "no error message was recorded."] : null);
  }

  function renderDownloads(run) {
    if (state.adapterShown === run.adapter_available) return;  // rebuild only when the adapter appears
    state.adapterShown = run.adapter_available;
    replace(downloads,
      downloadButton("download-metrics", "Metrics (CSV)", `/api/runs/${run.id}/metrics.csv`, `run-${run.id}-metrics.csv`),
      downloadButton("download-config", "TRL config (JSON)", `/api/runs/${run.id}/config`, `run-${run.id}-config.json`),
      run.adapter_available
        ? downloadButton("download-adapter", "LoRA adapter (zip)", `/api/runs/${run.id}/adapter`, `run-${run.id}-adapter.zip`)
        : h("span", { class: "muted small" }, "The LoRA adapter is saved when training succeeds."));
  }

  // Library versions are recorded when the worker starts training: re-render when they arrive.
  function renderSettings(run) {
    const json = JSON.stringify([run.settings, run.library_versions, run.seed, run.prompt_example]);
    if (json === state.settingsJson) return;
    state.settingsJson = json;
    const rows = [
      ["Subset", `#${run.subset_id} · ${run.subset_name || ""}`],
      ["Probe", `#${run.probe_id} · ${run.probe_model || ""}`],
      ["Prompt template", run.template || "the model's chat template"],
      ["Chat-template options", run.chat_template_options ? JSON.stringify(run.chat_template_options) : "none"],
      ["Seed", run.seed],
      ...Object.entries(run.settings || {}).map(([key, value]) => [key, settingText(key, value)]),
    ];
    replace(settingsBox,
      kvTable("run-settings-table", rows),
      run.prompt_example && h("h3", null, "First training prompt, as the model sees it"),
      run.prompt_example && h("pre", { class: "pre-line mono small", id: "run-prompt-example" }, run.prompt_example),
      h("h3", null, "Library versions"),
      kvTable("run-library-versions", Object.entries(run.library_versions || {})));
  }

  function settingText(key, value) {
    if (key === "eval_pool_id") return poolName(value);
    if (key === "ood_pool_ids") return value && value.length ? value.map(poolName).join(", ") : "none";
    return typeof value === "object" && value !== null ? JSON.stringify(value) : String(value);
  }

  function poolName(id) {
    if (id === null || id === undefined) return "none";
    const pool = state.pools.get(Number(id));
    return pool ? `${pool.name} (#${id})` : `pool #${id}`;
  }

  function renderCharts(figures) {
    for (const [key, container] of charts) renderFigure(container, figures[key]);
  }

  // pass@k on out-of-distribution pools is logged once, after training: `ood/<pool_id>/pass@<k>`.
  async function loadOod(run) {
    if (state.oodLoaded || !(run.settings.ood_pool_ids || []).length) return;
    state.oodLoaded = true;
    const metrics = await api(`/api/runs/${run.id}/metrics`);
    const rows = (metrics.keys || []).filter((k) => k.startsWith("ood/")).map((key) => {
      const [, poolId, metric] = key.split("/");
      const values = metrics.series[key].values;
      return [`${poolName(poolId)} ${metric}`, fmt.pct(values[values.length - 1])];
    });
    if (ctx.alive && rows.length) replace(ood, h("h3", null, "Out-of-distribution"), kvTable("run-ood-table", rows));
  }

  // ---------- polling ----------
  async function tick() {
    const run = await api(`/api/runs/${runId}`);
    // Figures after the run: once it reads finished, these include its last step.
    const { figures } = await api(`/api/runs/${runId}/figures`);
    if (!ctx.alive) return false;
    const first = !state.run;
    renderJob(run);
    if (first) renderHead(run);
    renderSettings(run);
    renderDownloads(run);
    renderCharts(figures || {});
    const active = ACTIVE_STATUSES.has(run.job.status);
    if (!active) await loadOod(run);
    reprobeButton.hidden = !(run.job.status === "succeeded" && run.adapter_available);
    if (!active && run.job.status === "succeeded" && !state.movedLoaded) {
      state.movedLoaded = true;
      pollMoved();
    }
    return active;
  }

  try {
    const pools = await api("/api/pools");
    state.pools = new Map(pools.map((p) => [p.id, p]));
  } catch (err) {
    reportError(err);
  }
  if (ctx.alive) startPolling(ctx, tick, 2000);

  function downloadButton(id, label, path, fallback) {
    const button = h("button", { type: "button", id, "data-testid": id, class: "btn btn-ghost btn-small" }, label);
    button.addEventListener("click", async () => {
      button.disabled = true;
      try {
        notify(`Downloaded ${await download(path, fallback)}.`);
      } catch (err) {
        reportError(err);
      } finally {
        button.disabled = false;
      }
    });
    return button;
  }
}

function fact(label, value) {
  return h("div", { class: "fact" }, h("span", { class: "fact-label" }, label), h("span", { class: "fact-value" }, value));
}

export function kvTable(id, rows) {
  if (!rows.length) return emptyState("None recorded.");
  return h("table", { class: "table kv-table", id },
    h("tbody", null, rows.map(([key, value]) => h("tr", null, h("th", { class: "mono" }, key), h("td", { class: "mono" }, String(value))))));
}
