// One experiment: a run per strategy at the same budget, and their comparison
// (learning curves, accuracy gain against learnable %, the summary table).
import { api } from "../api.js";
import { h, replace } from "../dom.js";
import { ACTIVE_STATUSES, card, createdText, emptyState, fmt, forecastShare, notify, renderFigure, reportError, restartablePolling, startPolling, statusBadge } from "../ui.js";

export async function renderExperiment(ctx, experimentId) {
  const state = { experiment: null, tableJson: "", openDetails: new Set() };

  // ---------- skeleton ----------
  const title = h("h1", { id: "experiment-name" }, `Experiment #${experimentId}`);
  const facts = h("div", { class: "facts", id: "experiment-facts" });
  const caveat = h("div", { class: "warning", id: "experiment-forecast-caveat", "data-testid": "experiment-forecast-caveat", hidden: true });
  const status = h("span", { id: "experiment-status", "data-testid": "experiment-status", "data-status": "" });
  const cancel = h("button", { type: "button", id: "experiment-cancel", "data-testid": "experiment-cancel", "data-needs": "manager", class: "btn btn-ghost btn-small btn-danger", hidden: true }, "Cancel all runs");
  const runsBox = h("div", { id: "experiment-runs-box" }, emptyState("Loading runs…"));
  const r2 = h("p", { id: "compare-r2", "data-testid": "compare-r2", class: "fit-line" }, "–");
  const plots = {
    eval_accuracy: h("div", { id: "compare-eval-accuracy", "data-testid": "compare-eval-accuracy", class: "plot plot-small" }),
    learnable_share: h("div", { id: "compare-learnable-share", "data-testid": "compare-learnable-share", class: "plot plot-small" }),
    scatter: h("div", { id: "compare-scatter", "data-testid": "compare-scatter", class: "plot plot-small" }),
  };
  const tableBox = h("div", { id: "compare-table-box" }, emptyState("Loading the comparison…"));
  const reprobeAll = h("button", { type: "button", id: "experiment-reprobe", "data-testid": "experiment-reprobe", "data-needs": "manager", class: "btn btn-primary btn-small", hidden: true }, "Re-probe every run");
  const capacityPlot = h("div", { id: "capacity-plot", "data-testid": "capacity-plot", class: "plot plot-small" });
  const capacityBox = h("div", { id: "capacity-box", "data-testid": "capacity-box" }, emptyState("Re-probe the trained runs to see where each strategy gained."));

  ctx.root.append(
    h("div", { class: "page-head" },
      h("p", { class: "crumbs" }, h("a", { href: "#/experiments" }, "Experiments"), " / ", h("span", null, `#${experimentId}`)),
      h("div", { class: "title-row" }, title, status),
      facts, caveat),
    card("Runs", { id: "experiment-runs-card", actions: cancel, subtitle: "One GRPO run per strategy, on subsets of the same size." }, runsBox),
    card("Comparison", { id: "compare-card", subtitle: "Does the share of steps with mixed rewards explain the accuracy gain?" },
      h("div", { class: "chart-grid" }, plots.eval_accuracy, plots.learnable_share),
      h("div", { class: "chart-grid" }, plots.scatter, h("div", { class: "fit-box" }, h("h3", null, "Gain ~ learnable %"), r2,
        h("p", { class: "muted small" }, "Least-squares line of the accuracy gain on the learnable % of each "
          + "succeeded run (this experiment's, and earlier ones on this pool evaluated on the same prompts)."))),
      h("h3", null, "Summary"),
      tableBox),
    card("Capacity boundary", { id: "capacity-card", actions: reprobeAll, subtitle: "Gain in pass rate on the evaluation pool by each prompt's tier under the base model: "
      + "from probes of every run's trained policy (base model + adapter) against the base model, with the subset probe's settings." },
      capacityBox, capacityPlot));

  reprobeAll.addEventListener("click", async () => {
    reprobeAll.disabled = true;
    try {
      renderCapacity(await api(`/api/experiments/${experimentId}/reprobe`, { method: "POST" }));
      pollCapacity();
    } catch (err) {
      reportError(err);
    } finally {
      reprobeAll.disabled = false;
    }
  });

  // ---------- capacity boundary ----------
  const pollCapacity = restartablePolling(ctx, async () => {
    const result = await api(`/api/experiments/${experimentId}/capacity`);
    if (!ctx.alive) return false;
    renderCapacity(result);
    return result.pending > 0;
  });

  function renderCapacity(result) {
    renderFigure(capacityPlot, result.figure);
    const waiting = result.pending ? h("p", { class: "muted small", id: "capacity-pending" }, `${result.pending} re-probe(s) of the evaluation pool still running…`) : null;
    if (!result.strategies.length) {
      replace(capacityBox, waiting || emptyState("Re-probe the trained runs to see where each strategy gained."));
      return;
    }
    const tiers = ["never", "rarely", "often", "always"].filter((t) => result.strategies.some((s) => s.tiers.some((x) => x.tier === t)));
    const promptsIn = (t) => result.strategies.flatMap((s) => s.tiers).find((x) => x.tier === t)?.prompts;
    replace(capacityBox, waiting, h("div", { class: "table-scroll" }, h("table", { class: "table", id: "capacity-table" },
      h("thead", null, h("tr", null, h("th", null, "Strategy"), h("th", { class: "num" }, "Runs"),
        tiers.map((t) => h("th", { class: "num" }, `${t} (${fmt.int(promptsIn(t))})`)))),
      h("tbody", null, result.strategies.map((s) => h("tr", { "data-strategy": s.strategy }, h("td", null, s.strategy), h("td", { class: "num" }, fmt.int(s.runs)),
        tiers.map((t) => {
          const row = s.tiers.find((x) => x.tier === t);
          return h("td", { class: "num" }, row ? `${fmt.pct(row.pass_before, 0)} → ${fmt.pct(row.pass_after, 0)}` : "–");
        })))))));
  }

  cancel.addEventListener("click", async () => {
    cancel.disabled = true;
    try {
      showExperiment(await api(`/api/experiments/${experimentId}/cancel`, { method: "POST" }));
      notify("Cancel requested for every unfinished run.");
    } catch (err) {
      reportError(err);
    } finally {
      cancel.disabled = false;
    }
  });

  // ---------- experiment and its runs ----------
  function showExperiment(x) {
    state.experiment = x;
    title.textContent = x.name || `Experiment #${x.id}`;
    status.dataset.status = x.status;
    replace(status, statusBadge(x.status));
    const runs = x.runs || [];
    cancel.hidden = !runs.some((r) => ACTIVE_STATUSES.has(r.job.status));
    replace(facts,
      fact("Probe", h("a", { href: `#/planner/${x.probe_id}` }, `#${x.probe_id}`)),
      fact("Pool", h("a", { href: `#/pools/${x.pool_id}` }, `#${x.pool_id}`)),
      fact("Budget", budgetText(x.budget)),
      fact("Prompts per run", fmt.int(x.n)),
      fact("Model", (x.settings && x.settings.model) || "–"),
      fact("Grading", (x.settings && x.settings.grading_policy) || "–"),
      fact("Steps", (x.settings && x.settings.max_steps) ?? "–"),
      fact("Created", createdText(x)));
    // The predicted learnable share comes from the probe: it holds for the probe's model and grading only.
    caveat.hidden = x.forecast_applies !== false;
    replace(caveat, x.forecast_applies === false
      ? [h("strong", null, "The difficulty forecast (predicted learnable share) does not apply: "),
        `these runs ${(x.forecast_caveats || []).join("; ")}.`]
      : null);
    replace(runsBox, runs.length === 0 ? emptyState("This experiment has no runs.")
      : h("div", { class: "table-scroll" }, h("table", { class: "table", id: "experiment-runs", "data-testid": "experiment-runs" },
        h("thead", null, h("tr", null, h("th", null, "Run"), h("th", null, "Strategy"), h("th", null, "Subset"),
          h("th", null, "Status"), h("th", null, "Progress"), h("th", null, "Note"))),
        h("tbody", null, runs.map((run) => h("tr", { "data-run-id": run.id, "data-status": run.job.status },
          h("td", null, h("a", { href: `#/runs/${run.id}`, class: "strong run-link", "data-testid": `run-link-${run.id}` }, `#${run.id}`)),
          h("td", null, run.strategy || "–"),
          h("td", { class: "muted" }, `${run.subset_name || ""} #${run.subset_id}`),
          h("td", null, statusBadge(run.job.status)),
          h("td", { class: "nowrap" }, progressCell(run.job)),
          h("td", { class: "muted small" }, run.job.status === "failed" ? (run.job.error || "failed") : (run.job.message || ""))))))));
  }

  // ---------- comparison ----------
  function renderCompare(cmp) {
    const figures = cmp.figures || {};
    for (const [key, container] of Object.entries(plots)) renderFigure(container, figures[key]);
    r2.textContent = fitText(cmp.fit || {});
    const rows = cmp.table || [];
    const json = JSON.stringify([rows, cmp.strategies]);
    if (json === state.tableJson) return;  // keep open expanders and the scroll position while polling
    state.tableJson = json;
    const repeated = (cmp.strategies || []).some((s) => s.runs > 1);
    replace(tableBox, rows.length === 0 ? emptyState("No runs to compare yet.")
      : [repeated ? summaryTable(cmp.strategies) : null, compareTable(rows)]);
  }

  // With several seeds per strategy: each strategy's mean over its runs with a 95% t interval (seed to seed).
  function summaryTable(summaries) {
    return h("div", { class: "table-scroll" }, h("h3", null, "Per strategy, over seeds (mean and 95% interval)"),
      h("table", { class: "table", id: "strategy-summary", "data-testid": "strategy-summary" },
        h("thead", null, h("tr", null, h("th", null, "Strategy"), h("th", { class: "num" }, "Runs"),
          h("th", { class: "num" }, "Final acc"), h("th", { class: "num" }, "Gain"), h("th", { class: "num" }, "Learnable %"),
          h("th", { class: "num" }, "Predicted share"), h("th", { class: "num" }, "Measured share"))),
        h("tbody", null, summaries.map((s) => h("tr", { "data-strategy": s.strategy },
          h("td", { class: "strong" }, s.strategy), h("td", { class: "num" }, fmt.int(s.runs)),
          h("td", { class: "num" }, withInterval(fmt.pct(s.final_accuracy), s.final_accuracy_interval, pctRange)),
          h("td", { class: `num nowrap ${gainClass(s.gain)}`.trim(), "data-col": "mean-gain" }, withInterval(gainText(s.gain), s.gain_interval, gainRange)),
          h("td", { class: "num" }, withInterval(s.learnable_pct == null ? "–" : `${fmt.num(s.learnable_pct, 0)}%`,
            s.learnable_pct_interval, ([lo, hi]) => `${fmt.num(lo, 0)}–${fmt.num(hi, 0)}%`)),
          h("td", { class: "num" }, fmt.pct(s.predicted_learnable_share)),
          h("td", { class: "num" }, fmt.pct(s.measured_learnable_share)))))));
  }

  function compareTable(rows) {
    return h("div", { class: "table-scroll" }, h("table", { class: "table", id: "compare-table", "data-testid": "compare-table" },
      h("thead", null, h("tr", null,
        h("th", null, "Strategy"), h("th", { class: "num" }, "N"), h("th", { class: "num" }, "Base acc"),
        h("th", { class: "num", title: "Held-out accuracy with its 95% Wilson interval" }, "Final acc"),
        h("th", { class: "num", title: "Final minus base accuracy, with a conservative 95% interval (Newcombe); “within noise” when it contains 0" }, "Gain"),
        h("th", { class: "num", title: "First evaluated step whose accuracy reached 95% of the best final accuracy of this experiment (resolution: eval_every)" }, "Steps to 95%"),
        h("th", { class: "num", title: "Share of training steps with mixed rewards in some group" }, "Learnable %"),
        h("th", { class: "num", title: "Forecast from the probe before training, with its 95% interval; none for label-free "
          + "subsets, no interval for subsets frozen before it was recorded" }, "Predicted learnable share (step 0)"),
        h("th", { class: "num", title: "Measured during training: share of groups with mixed rewards, mean over the "
          + "training steps (training moves pass rates, so it can drift from the step-0 forecast)" }, "Measured learnable share (mean over steps)"),
        h("th", null, "OOD pass@k"),
        h("th", { title: "Labels (× cost per label), probe compute (0 for random and all: they pick without it) and "
          + "training compute (sum of step times), and the gain per unit of each" }, "Cost"),
        h("th", null, "Reproduce"))),
      h("tbody", null, rows.map((row) => [h("tr", { "data-run-id": row.run_id, "data-strategy": row.strategy },
        h("td", { class: "nowrap" }, h("a", { href: `#/runs/${row.run_id}`, class: "strong" }, row.strategy), " ", statusBadge(row.status),
          h("div", { class: "muted small" }, `seed ${row.seed}`)),
        h("td", { class: "num" }, fmt.int(row.n)),
        h("td", { class: "num", "data-col": "base-accuracy" }, withInterval(fmt.pct(row.base_accuracy), row.base_accuracy_interval, pctRange)),
        h("td", { class: "num", "data-col": "final-accuracy" }, withInterval(fmt.pct(row.final_accuracy), row.final_accuracy_interval, pctRange),
          row.within_noise_of_best === false ? h("div", { class: "muted small", title: "The 95% interval of its difference from the best final accuracy excludes 0" }, "below the best") : null,
          row.best_accuracy != null && row.best_accuracy !== row.final_accuracy ? h("div", { class: "muted small" }, `best ${fmt.pct(row.best_accuracy)}`) : null),
        h("td", { class: `num nowrap ${gainClass(row.gain)}`.trim(), "data-col": "gain" }, withInterval(gainText(row.gain), row.gain_interval, gainRange),
          row.gain_beyond_noise === false ? h("div", { class: "muted small noise-flag", title: "The gain's 95% interval contains 0" }, "within noise") : null),
        h("td", { class: "num", "data-col": "steps-to-95" }, row.steps_to_95 == null ? "–" : fmt.int(row.steps_to_95),
          row.steps_share_of_all == null || row.strategy === "all" ? null
            : h("div", { class: "muted small", title: "Share of the steps the all (full-data) run took to get there" }, `${fmt.pct(row.steps_share_of_all, 0)} of all's`)),
        h("td", { class: "num" }, row.learnable_pct == null ? "–" : `${fmt.num(row.learnable_pct, 0)}%`),
        h("td", { class: "num", "data-col": "predicted-share" },
          forecastShare(row.predicted_learnable_share, row.predicted_learnable_share_low, row.predicted_learnable_share_high)),
        h("td", { class: "num", "data-col": "measured-share" }, fmt.pct(row.measured_learnable_share),
          row.learnable_share_error == null ? null : h("div", { class: "muted small", title: "Measured minus predicted" },
            `${row.learnable_share_error >= 0 ? "+" : "−"}${Math.abs(row.learnable_share_error * 100).toFixed(1)} pts vs forecast`)),
        h("td", { class: "small" }, oodText(row.ood, row.ood_base)),
        h("td", { class: "small nowrap", "data-col": "cost" }, costText(row.cost)),
        h("td", null, reproduceToggle(row))), reproduceRow(row)]))));
  }

  // The reproduce expander is a full-width row under its run (too wide for a cell); the toggle sits in
  // the run's last cell. Open rows stay open across polls.
  function reproduceRow(row) {
    return h("tr", { class: "reproduce-row", id: `reproduce-${row.run_id}`, hidden: !state.openDetails.has(row.run_id) },
      h("td", { colspan: "12" },
        h("h3", null, "Subset and seed"), kvGrid([["subset_id", row.subset_id], ["seed", row.seed], ["run", `#${row.run_id}`]]),
        h("h3", null, "Settings"), kvGrid(Object.entries(row.settings || {})),
        h("h3", null, "Library versions"), kvGrid(Object.entries(row.library_versions || {}))));
  }

  function reproduceToggle(row) {
    const button = h("button", {
      type: "button", class: "btn btn-ghost btn-small reproduce-toggle", "aria-expanded": String(state.openDetails.has(row.run_id)),
      "aria-controls": `reproduce-${row.run_id}`, "data-testid": `reproduce-toggle-${row.run_id}`,
    }, "details");
    button.addEventListener("click", () => {
      const detail = document.getElementById(`reproduce-${row.run_id}`);
      const open = detail.hidden;
      detail.hidden = !open;
      button.setAttribute("aria-expanded", String(open));
      if (open) state.openDetails.add(row.run_id);
      else state.openDetails.delete(row.run_id);
    });
    return button;
  }

  // ---------- polling ----------
  async function tick() {
    const experiment = await api(`/api/experiments/${experimentId}`);
    if (!ctx.alive) return false;
    showExperiment(experiment);
    // Compared after the runs were read: once they all read finished, this includes their last steps.
    const cmp = await api(`/api/experiments/${experimentId}/compare`);
    if (!ctx.alive) return false;
    renderCompare(cmp);
    const runs = experiment.runs || [];
    reprobeAll.hidden = !runs.some((r) => r.job.status === "succeeded");
    const active = runs.some((r) => ACTIVE_STATUSES.has(r.job.status));
    if (!active && !state.capacityLoaded) {
      state.capacityLoaded = true;
      pollCapacity();
    }
    return active;
  }
  startPolling(ctx, tick, 2000);
}

