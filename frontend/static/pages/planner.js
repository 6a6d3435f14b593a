import { ApiError, api, download, downloadPost } from "../api.js";
import { h, replace } from "../dom.js";
import { badge, card, clearError, createdText, debounce, emptyState, field, fmt, forecastShare, notify, renderFigure, reportError, select, statusBadge } from "../ui.js";
import { labelingExport, trustPanel } from "../labeling.js";
import { trainingForm } from "../training.js";
import { difficultyBar, fetchPool } from "./pool.js";

export const STRATEGIES = [
  ["hard", "hard — the N highest difficulties"],
  ["easy", "easy — the N lowest difficulties"],
  ["medium", "medium — the N around the median"],
  ["random", "random — N uniformly at random"],
  ["base_wrong", "base_wrong — prompts the model's first answer gets wrong"],
  ["base_right", "base_right — prompts the model's first answer gets right (base_wrong's contrast)"],
  ["band", "band — N at random with pass rate in [lo, hi]"],
  ["learnable", "learnable — highest chance of mixed rewards in a group"],
  ["all", "all — the whole pool, whatever the budget (the full-data baseline)"],
];
const KINDS = [["count", "count"], ["fraction", "fraction"], ["money", "money"]];
const EXPORTS = ["jsonl", "csv", "parquet"];
// Strategies defined on pass rates: a label-free probe (difficulty = 1 − agreement) refuses them.
const PASS_RATE_STRATEGIES = new Set(["band", "learnable"]);
const SHARE_HINT = "at step 0: mean over the picked prompts of the chance a GRPO group of G gets mixed rewards, "
  + "1 − pᴳ − (1 − p)ᴳ, averaged over each prompt's posterior p given its probe counts (beta-binomial, prior fitted "
  + "to the probe). Before training: training moves p.";
// POST /api/experiments' default strategies: not band (it needs its limits chosen), base_right or all (the
// baselines, asked for when wanted: all trains on the whole pool).
const EXPERIMENT_DEFAULTS = new Set(["hard", "easy", "medium", "random", "base_wrong", "learnable"]);

