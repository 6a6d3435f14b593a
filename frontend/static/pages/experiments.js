// Every experiment, and the single runs trained from the planner's "Train on this subset".
import { api } from "../api.js";
import { h, replace } from "../dom.js";
import { ACTIVE_STATUSES, card, createdText, emptyState, fmt, startPolling, statusBadge } from "../ui.js";
import { budgetText } from "./experiment.js";

export function renderExperiments(ctx) {
  const experimentsBox = h("div", { id: "experiment-list-box" }, emptyState("Loading experiments…"));
  const runsBox = h("div", { id: "run-list-box" }, emptyState("Loading runs…"));

  ctx.root.append(
    h("div", { class: "page-head" },
      h("h1", null, "Experiments"),
      h("p", { class: "lead" }, "Launch one from a probe's budget planner: it trains a GRPO run per strategy at the same budget and compares them.")),
    card("Experiments", { id: "experiments-card" }, experimentsBox),
    card("Single runs", { id: "single-runs-card", subtitle: "Runs trained on one frozen subset, outside an experiment." }, runsBox));

  function experimentTable(experiments) {
    if (!experiments.length) return emptyState("No experiments yet. Open a probe's budget planner to launch one.");
    return h("div", { class: "table-scroll" }, h("table", { class: "table", id: "experiment-list", "data-testid": "experiment-list" },
      h("thead", null, h("tr", null, h("th", null, "#"), h("th", null, "Name"), h("th", null, "Status"), h("th", null, "Probe"),
        h("th", null, "Budget"), h("th", { class: "num" }, "N"), h("th", null, "Strategies"), h("th", null, "Created"))),
      h("tbody", null, experiments.map((x) => h("tr", { "data-experiment-id": x.id },
        h("td", { class: "muted" }, x.id),
        h("td", null, h("a", { href: `#/experiments/${x.id}`, class: "strong", "data-testid": `experiment-link-${x.id}` }, x.name || `Experiment #${x.id}`)),
        h("td", null, statusBadge(x.status)),
        h("td", null, h("a", { href: `#/planner/${x.probe_id}` }, `#${x.probe_id}`)),
        h("td", { class: "muted nowrap" }, budgetText(x.budget)),
        h("td", { class: "num" }, fmt.int(x.n)),
        h("td", { class: "small" }, (x.strategies || []).join(", ")),
        h("td", { class: "muted nowrap" }, createdText(x)))))));
  }

  function runTable(runs) {
    if (!runs.length) return emptyState("No single runs yet. Freeze a subset in the planner and train on it.");
    return h("div", { class: "table-scroll" }, h("table", { class: "table", id: "run-list", "data-testid": "run-list" },
      h("thead", null, h("tr", null, h("th", null, "Run"), h("th", null, "Status"), h("th", null, "Subset"), h("th", null, "Strategy"),
        h("th", null, "Model"), h("th", { class: "num" }, "Steps"), h("th", null, "Created"))),
      h("tbody", null, runs.map((run) => h("tr", { "data-run-id": run.id },
        h("td", null, h("a", { href: `#/runs/${run.id}`, class: "strong" }, `#${run.id}`)),
        h("td", null, statusBadge(run.job.status)),
        h("td", null, `${run.subset_name || ""} #${run.subset_id}`),
        h("td", null, run.strategy || "–"),
        h("td", { class: "mono small" }, run.model),
        h("td", { class: "num" }, `${fmt.int(run.job.progress_done)} / ${fmt.int(run.job.progress_total)}`),
        h("td", { class: "muted nowrap" }, createdText(run)))))));
  }

  // Refreshed while anything trains, so statuses move without a reload.
  startPolling(ctx, async () => {
    const [experiments, runs] = await Promise.all([api("/api/experiments"), api("/api/runs")]);
    if (!ctx.alive) return false;
    const single = runs.filter((r) => r.experiment_id == null);
    replace(experimentsBox, experimentTable(experiments));
    replace(runsBox, runTable(single));
    return runs.some((r) => ACTIVE_STATUSES.has(r.job.status));  // experiments' runs included
  }, 3000);
}
