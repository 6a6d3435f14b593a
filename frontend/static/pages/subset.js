// A frozen subset: its facts, and labeling: export for labeling, Label Studio push/pull, import labels.
import { api, download } from "../api.js";
import { h, replace } from "../dom.js";
import { card, createdText, emptyState, field, fmt, forecastShare, notify, reportError } from "../ui.js";
import {
  exportsTable, importLabels, jobProgress, labelStudioSettings, labelingExport, webHref,
} from "../labeling.js";
import { fetchPool } from "./pool.js";

export async function renderSubset(ctx, subsetId) {
  const state = { subset: null, probe: null, pool: null, labels: null };

  const title = h("h1", { id: "subset-name", "data-testid": "subset-name-heading" }, `Subset #${subsetId}`);
  const crumbs = h("p", { class: "crumbs" }, h("a", { href: "#/pools" }, "Pools"));
  const facts = h("div", { class: "facts", id: "subset-facts", "data-testid": "subset-facts" });
  const poolLabels = h("div", { class: "muted small", "data-testid": "subset-pool-labels" });
  const sent = h("div", { id: "subset-exports", "data-testid": "subset-exports" });

  // ---------- Label Studio ----------
  const push = h("button", { type: "button", class: "btn btn-primary", "data-testid": "ls-push", id: "ls-push", "data-needs": "manager", disabled: true }, "Send to Label Studio");
  const pull = h("button", { type: "button", class: "btn btn-ghost", "data-testid": "ls-pull", id: "ls-pull", "data-needs": "manager", disabled: true }, "Pull labels");
  const lsHint = h("p", { class: "muted small", "data-testid": "ls-hint" });
  const progress = jobProgress(ctx, { testid: "ls-progress", title: "Label Studio" });
  const outcome = h("div", { "data-testid": "ls-outcome", id: "ls-outcome" });
  const settings = labelStudioSettings(ctx, {
    onChange: (connection) => {
      lsBox.open = !connection.configured;  // the form is the next step then
      syncLabelStudio();
    },
  });
  const lsBox = h("details", { class: "ls-settings-box", "data-testid": "ls-settings-box" },
    h("summary", null, "Label Studio server"), settings.element);

  function project() {
    const exports = state.labels ? state.labels.exports : [];
    return exports.find((x) => String(x.subset_id) === String(subsetId) && x.label_studio_project_id != null) || null;
  }

  function syncLabelStudio() {
    const configured = Boolean(settings.current() && settings.current().configured);
    const pushed = project();
    push.disabled = !configured || push.dataset.busy === "1";
    pull.disabled = !configured || !pushed || pull.dataset.busy === "1";
    lsHint.textContent = !configured ? "Set up the Label Studio server below first."
      : pushed ? `Latest project: #${pushed.label_studio_project_id}. Pull fetches its finished annotations and imports them.`
        : "Send creates a project with a labeling config that fits the pool's task type and imports the prompts; pull comes after.";
  }

  async function runJob(action, button) {
    button.dataset.busy = "1";
    push.disabled = pull.disabled = true;
    replace(outcome);
    progress.reset();
    try {
      const job = await api(`/api/subsets/${subsetId}/label-studio/${action}`, { method: "POST" });
      const done = await progress.follow(job);
      if (!done || !ctx.alive) return;
      await loadLabels();
      if (done.status === "succeeded") {
        const pushed = project();
        replace(outcome, h("p", { class: "ls-outcome ok" }, action === "push" ? "Sent. " : "Pulled. ", done.message || "",
          action === "push" && pushed && webHref(pushed.label_studio_url) && [" ", h("a", {
            href: webHref(pushed.label_studio_url), target: "_blank", rel: "noopener noreferrer", "data-testid": "ls-project-link",
          }, "Open the project in Label Studio →")],
          action === "pull" && [" ", h("a", { href: `#/pools/${state.subset.pool_id}`, "data-testid": "ls-pool-link" }, "See the pool's label sets →")]));
      }
    } catch (err) {
      reportError(err);
    } finally {
      delete button.dataset.busy;
      syncLabelStudio();
    }
  }
  push.addEventListener("click", () => runJob("push", push));
  pull.addEventListener("click", () => runJob("pull", pull));

  const exportBox = labelingExport({
    prefix: "labeling",
    fetchFile: (format) => download(`/api/subsets/${subsetId}/labeling-export?format=${encodeURIComponent(format)}`, `subset-${subsetId}-${format}`),
    onDone: () => loadLabels(),
  });
  const importBox = h("div", { id: "subset-import" });

  // ---------- train ----------
  // A quick_cpu run of the probe's model; the planner has every setting. Refused, with how many prompts
  // still lack an answer, until the subset is labeled.
  const trainSteps = h("input", { type: "number", id: "subset-train-steps", "data-testid": "subset-train-steps", min: 1, value: 30 });
  const trainButton = h("button", { type: "button", id: "subset-train", "data-testid": "subset-train", class: "btn btn-primary" },
    "Train on this subset");
  trainButton.addEventListener("click", async () => {
    trainButton.disabled = true;
    try {
      const settings = { max_steps: Number(trainSteps.value) };
      const run = await api("/api/runs", { method: "POST", json: { subset_id: Number(subsetId), preset: "quick_cpu", settings } });
      notify(`Run #${run.id} queued.`);
      location.hash = `#/runs/${run.id}`;
    } catch (err) {
      reportError(err);
    } finally {
      trainButton.disabled = false;
    }
  });

  ctx.root.append(
    h("div", { class: "page-head" }, crumbs, title, facts),
    card("Labeling", {
      id: "labeling-card",
      subtitle: "Get gold answers for these prompts: pass rates, the learnable-share forecast and training rewards need them.",
    },
    h("div", { class: "labeling-grid" },
      h("section", { class: "labeling-step" }, h("h3", null, "Export for labeling"), exportBox),
      h("section", { class: "labeling-step" }, h("h3", null, "Label Studio"),
        h("div", { class: "row" }, push, pull), lsHint, progress.element, outcome,
        lsBox)),
    h("section", { class: "labeling-step" }, h("h3", null, "Import labels"), poolLabels, importBox),
    h("section", { class: "labeling-step" }, h("h3", null, "Sent for labeling"), sent)),
    card("Train", { id: "subset-train-card", needs: "manager", subtitle: "GRPO with the quick_cpu preset on the probe's model; the planner offers every setting." },
      h("div", { class: "row" }, field("Steps", trainSteps), trainButton)));

  async function loadLabels() {
    if (!state.subset) return;
    try {
      state.labels = await api(`/api/pools/${state.subset.pool_id}/labels`);
    } catch (err) {
      reportError(err);
      return;
    }
    if (!ctx.alive) return;
    const l = state.labels;
    replace(poolLabels, `Answers go to the whole pool “${state.pool ? state.pool.name : state.subset.pool_id}”: `,
      h("span", { "data-testid": "subset-pool-labeled" }, `${fmt.int(l.labeled)} labeled`), `, ${fmt.int(l.unlabeled)} unlabeled.`);
    const mine = (l.exports || []).filter((x) => String(x.subset_id) === String(subsetId));
    replace(sent, mine.length === 0 ? emptyState("Not sent for labeling yet.") : exportsTable(mine));
    syncLabelStudio();
  }

  // ---------- start ----------
  try {
    state.subset = await api(`/api/subsets/${subsetId}`);
  } catch (err) {
    reportError(err);
    return;
  }
  if (!ctx.alive) return;
  const s = state.subset;
  title.textContent = s.name;
  const settled = await Promise.allSettled([api(`/api/probes/${s.probe_id}`), fetchPool(s.pool_id)]);
  if (!ctx.alive) return;
  state.probe = settled[0].status === "fulfilled" ? settled[0].value : null;
  state.pool = settled[1].status === "fulfilled" ? settled[1].value : null;
  for (const r of settled) if (r.status === "rejected") reportError(r.reason);
  replace(crumbs, h("a", { href: "#/pools" }, "Pools"), " / ",
    h("a", { href: `#/pools/${s.pool_id}`, "data-testid": "subset-pool-link" }, state.pool ? state.pool.name : `pool #${s.pool_id}`), " / ",
    h("a", { href: `#/planner/${s.probe_id}`, "data-testid": "subset-planner-link" }, `planner (probe #${s.probe_id})`), " / ",
    h("span", null, s.name));
  if (state.pool) ctx.setNav({ pool: { id: state.pool.id, name: state.pool.name } });
  ctx.setNav({ planner: { id: s.probe_id } });
  const labelFree = s.difficulty_basis === "agreement";
  replace(facts,
    fact("Subset", `#${s.id}`),
    fact("Prompts", s.n_requested !== s.n ? `${fmt.int(s.n)} (of ${fmt.int(s.n_requested)} asked)` : fmt.int(s.n)),
    fact("Strategy", s.strategy === "band" ? `band [${s.band_low}, ${s.band_high}]` : s.strategy),
    fact("Budget", budgetText(s)),
    fact("Probe", state.probe ? `#${s.probe_id} · ${state.probe.model} · k=${state.probe.k}` : `#${s.probe_id}`),
    fact("Difficulty", labelFree ? "label-free (agreement)" : "pass rate"),
    !labelFree && fact("Predicted learnable at step 0",
      forecastShare(s.predicted_learnable_share, s.predicted_learnable_share_low, s.predicted_learnable_share_high)),
    !labelFree && fact("Mean pass rate", fmt.num(s.mean_pass_rate)),
    fact("Seed · G", `${s.seed} · ${s.group_size}`),
    fact("Frozen", createdText(s)));
  replace(importBox, importLabels(ctx, s.pool_id, { onImported: () => loadLabels() }));
  await Promise.all([settings.load(), loadLabels()]);
}

function fact(label, value) {
  return h("div", { class: "fact" }, h("span", { class: "fact-label" }, label), h("span", { class: "fact-value" }, value));
}

export function budgetText(s) {
  if (s.budget_kind === "money") return `${s.budget_value} at ${s.cost_per_prompt} / prompt`;
  if (s.budget_kind === "fraction") return `${fmt.pct(s.budget_value, 0)} of the pool`;
  return `${s.budget_value} prompts`;
}