function kvGrid(rows) {
  return h("dl", { class: "kv-grid" }, rows.map(([key, value]) => h("div", { class: "kv-item" },
    h("dt", { class: "mono" }, key),
    h("dd", { class: "mono" }, typeof value === "object" && value !== null ? JSON.stringify(value) : String(value)))));
}

function fact(label, value) {
  return h("div", { class: "fact" }, h("span", { class: "fact-label" }, label), h("span", { class: "fact-value" }, value));
}

function progressCell(job) {
  const done = job.progress_done ?? 0;
  const total = job.progress_total ?? 0;
  const share = total > 0 ? Math.min(1, done / total) : 0;
  return h("span", { class: "share-cell" },
    h("span", { class: "diff-track wide" }, h("span", { class: "diff-fill share", style: { width: `${Math.round(share * 100)}%` } })),
    h("span", { class: "muted small" }, `${fmt.int(done)} / ${fmt.int(total)}`));
}

export function budgetText(budget) {
  if (!budget) return "–";
  if (budget.kind === "money") return `${budget.value} at ${budget.cost_per_prompt} / prompt`;
  if (budget.kind === "fraction") return `${fmt.pct(budget.value, 0)} of the pool`;
  return `${budget.value} prompts`;
}

function fitText(fit) {
  if (fit.r2 == null) {
    return fit.n_points >= 2 ? `R² undefined (${fit.n_points} runs; the gains or learnable % do not vary yet)`
      : "R² needs at least two finished runs with an evaluation pool.";
  }
  const r2 = fit.r2_interval ? ` (95% bootstrap ${fmt.num(fit.r2_interval[0])}–${fmt.num(fit.r2_interval[1])})` : "";
  return `R² = ${fmt.num(fit.r2)}${r2} · slope ${fmt.num(fit.slope * 100, 2)} accuracy points per learnable % · ${fit.n_points} runs`;
}