export async function renderPlanner(ctx, probeId) {
  const state = { probe: null, pool: null, seq: 0, last: null };

  // ---------- inputs ----------
  const kind = select({ id: "budget-kind", "data-testid": "budget-kind", name: "kind", value: "count" }, KINDS);
  const value = h("input", { type: "number", id: "budget-value", "data-testid": "budget-value", name: "value", value: "20", min: "0", step: "1", required: true });
  const cost = h("input", { type: "number", id: "cost-per-prompt", name: "cost_per_prompt", value: "1", min: "0", step: "0.01" });
  const strategy = select({ id: "planner-strategy", "data-testid": "planner-strategy", name: "strategy", value: "hard" }, STRATEGIES);
  const bandLow = h("input", { type: "number", id: "band-low", name: "band_low", value: "0.1", min: "0", max: "1", step: "0.05" });
  const bandHigh = h("input", { type: "number", id: "band-high", name: "band_high", value: "0.9", min: "0", max: "1", step: "0.05" });
  const groupSize = h("input", { type: "number", id: "group-size", name: "group_size", value: "8", min: "2", step: "1" });
  const seed = h("input", { type: "number", id: "planner-seed", name: "seed", value: "0", step: "1" });

  const costField = field("Cost per prompt", cost, { id: "cost-field", hint: "N = ⌊budget / cost⌋" });
  const bandFields = h("div", { class: "grid grid-2", id: "band-fields" },
    field("Band low (pass rate)", bandLow), field("Band high (pass rate)", bandHigh));
  const valueField = field("Budget", value, { id: "budget-value-field" });

  const form = h("form", { id: "planner-form", "data-testid": "planner-form", class: "stack" },
    h("div", { class: "grid grid-2" }, field("Budget kind", kind), valueField),
    costField,
    field("Strategy", strategy, { hint: "Ties are broken by a seeded shuffle: the same inputs always pick the same prompts." }),
    bandFields,
    h("div", { class: "grid grid-2" },
      field("Group size G", groupSize, { hint: "GRPO generations per prompt" }),
      field("Seed", seed)));

  const DEFAULTS = { count: "20", fraction: "0.1", money: "100" };
  function syncVisibility() {
    costField.hidden = kind.value !== "money";
    bandFields.hidden = strategy.value !== "band";
    valueField.querySelector(".field-label").textContent =
      kind.value === "count" ? "Number of prompts" : kind.value === "fraction" ? "Fraction of the pool (0–1)" : "Budget (money)";
    value.step = kind.value === "fraction" ? "0.01" : kind.value === "count" ? "1" : "0.01";
  }
  kind.addEventListener("change", () => { value.value = DEFAULTS[kind.value]; syncVisibility(); });
  strategy.addEventListener("change", syncVisibility);

  function body() {
    const money = kind.value === "money";
    return {
      probe_id: Number(probeId),
      strategy: strategy.value,
      budget: { kind: kind.value, value: Number(value.value), cost_per_prompt: money ? Number(cost.value) : null },
      group_size: Number(groupSize.value),
      band_low: Number(bandLow.value),
      band_high: Number(bandHigh.value),
      seed: Number(seed.value),
    };
  }

  // ---------- outputs ----------
  const nPicked = h("div", { class: "stat-value", id: "n-picked", "data-testid": "n-picked" }, "–");
  const requested = h("div", { class: "stat-hint", id: "n-requested" });
  const share = h("div", { class: "stat-value", id: "predicted-share", "data-testid": "predicted-share" }, "–");
  const shareInterval = h("div", { class: "stat-hint", id: "predicted-share-interval", "data-testid": "predicted-share-interval" });
  const shareLabel = h("div", { class: "stat-label", id: "predicted-share-label" }, "predicted learnable share at step 0");
  const meanPass = h("div", { class: "stat-value", id: "mean-pass-rate" }, "–");
  const meanPassLabel = h("div", { class: "stat-label", id: "mean-pass-rate-label" }, "mean pass rate");
  const warning = h("div", { class: "warning", id: "clamp-warning", "data-testid": "clamp-warning", role: "status", hidden: true });
  const caveat = h("div", { class: "warning", id: "label-free-caveat", "data-testid": "label-free-caveat", role: "note", hidden: true });
  // What the papers would predict for this pool at this budget, with the experiment that tests it.
  const adviceBox = h("div", { class: "note advice", id: "regime-advice", "data-testid": "regime-advice", role: "note", hidden: true });
  const updating = h("span", { class: "muted small", id: "preview-state" });

  const headline = h("div", { class: "headline" },
    h("div", { class: "stat stat-hero", title: `Predicted learnable share ${SHARE_HINT}` }, share, shareLabel, shareInterval),
    h("div", { class: "stat" }, nPicked, h("div", { class: "stat-label" }, "prompts picked"), requested),
    h("div", { class: "stat" }, meanPass, meanPassLabel));

  const figure = h("div", { id: "selection-histogram", "data-testid": "selection-histogram", class: "plot" });
  const comparison = h("div", { id: "comparison-box" }, emptyState("Waiting for the first preview…"));
  const picked = h("div", { id: "picked-box" });

  const subsetName = h("input", { type: "text", id: "subset-name", "data-testid": "subset-name", placeholder: "e.g. hard-10pct", required: true });
  const freezeButton = h("button", { type: "button", id: "freeze-button", "data-testid": "freeze-button", class: "btn btn-primary" }, "Freeze subset");
  const frozen = h("div", { id: "frozen-subset", "data-testid": "frozen-subset", hidden: true });
  const subsetList = h("div", { id: "subset-list" }, emptyState("Loading…"));
  const selectionExport = labelingExport({
    prefix: "selection-labeling",
    label: "Download the picks",
    fetchFile: (format) => downloadPost("/api/selections/labeling-export", { ...body(), format },
      `probe-${probeId}-${strategy.value}-${format}`),
  });

  // Label-free probes: how far agreement ranks like pass rate, at the budget's N (shown once the probe is known).
  const trust = trustPanel(ctx, { testid: "trust" });
  const trustCard = card("Can this label-free pick be trusted?", {
    id: "trust-card",
    subtitle: "Agreement against pass rate on labeled prompts, at the N this budget picks.",
  }, trust.element);
  trustCard.hidden = true;
  let trustN = null;

  // ---------- training inputs (shared by experiments and single runs) ----------
  const training = trainingForm(ctx);
  const strategyChecks = h("div", { class: "checks", id: "experiment-strategies", "data-testid": "experiment-strategies" },
    STRATEGIES.map(([name, label]) => h("label", { class: "check" },
      h("input", { type: "checkbox", name: "experiment-strategy", value: name, checked: EXPERIMENT_DEFAULTS.has(name) }),
      h("span", null, label))));
  const experimentName = h("input", { type: "text", id: "experiment-name", "data-testid": "experiment-name", placeholder: "optional" });
  const experimentSeeds = h("input", { type: "text", id: "experiment-seeds", "data-testid": "experiment-seeds", placeholder: "e.g. 0, 1, 2" });
  const launchButton = h("button", { type: "button", id: "launch-experiment", "data-testid": "launch-experiment", class: "btn btn-primary" }, "Launch experiment");
  const experimentList = h("div", { id: "probe-experiments" });
  const launchCard = card("Launch experiment", { needs: "manager",
    id: "launch-card",
    subtitle: "One subset per strategy at the budget above (band uses its limits), one GRPO run each, compared side by side. "
      + "“Train on this subset” uses the same training settings.",
  },
  h("div", { class: "stack" },
    field("Strategies", strategyChecks),
    training.element,
    h("div", { class: "grid grid-3" }, field("Experiment name", experimentName),
      field("Seeds (optional)", experimentSeeds, { hint: "Each strategy once per seed: the comparison then shows means with 95% intervals" }),
      h("div")),
    h("div", { class: "row" }, launchButton)),
  experimentList);

  // The demo pool's one-click experiment (POST /api/experiments/demo): shown once the pool is known to be it.
  const demoButton = h("button", { type: "button", id: "launch-demo-experiment", "data-testid": "launch-demo-experiment", class: "btn btn-primary" },
    "Run the demo experiment");
  const demoCard = card("Demo experiment", { needs: "manager",
    id: "demo-experiment-card",
    subtitle: "hard, easy, random and learnable at the same N = 30, trained with the demo_cpu preset and evaluated on the "
      + "held-out demo pool (created if missing): about 10 minutes on two CPU cores, one seed.",
  }, h("div", { class: "row" }, demoButton));
  demoCard.hidden = true;
  demoButton.addEventListener("click", async () => {
    demoButton.disabled = true;
    try {
      const experiment = await api("/api/experiments/demo", { method: "POST", json: { probe_id: Number(probeId) } });
      notify(`Demo experiment #${experiment.id} launched with ${experiment.runs.length} runs.`);
      location.hash = `#/experiments/${experiment.id}`;
    } catch (err) {
      reportError(err);
    } finally {
      demoButton.disabled = false;
    }
  });

  const head = h("div", { class: "page-head" },
    h("p", { class: "crumbs" }, h("a", { href: "#/pools" }, "Pools"), " / ",
      h("a", { href: "#/pools", id: "crumb-pool" }, "pool"), " / ", h("span", null, `planner`)),
    h("h1", null, "Budget planner"),
    h("div", { class: "facts", id: "planner-facts" }, h("div", { class: "fact" }, h("span", { class: "fact-label" }, "Probe"), h("span", { class: "fact-value" }, `#${probeId}`))));

  ctx.root.append(head,
    h("div", { class: "planner-grid" },
      h("div", { class: "planner-side" },
        card("Budget and strategy", { subtitle: "Every change previews the pick." }, form),
        card("Freeze this subset", { needs: "manager", subtitle: "Save the pick so it can be exported and trained on." },
          h("div", { class: "stack" }, field("Subset name", subsetName), h("div", { class: "row" }, freezeButton)),
          frozen),
        card("Send the picks for labeling", {
          id: "selection-labeling-card",
          subtitle: "The prompts this preview picks, as a file for annotators (freeze first to send to Label Studio from the subset's page).",
        }, selectionExport)),
      h("div", { class: "planner-main" },
        card("Preview", { actions: updating }, headline, warning, caveat, adviceBox, figure),
        trustCard,
        card("Strategies at this budget", { subtitle: "Same N for every strategy. Click a row to switch to it." }, comparison),
        card("Picked prompts", { id: "picked-card" }, picked))),
    demoCard,
    launchCard,
    card("Frozen subsets of this probe", { id: "subsets-card" }, subsetList));

  // ---------- preview ----------
  // A preview clears only its own earlier error: one finishing late (e.g. after typing a subset name)
  // must not wipe the message of a freeze, training or experiment request shown meanwhile.
  let previewFailed = false;
  async function preview() {
    const seq = ++state.seq;
    updating.textContent = "updating…";
    try {
      const result = await api("/api/selections/preview", { method: "POST", json: body() });
      if (!ctx.alive || seq !== state.seq) return;
      if (previewFailed) clearError();
      previewFailed = false;
      state.last = result;
      renderPreview(result);
    } catch (err) {
      if (!ctx.alive || seq !== state.seq) return;
      previewFailed = true;
      reportError(err);
    } finally {
      if (seq === state.seq) updating.textContent = "";
    }
  }
  const schedule = debounce(preview, 250);
  ctx.onCleanup(schedule.cancel);
  let touched = false;  // once the user edits, loading finishing late must not overwrite their input
  form.addEventListener("input", () => { touched = true; });
  form.addEventListener("change", () => { touched = true; });
  form.addEventListener("input", schedule);
  form.addEventListener("change", schedule);
  form.addEventListener("submit", (e) => { e.preventDefault(); schedule(); });

  function renderAdvice(advice) {
    adviceBox.hidden = !advice;
    if (!advice) return;
    adviceBox.dataset.regime = advice.regime;
    const launch = h("a", { href: "#launch-card", class: "strong" }, "Launch that experiment");
    launch.addEventListener("click", (event) => {
      event.preventDefault();
      launchCard.scrollIntoView({ behavior: "smooth" });
    });
    replace(adviceBox,
      h("strong", null, `Regime: ${advice.regime.replace("_", " ")}. `), advice.profile, " ",
      h("p", null, advice.prediction), h("p", { class: "muted small" }, advice.test, " ", launch, "."));
  }

  function renderPreview(r) {
    const agreement = r.difficulty_basis === "agreement";
    nPicked.textContent = fmt.int(r.n);
    requested.textContent = r.requested != null && r.requested !== r.n ? `${fmt.int(r.requested)} requested` : "";
    share.textContent = fmt.pct(r.predicted_learnable_share);
    shareLabel.textContent = agreement ? "no learnable-share forecast (label-free)" : "predicted learnable share at step 0";
    shareInterval.textContent = agreement ? "needs pass rates: label the prompts"
      : `95% interval ${fmt.interval(r.predicted_learnable_share_low, r.predicted_learnable_share_high)}, before training`;
    meanPass.textContent = fmt.num(agreement ? r.mean_agreement : r.mean_pass_rate);
    meanPassLabel.textContent = agreement ? "mean agreement" : "mean pass rate";
    warning.hidden = !r.warning;
    warning.textContent = r.warning || "";
    caveat.hidden = !r.caveat;
    caveat.textContent = r.caveat || "";
    renderAdvice(r.advice);
    if (!subsetName.dataset.touched) subsetName.value = `${r.strategy || strategy.value}-${r.n}`;
    renderFigure(figure, r.figure);
    renderComparison(r.comparison || [], r.strategy || strategy.value, agreement);
    renderPicked(r.prompts || [], r.n, agreement);
    syncTrust();
  }

  function syncTrust() {
    const r = state.last;
    if (!r || !state.probe || !state.probe.label_free || !(r.n > 0) || r.n === trustN) return;
    trustN = r.n;
    trustCard.hidden = false;
    trust.load(state.probe, { n: r.n });
  }
  subsetName.addEventListener("input", () => { subsetName.dataset.touched = "1"; });

  function renderComparison(rows, current, agreement) {
    const best = Math.max(...rows.map((x) => x.predicted_learnable_share ?? -1));
    // Label-free: no forecast column at all (agreement is not a success rate).
    const shareHead = !agreement
      && h("th", { class: "num", title: `Predicted learnable share ${SHARE_HINT} With its 95% interval.` }, "Learnable share at step 0");
    replace(comparison, h("div", { class: "table-scroll" }, h("table", { class: "table compare", id: "strategy-comparison", "data-testid": "strategy-comparison" },
      h("thead", null, h("tr", null,
        h("th", null, "Strategy"), h("th", { class: "num" }, "Picked"),
        shareHead,
        h("th", { class: "num" }, agreement ? "Mean agreement" : "Mean pass"),
        h("th", { class: "num", title: agreement ? "1 − agreement" : "1 − pass rate" }, "Mean difficulty"),
        h("th", { class: "num", title: "Share of this pick also picked by hard" }, "Overlap hard"))),
      h("tbody", null, rows.map((row) => {
        const tr = h("tr", { class: `clickable ${row.strategy === current ? "current" : ""}`.trim(), "data-strategy": row.strategy },
          h("td", { class: "nowrap" }, h("span", { class: "strong" }, row.strategy), row.strategy === current && badge("selected", "info")),
          h("td", { class: "num" }, fmt.int(row.n_picked)),
          !agreement && h("td", { class: "num" },
            h("span", { class: "share-cell" },
              h("span", { class: "diff-track wide" }, h("span", { class: "diff-fill share", style: { width: `${Math.round((row.predicted_learnable_share || 0) * 100)}%` } })),
              forecastShare(row.predicted_learnable_share, row.predicted_learnable_share_low, row.predicted_learnable_share_high,
                { strong: row.predicted_learnable_share != null && row.predicted_learnable_share === best }))),
          h("td", { class: "num" }, fmt.num(agreement ? row.mean_agreement : row.mean_pass_rate)),
          h("td", { class: "num" }, fmt.num(row.mean_difficulty)),
          h("td", { class: "num" }, fmt.pct(row.overlap_with_hard, 0)));
        tr.addEventListener("click", () => {
          if (strategy.value === row.strategy) return;
          strategy.value = row.strategy;
          syncVisibility();
          schedule();
        });
        return tr;
      })))));
  }

  function renderPicked(prompts, n, agreement) {
    const head = document.querySelector("#picked-card h2");
    if (head) head.textContent = prompts.length < n ? `Picked prompts (first ${prompts.length} of ${fmt.int(n)})` : `Picked prompts (${fmt.int(n)})`;
    if (!prompts.length) {
      replace(picked, emptyState("No prompts picked with these settings."));
      return;
    }
    replace(picked, h("div", { class: "table-scroll" }, h("table", { class: "table prompts", id: "picked-prompts", "data-testid": "picked-prompts" },
      h("thead", null, h("tr", null, h("th", null, "ID"), h("th", null, "Prompt"), h("th", null, "Answer"),
        h("th", { class: "num" }, agreement ? "Agreement" : "Pass rate"), h("th", { class: "num" }, "Difficulty"))),
      h("tbody", null, prompts.map((p) => h("tr", { "data-prompt-id": p.id },
        h("td", { class: "mono nowrap" }, p.external_id ?? p.id),
        h("td", { class: "prompt-cell" }, h("div", { class: "clamp" }, p.text)),
        h("td", { class: "answer-cell mono" }, p.answer ?? "–"),
        h("td", { class: "num" }, fmt.num(agreement ? p.agreement : p.pass_rate)),
        h("td", { class: "num" }, difficultyBar(p.difficulty))))))));
  }

  // ---------- freeze and export ----------
  freezeButton.addEventListener("click", async () => {
    const name = subsetName.value.trim();
    if (!name) {
      reportError(new Error("Give the subset a name first."));
      subsetName.focus();
      return;
    }
    freezeButton.disabled = true;
    try {
      const subset = await api("/api/subsets", { method: "POST", json: { ...body(), name } });
      notify(`Froze subset "${subset.name}" with ${subset.n} prompts.`);
      showFrozen(subset);
      await loadSubsets();
    } catch (err) {
      reportError(err);
    } finally {
      freezeButton.disabled = false;
    }
  });

  async function exportSubset(subset, format, button) {
    button.disabled = true;
    try {
      const name = await download(`/api/subsets/${subset.id}/export?format=${format}`, `subset-${subset.id}.${format}`);
      notify(`Downloaded ${name}.`);
    } catch (err) {
      reportError(err);
    } finally {
      button.disabled = false;
    }
  }

  function exportButtons(subset, withIds) {
    return h("div", { class: "row export-row" }, EXPORTS.map((format) => {
      const button = h("button", {
        type: "button", class: "btn btn-ghost btn-small",
        id: withIds ? `export-${format}` : null,
        "data-testid": withIds ? `export-${format}` : `export-${format}-${subset.id}`,
      }, format === "jsonl" ? "JSONL" : format === "csv" ? "CSV" : "Parquet");
      button.addEventListener("click", () => exportSubset(subset, format, button));
      return button;
    }));
  }

  function showFrozen(subset) {
    frozen.hidden = false;
    replace(frozen, h("div", { class: "frozen" },
      h("div", { class: "frozen-head" }, badge("frozen", "ok"), h("span", { class: "strong", id: "frozen-name" }, subset.name), h("span", { class: "muted" }, ` · subset #${subset.id}`),
        h("a", { href: `#/subsets/${subset.id}`, id: "frozen-subset-link", "data-testid": "frozen-subset-link", class: "push-right" }, "Label it →")),
      h("p", { class: "muted small", id: "frozen-forecast", "data-testid": "frozen-forecast" },
        subset.difficulty_basis === "agreement"
          ? `${fmt.int(subset.n)} prompts · ${subset.strategy} · label-free: ranked by agreement, no learnable-share forecast`
          : [`${fmt.int(subset.n)} prompts · ${subset.strategy} · predicted learnable share at step 0 `,
            forecastShare(subset.predicted_learnable_share, subset.predicted_learnable_share_low, subset.predicted_learnable_share_high),
            ` · mean pass rate ${fmt.num(subset.mean_pass_rate)}`]),
      exportButtons(subset, true),
      h("div", { class: "row train-row" }, trainButton(subset),
        h("span", { class: "muted small" }, "with the training settings under “Launch experiment”"))));
  }

  function trainButton(subset) {
    const button = h("button", { type: "button", id: "train-subset", "data-testid": "train-subset", "data-needs": "manager", class: "btn btn-primary btn-small" }, "Train on this subset");
    button.addEventListener("click", async () => {
      button.disabled = true;
      try {
        const run = await api("/api/runs", { method: "POST", json: { subset_id: subset.id, ...training.request() } });
        notify(`Run #${run.id} queued.`);
        location.hash = `#/runs/${run.id}`;
      } catch (err) {
        reportError(err);
      } finally {
        button.disabled = false;
      }
    });
    return button;
  }

  // ---------- experiments ----------
  launchButton.addEventListener("click", async () => {
    const strategies = [...strategyChecks.querySelectorAll("input:checked")].map((input) => input.value);
    if (!strategies.length) {
      reportError(new Error("Pick at least one strategy to compare."));
      return;
    }
    const b = body();
    const seedText = experimentSeeds.value.trim();
    const seeds = seedText ? seedText.split(/[\s,]+/).filter(Boolean).map(Number) : null;
    if (seeds && seeds.some((x) => !Number.isInteger(x) || x < 0)) {
      reportError(new Error(`Seeds "${seedText}": write whole numbers ≥ 0 separated by commas, e.g. 0, 1, 2.`));
      return;
    }
    const json = {
      probe_id: b.probe_id, budget: b.budget, strategies, name: experimentName.value.trim() || null,
      ...training.request(), band_low: b.band_low, band_high: b.band_high, ...(seeds ? { seeds } : {}),
    };
    launchButton.disabled = true;
    try {
      const experiment = await api("/api/experiments", { method: "POST", json });
      notify(`Experiment #${experiment.id} launched with ${experiment.runs ? experiment.runs.length : strategies.length} runs.`);
      location.hash = `#/experiments/${experiment.id}`;
    } catch (err) {
      reportError(err);
    } finally {
      launchButton.disabled = false;
    }
  });

  async function loadExperiments() {
    try {
      const experiments = await api(`/api/experiments?probe_id=${encodeURIComponent(probeId)}`);
      if (!ctx.alive || !experiments.length) return;
      replace(experimentList, h("h3", null, "Experiments on this probe"),
        h("ul", { class: "link-list" }, experiments.map((x) => h("li", null,
          h("a", { href: `#/experiments/${x.id}` }, x.name || `Experiment #${x.id}`), " ", statusBadge(x.status),
          h("span", { class: "muted small" }, ` ${fmt.int(x.n)} prompts · ${(x.strategies || []).join(", ")} · ${createdText(x)}`)))));
    } catch (err) {
      reportError(err);
    }
  }

  async function loadSubsets() {
    try {
      const subsets = await api(`/api/subsets?probe_id=${encodeURIComponent(probeId)}`);
      if (!ctx.alive) return;
      replace(subsetList, subsets.length === 0 ? emptyState("No frozen subsets yet.")
        : h("div", { class: "table-scroll" }, h("table", { class: "table", id: "subset-table", "data-testid": "subset-table" },
          h("thead", null, h("tr", null, h("th", null, "#"), h("th", null, "Name"), h("th", null, "Strategy"), h("th", { class: "num" }, "N"),
            h("th", null, "Budget"), h("th", { class: "num", title: `Predicted learnable share ${SHARE_HINT} With its 95% interval; none for label-free probes.` }, "Predicted learnable at step 0"),
            h("th", null, "Created"), h("th", null, "Export"))),
          h("tbody", null, subsets.map((s) => h("tr", { "data-subset-id": s.id },
            h("td", { class: "muted" }, s.id),
            h("td", { class: "strong" }, h("a", { href: `#/subsets/${s.id}`, "data-testid": `subset-link-${s.id}` }, s.name)),
            h("td", null, s.strategy, s.strategy === "band" ? h("span", { class: "muted small" }, ` [${s.band_low}, ${s.band_high}]`) : null),
            h("td", { class: "num" }, fmt.int(s.n)),
            h("td", { class: "muted nowrap" }, budgetText(s)),
            h("td", { class: "num" }, forecastShare(s.predicted_learnable_share, s.predicted_learnable_share_low, s.predicted_learnable_share_high)),
            h("td", { class: "muted nowrap" }, createdText(s)),
            h("td", null, exportButtons(s, false))))))));
    } catch (err) {
      reportError(err);
    }
  }

  // ---------- start ----------
  syncVisibility();
  ctx.setNav({ planner: { id: Number(probeId) } });
  try {
    state.probe = await api(`/api/probes/${probeId}`);
  } catch (err) {
    if (!(err instanceof ApiError) || err.status !== 405) reportError(err);
  }
  if (!ctx.alive) return;
  if (state.probe) {
    const p = state.probe;
    training.setProbe(p);  // runs train the probe's model unless another is picked and confirmed
    replace(document.getElementById("planner-facts"),
      fact("Probe", `#${p.id}`), fact("Model", p.model), fact("Sampling", `k = ${p.k}, T = ${p.temperature}`),
      fact("Mode", p.label_free ? "label-free (agreement)" : "gold answers (pass rate)"),
      fact("Grading", p.grading_policy));
    if (p.label_free) {
      // band and learnable need pass rates; the API refuses them on a label-free probe.
      for (const option of strategy.options) {
        if (!PASS_RATE_STRATEGIES.has(option.value)) continue;
        option.disabled = true;
        option.textContent = `${option.value} — needs pass rates: label the prompts`;
      }
      if (PASS_RATE_STRATEGIES.has(strategy.value)) { strategy.value = "hard"; syncVisibility(); }
    }
    try {
      state.pool = await fetchPool(p.pool_id);
      const crumb = document.getElementById("crumb-pool");
      crumb.textContent = state.pool.name;
      crumb.href = `#/pools/${state.pool.id}`;
      ctx.setNav({ pool: { id: state.pool.id, name: state.pool.name } });
      document.getElementById("planner-facts").append(fact("Pool", `${state.pool.name} · ${fmt.int(state.pool.prompt_count)} prompts`));
      demoCard.hidden = !state.pool.is_demo;
      if (state.pool.prompt_count) {
        DEFAULTS.count = String(Math.max(1, Math.round(state.pool.prompt_count * 0.1)));
        if (kind.value === "count" && !touched) value.value = DEFAULTS.count;
      }
    } catch (err) {
      reportError(err);
    }
  }
  if (!touched) preview();  // otherwise the user's edit already scheduled one
  else syncTrust();  // a preview that came before the probe did not know it was label-free
  loadSubsets();
  loadExperiments();
}

function fact(label, value) {
  return h("div", { class: "fact" }, h("span", { class: "fact-label" }, label), h("span", { class: "fact-value" }, value));
}

function budgetText(s) {
  if (s.budget_kind === "money") return `${s.budget_value} at ${s.cost_per_prompt} / prompt`;
  if (s.budget_kind === "fraction") return `${fmt.pct(s.budget_value, 0)} of the pool`;
  return `${s.budget_value} prompts`;
}