// A value with its 95% interval under it, when there is one.
function withInterval(text, interval, range) {
  if (!interval) return text;
  return h("span", null, text, h("div", { class: "muted small interval" }, range(interval)));
}

const pctRange = ([low, high]) => `${(low * 100).toFixed(1)}–${(high * 100).toFixed(1)}%`;
const gainRange = ([low, high]) => `${gainText(low)} to ${gainText(high)}`;

// "30 labels · 15.00 · probe 2m 40s · train 3m 20s · +2.0 pts per label unit · +20 pts per compute-hour"
function costText(cost) {
  if (!cost) return "–";
  const parts = [`${fmt.int(cost.labels)} labels${cost.label_cost != null ? ` · ${fmt.num(cost.label_cost)}` : ""}`,
    `probe ${cost.probe_samples ? fmt.duration(cost.probe_seconds) : "none"} · train ${fmt.duration(cost.training_seconds)}`];
  const per = [];
  if (cost.gain_per_label_cost != null) per.push(`${gainText(cost.gain_per_label_cost)} per label unit`);
  if (cost.gain_per_compute_hour != null) per.push(`${gainText(cost.gain_per_compute_hour)} per ${cost.device === "cpu" ? "CPU" : "GPU"}-hour`);
  return h("span", null, parts.map((p) => h("div", null, p)), per.length ? h("div", { class: "muted" }, per.join(" · ")) : null);
}

// Gains are accuracy differences (fractions): shown as signed percentage points.
function gainText(gain) {
  if (typeof gain !== "number") return "–";
  return `${gain >= 0 ? "+" : "−"}${Math.abs(gain * 100).toFixed(1)} pts`;
}

function gainClass(gain) {
  if (typeof gain !== "number" || gain === 0) return "";
  return gain > 0 ? "gain-up" : "gain-down";
}

// "pool: 10.0% → 15.0%" when the base model's pass@k is known (`ood_base`), else the trained one only.
function oodText(ood, base) {
  const entries = Object.entries(ood || {});
  if (!entries.length) return "–";
  return entries.map(([name, value]) => (base && base[name] != null
    ? `${name}: ${fmt.pct(base[name])} → ${fmt.pct(value)}`
    : `${name}: ${fmt.pct(value)}`)).join(" · ");
}
