import { ApiError, api } from "../api.js";
import { h, replace } from "../dom.js";
import { badge, card, clearPlot, createdText, emptyState, field, fmt, notify, renderFigure, reportError, select, stat } from "../ui.js";
import { exportsTable, importLabels, importReport, jobProgress, trustPanel, undoReport } from "../labeling.js";

const ACTIVE = new Set(["queued", "running", "cancelling"]);
const PAGE_SIZE = 50;

// GET /api/pools/{id}; falls back to the list when the server has no single-pool route.
export async function fetchPool(poolId) {
  try {
    return await api(`/api/pools/${poolId}`);
  } catch (err) {
    if (!(err instanceof ApiError) || (err.status !== 405 && err.status !== 404)) throw err;
    const pools = await api("/api/pools");
    const pool = pools.find((p) => String(p.id) === String(poolId));
    if (!pool) throw new ApiError(404, `Pool ${poolId} does not exist; see the pool list.`);
    return pool;
  }
}

export async function renderPool(ctx, poolId) {
  const state = {
    pool: null,
    probes: [],
    probe: null,       // the selected probe
    job: null,         // its job
    pollTimer: null,
    order: "position",
    offset: 0,
    scoredProbeId: null,  // probe whose scores the table and chart show
  };
  const stopPolling = () => { clearTimeout(state.pollTimer); state.pollTimer = null; };
  ctx.onCleanup(stopPolling);

  // ---------- skeleton ----------
  const title = h("h1", { id: "pool-name" }, `Pool #${poolId}`);
  const facts = h("div", { class: "facts", id: "pool-facts" });
  const banner = h("div", { class: "banner", id: "label-free-banner", "data-testid": "label-free-banner", hidden: true },
    h("strong", null, "Label-free mode. "),
    "This pool has no gold answers, so difficulty is 1 − agreement: the share of the k sampled answers that differ from the most common one. ",
    "Agreement is not a success rate: a prompt answered wrong the same way every time has agreement 1 and counts as easy. ",
    "There are no pass rates, so the planner has no learnable-share forecast and no band or learnable strategy; ",
    "label the prompts (upload the pool with answers) to get them.");

  const modelSelect = h("select", { id: "probe-model", name: "model", required: true }, h("option", { value: "" }, "Loading models…"));
  const modelHint = h("span", { class: "field-hint", id: "probe-model-hint" });
  const submitButton = h("button", { type: "submit", id: "probe-submit", "data-testid": "probe-submit", class: "btn btn-primary" }, "Start probe");
  const presetSelect = h("select", { id: "probe-preset", "data-testid": "probe-preset" }, h("option", { value: "" }, "none: the fields below"));
  const presetHint = h("span", { class: "field-hint", id: "probe-preset-hint" });
  const probeForm = h("form", { id: "probe-form", "data-testid": "probe-form", class: "stack" },
    h("div", { class: "grid grid-2" },
      h("label", { class: "field" }, h("span", { class: "field-label" }, "Model"), modelSelect, modelHint),
      h("label", { class: "field" }, h("span", { class: "field-label" }, "Preset"), presetSelect, presetHint)),
    h("div", { class: "grid grid-4" },
      field("Samples k", h("input", { type: "number", id: "probe-k", name: "k", value: "8", min: "1", max: "64", step: "1", required: true })),
      field("Temperature", h("input", { type: "number", id: "probe-temperature", name: "temperature", value: "1.0", min: "0", max: "2", step: "0.05", required: true })),
      field("Max new tokens", h("input", { type: "number", id: "probe-max-new-tokens", name: "max_new_tokens", value: "256", min: "1", step: "1", required: true })),
      field("Seed", h("input", { type: "number", id: "probe-seed", name: "seed", value: "0", step: "1", required: true }))),
    field("Prompt template (optional)", h("textarea", {
      id: "probe-template", name: "template", rows: "4", spellcheck: "false",
      placeholder: "Empty: the model's chat template, asking for the answer in \\boxed{}.\nOtherwise {prompt} marks where each prompt goes, e.g.\nQuestion: {prompt}\nAnswer in \\boxed{}.\nStarting with {chat}: the user turn of the chat template.",
    })),
    h("div", { class: "grid grid-2" },
      field("Grading", h("select", { id: "probe-grading-policy", name: "grading_policy" },
        h("option", { value: "lenient" }, "lenient: also unboxed final answers"),
        h("option", { value: "strict" }, "strict: last \\boxed{} only, exact (the paper)")),
        { hint: "Training rewards and evaluation on this probe's subsets grade the same way" }),
      field("Chat-template options (optional JSON)", h("input", {
        type: "text", id: "probe-chat-template-options", name: "chat_template_options", spellcheck: "false",
        placeholder: '{"enable_thinking": false}',
      }), { hint: "Passed to the chat template in probing, training and evaluation (e.g. Qwen3 thinking off)" })),
    h("details", { id: "probe-adaptive", class: "stack" },
      h("summary", null, "Adaptive probing: stop sampling a prompt once its pick is settled (optional)"),
      h("p", { class: "muted small" }, "Samples in rounds (2 samples of every prompt, then 2 more for those still open) and stops a prompt "
        + "once more samples are unlikely to change whether the strategy below picks it at this budget: at most 2% of the picks are "
        + "expected to differ from a probe with k samples of every prompt. Pick the subset later with the same strategy, budget and "
        + "seed 0. Needs gold answers."),
      h("div", { class: "grid grid-3" },
        field("Decision", h("select", { id: "probe-adaptive-strategy", name: "adaptive_strategy" },
          h("option", { value: "" }, "none: no decision rule"),
          ["hard", "easy", "medium", "learnable", "band"].map((name) => h("option", { value: name }, name)))),
        field("Budget N (% of the pool)", h("input", { type: "number", id: "probe-adaptive-percent", name: "adaptive_percent", value: "10", min: "0.1", max: "100", step: "0.1" })),
        field("Or stop at a Wilson width ≤", h("input", { type: "number", id: "probe-adaptive-width", name: "adaptive_width", min: "0.01", max: "1", step: "0.01", placeholder: "e.g. 0.3" }),
          { hint: "Either rule stops a prompt" }))),
    h("div", { class: "row" }, submitButton));

  const probeSelect = h("select", { id: "probe-select", "data-testid": "probe-select" });
  const probePicker = h("div", { class: "probe-picker", hidden: true }, field("Probe", probeSelect));
  const jobBox = h("div", { id: "job-status", "data-testid": "job-status", class: "job" }, emptyState("No probe yet. Start one to score this pool."));
  const planLink = h("a", { id: "plan-link", "data-testid": "plan-link", class: "btn btn-primary", href: "#", hidden: true }, "Plan a budget →");

  const histogram = h("div", { id: "difficulty-histogram", "data-testid": "difficulty-histogram", class: "plot" });
  const summary = h("div", { id: "difficulty-summary", class: "stats" });
  const trust = trustPanel(ctx, { testid: "trust" });
  // Why the never-solved prompts (the hard picks) fail: shown for probes with gold answers.
  const failuresBox = h("div", { id: "failures", "data-testid": "failures", hidden: true });
  const difficultyCard = card("Difficulty", { id: "difficulty-card", actions: planLink, subtitle: "How often the model solves each prompt across its k samples." },
    summary, histogram, failuresBox,
    h("h3", null, "Can label-free difficulty be trusted?"),
    h("p", { class: "muted small" }, "How far answer agreement (no labels needed) ranks prompts like pass rate does, on labeled prompts, "
      + "and how many of the hardest 10% by pass rate the hardest 10% by agreement would find."),
    trust.element);
  const difficultySubtitle = difficultyCard.querySelector(".card-sub");
  difficultyCard.hidden = true;

  // ---------- labels panel ----------
  const labelStats = h("div", { class: "stats", id: "labels-stats", "data-testid": "labels-stats" });
  const costInput = h("input", { type: "number", id: "labels-cost", "data-testid": "labels-cost", min: "0", step: "0.01", placeholder: "e.g. 0.50" });
  const costSave = h("button", { type: "button", class: "btn btn-ghost", id: "labels-cost-save", "data-testid": "labels-cost-save", "data-needs": "manager" }, "Save");
  const labelSetsBox = h("div", { id: "label-sets", "data-testid": "label-sets" }, emptyState("Loading…"));
  const exportsBox = h("div", { id: "labeling-exports", "data-testid": "labeling-exports" });
  const subsetsBox = h("div", { id: "pool-subsets", "data-testid": "pool-subsets" }, emptyState("Loading…"));
  const undoProgress = jobProgress(ctx, { testid: "labels-undo-regrade", title: "Re-grading after the undo" });
  const importBox = h("div", { id: "pool-import" });
  const labelsCard = card("Labels", {
    id: "labels-card",
    subtitle: "Gold answers: how many prompts have one, what they cost, and the imports that set them.",
  },
  labelStats,
  h("div", { class: "row cost-row" }, field("Cost per label", costInput), costSave,
    h("span", { class: "muted small" }, "Money per labeled prompt (empty to clear): spent = answers from imports in effect × cost.")),
  h("h3", null, "Import labels"), importBox,
  h("h3", null, "Label sets"), undoProgress.element, labelSetsBox,
  h("h3", null, "Sent for labeling"), exportsBox,
  h("h3", null, "Frozen subsets"), subsetsBox);

  const tableBox = h("div", { id: "prompt-table-box" }, emptyState("Loading prompts…"));
  const pager = h("div", { class: "pager", id: "prompt-pager" });

  const dialog = h("dialog", { id: "drilldown", "data-testid": "drilldown", class: "drawer" });
  dialog.addEventListener("click", (event) => { if (event.target === dialog) dialog.close(); });
  ctx.onCleanup(() => { if (dialog.open) dialog.close(); });

  ctx.root.append(
    h("div", { class: "page-head" },
      h("p", { class: "crumbs" }, h("a", { href: "#/pools" }, "Pools"), " / ", h("span", { id: "crumb-pool" }, `#${poolId}`)),
      title, facts),
    banner,
    h("div", { class: "grid grid-2 align-start" },
      card("Probe the model", { needs: "manager", subtitle: "Sample k completions per prompt and grade them." }, probeForm),
      card("Probe status", { id: "probe-card" }, probePicker, jobBox)),
    difficultyCard,
    labelsCard,
    card("Prompts", { id: "prompts-card", subtitle: "Click a row to read the model's completions." }, tableBox, pager),
    dialog);

  // ---------- pool facts ----------
  function renderFacts(pool) {
    title.textContent = pool.name;
    document.getElementById("crumb-pool").textContent = pool.name;
    replace(facts,
      fact("Prompts", fmt.int(pool.prompt_count)),
      fact("Task type", pool.task_type || "–"),
      fact("Answers", pool.has_answers ? "gold answers" : "none (label-free)"),
      fact("Source", pool.source_filename || pool.source_format || "–"),
      fact("Created", createdText(pool)));
    banner.hidden = Boolean(pool.has_answers);
  }

  // ---------- presets: a preset fills the fields, which stay editable ----------
  const PRESET_HINTS = {
    demo: "For the demo pool on the embedded model: short answers, a terse template, temperature 0.7",
    paper: "Hard Examples Are All You Need: k = 10, T = 1.0, 250 tokens, one user turn asking for \\boxed{}, strict grading",
  };
  async function loadPresets() {
    try {
      state.presets = await api("/api/probes/presets");
      replace(presetSelect, h("option", { value: "" }, "none: the fields below"),
        Object.keys(state.presets).map((name) => h("option", { value: name }, name)));
      // The generated demo pool probes best with the demo preset.
      if (state.pool && state.pool.is_demo && state.presets.demo && !presetSelect.value) {
        presetSelect.value = "demo";
        applyPreset("demo", edited);  // the presets may arrive after the user began to fill the form
      }
    } catch (err) {
      reportError(err);
    }
  }
  const edited = new Set();  // ids of the fields the user changed by hand
  probeForm.addEventListener("input", (event) => { if (event.target !== presetSelect) edited.add(event.target.id); });
  // "none" puts the form's own defaults back, and every preset sets every field, so nothing of the preset
  // chosen before (the demo's template, say) is left behind.
  const FORM_DEFAULTS = { k: 8, temperature: 1.0, max_new_tokens: 256, template: "", grading_policy: "lenient" };
  function applyPreset(name, keep = new Set()) {
    const preset = { ...FORM_DEFAULTS, ...(name ? (state.presets || {})[name] : {}) };
    presetHint.textContent = PRESET_HINTS[name] || "";
    const fields = { k: "probe-k", temperature: "probe-temperature", max_new_tokens: "probe-max-new-tokens",
      template: "probe-template", grading_policy: "probe-grading-policy" };
    for (const [key, id] of Object.entries(fields)) {
      if (!keep.has(id)) probeForm.querySelector(`#${id}`).value = preset[key] ?? "";
    }
  }
  presetSelect.addEventListener("change", () => applyPreset(presetSelect.value));

  // ---------- models ----------
  async function loadModels() {
    try {
      const models = await api("/api/models");
      replace(modelSelect, models.map((m) => h("option", { value: m.name }, m.name)));
      const describe = () => {
        const m = models.find((x) => x.name === modelSelect.value);
        modelHint.textContent = m ? m.description : "";
      };
      modelSelect.onchange = describe;
      describe();
    } catch (err) {
      replace(modelSelect, h("option", { value: "" }, "Could not load models"));
      reportError(err);
    }
  }

  // ---------- probes and their job ----------
  function probeLabel(probe) {
    const status = probe.job && probe.job.status ? ` · ${probe.job.status}` : "";
    const adapter = probe.adapter_run_id != null ? ` + run #${probe.adapter_run_id}'s adapter` : "";
    const some = probe.prompt_count < (state.pool ? state.pool.prompt_count : probe.prompt_count) ? ` · ${probe.prompt_count} prompts` : "";
    return `Probe #${probe.id} · ${probe.model}${adapter} · k=${probe.k} · T=${probe.temperature}${some}${status}`;
  }

  function renderProbeOptions() {
    probePicker.hidden = state.probes.length === 0;
    replace(probeSelect, state.probes.map((p) => h("option", { value: p.id }, probeLabel(p))));
    if (state.probe) probeSelect.value = String(state.probe.id);
  }

  async function loadProbes(selectId) {
    try {
      state.probes = await api(`/api/probes?pool_id=${encodeURIComponent(poolId)}`);
    } catch (err) {
      reportError(err);
      state.probes = [];
    }
    if (!ctx.alive) return;
    loadSubsets();
    // By default the newest probe of the whole pool by the model itself (not a trained run's re-probe).
    const whole = (p) => p.adapter_run_id == null && (!state.pool || p.prompt_count === state.pool.prompt_count);
    const chosen = state.probes.find((p) => String(p.id) === String(selectId))
      || state.probes.find(whole) || state.probes[0] || null;
    renderProbeOptions();
    await selectProbe(chosen);
  }

  async function selectProbe(probe) {
    stopPolling();
    state.probe = probe;
    state.partialDone = null;
    state.partialAt = 0;
    state.job = probe ? probe.job || null : null;
    if (probe) probeSelect.value = String(probe.id);
    if (!probe) {
      replace(jobBox, emptyState("No probe yet. Start one to score this pool."));
      showScores(null);
      return;
    }
    await pollJob(true);
  }

  async function pollJob(first = false) {
    const probe = state.probe;
    if (!probe || !ctx.alive) return;
    try {
      const job = await api(`/api/jobs/${probe.job_id}`);
      if (!ctx.alive || state.probe !== probe) return;
      state.job = job;
      probe.job = job;
      renderJob(probe, job);
      const option = [...probeSelect.options].find((o) => o.value === String(probe.id));
      if (option) option.textContent = probeLabel(probe);
      if (ACTIVE.has(job.status)) {
        if (first) showScores(null);
        // Each finished shard adds its prompts' scores. Progress moves with every batch, so the partial
        // histogram is re-read at most every 5 s (each read scans the probe's scores).
        if (job.progress_done && job.progress_done !== state.partialDone && Date.now() - (state.partialAt || 0) > 5000) {
          state.partialDone = job.progress_done;
          state.partialAt = Date.now();
          loadDifficulty(probe, true);
        }
        state.pollTimer = setTimeout(() => pollJob(), 1000);
      } else if (job.status === "succeeded") {
        if (state.scoredProbeId !== probe.id) showScores(probe);
        refreshProbe(probe);
      } else {
        showScores(null);
      }
    } catch (err) {
      reportError(err);
    }
  }

  // The probe row learns its final rate (samples/s) when its job ends: fetch it once more.
  async function refreshProbe(probe) {
    if (probe.samples_per_second != null || probe.refreshed) return;
    probe.refreshed = true;
    try {
      const fresh = await api(`/api/probes/${probe.id}`);
      Object.assign(probe, fresh, { job: state.job || fresh.job });
      if (ctx.alive && state.probe === probe && state.job) renderJob(probe, state.job);
    } catch (err) {
      reportError(err);
    }
  }

  function renderJob(probe, job) {
    const done = job.progress_done ?? 0;
    const total = job.progress_total ?? probe.prompt_count ?? 0;
    const share = total > 0 ? Math.min(1, done / total) : (job.status === "succeeded" ? 1 : 0);
    const active = ACTIVE.has(job.status);
    const kind = { succeeded: "ok", failed: "bad", cancelled: "muted", cancelling: "warn", running: "info", queued: "muted" }[job.status] || "";
    const cancel = h("button", {
      type: "button", id: "cancel-job", "data-testid": "cancel-job", class: "btn btn-ghost btn-small btn-danger",
      "data-needs": "manager",
      disabled: job.status === "cancelling",
    }, job.status === "cancelling" ? "Cancelling…" : "Cancel");
    cancel.addEventListener("click", () => cancelJob(job, cancel));
    const sps = job.samples_per_second ?? probe.samples_per_second;

    replace(jobBox,
      h("div", { class: "job-head" },
        h("span", { class: "job-title" }, `Probe #${probe.id}`),
        h("span", { id: "job-state", "data-status": job.status }, badge(job.status, kind)),
        active && cancel),
      h("div", { class: "progress", role: "progressbar", id: "job-progress", "aria-valuemin": "0", "aria-valuemax": String(total), "aria-valuenow": String(done) },
        h("div", { class: `progress-fill ${kind}`, style: { width: `${(share * 100).toFixed(1)}%` } })),
      h("div", { class: "job-numbers" },
        // an adaptive probe counts samples, against the most it may draw while it runs
        h("span", { id: "job-progress-text" }, !probe.adaptive ? `${fmt.int(done)} / ${fmt.int(total)} prompts`
          : active ? `${fmt.int(done)} samples of at most ${fmt.int(total)}` : `${fmt.int(done)} samples`),
        h("span", null, `${sps != null ? fmt.num(sps, 1) : "–"} samples/s`),
        active && h("span", null, `${fmt.duration(job.eta_seconds)} left`),
        !active && job.finished_at && h("span", { class: "muted" }, `finished ${fmt.date(job.finished_at)}`)),
      job.message && h("p", { class: "muted small job-message" }, job.message),
      job.status === "failed" && h("div", { class: "inline-error", id: "job-error", "data-testid": "job-error" },
        h("strong", null, "The probe failed: "), job.error || "no error message was recorded."),
      job.status === "cancelled" && h("p", { class: "muted" }, "This probe was cancelled; its partial results are not used."),
      h("dl", { class: "kv" },
        h("dt", null, "Model"), h("dd", null, probe.model),
        h("dt", null, "Sampling"), h("dd", null, `k = ${probe.k}, temperature ${probe.temperature}, ≤ ${probe.max_new_tokens} new tokens, seed ${probe.seed}`),
        probe.adaptive && h("dt", null, "Adaptive"), probe.adaptive && h("dd", { id: "probe-adaptive-summary", "data-testid": "probe-adaptive-summary" }, adaptiveSummary(probe)),
        h("dt", null, "Template"), h("dd", null, probe.template ? h("code", { class: "pre-line" }, probe.template) : "model default"),
        h("dt", null, "Chat-template options"), h("dd", { id: "probe-chat-options" }, probe.chat_template_options ? h("code", null, JSON.stringify(probe.chat_template_options)) : "none"),
        h("dt", null, "Grading"), h("dd", { id: "probe-grading" }, probe.grading_policy === "strict" ? "strict (last \\boxed{} only, exact)" : "lenient (unboxed final answers count)")));
  }

  function adaptiveSummary(probe) {
    const rule = probe.adaptive;
    const decision = [rule.strategy && `${rule.strategy} at N = ${fmt.int(rule.n)}`, rule.max_width != null && `Wilson width ≤ ${rule.max_width}`]
      .filter(Boolean).join(", or ");
    const full = probe.prompt_count * probe.k;
    return probe.samples_drawn != null
      ? `stops a prompt once settled (${decision}): ${fmt.int(probe.samples_drawn)} of ${fmt.int(full)} samples drawn, ${fmt.num(100 * probe.samples_saved, 0)}% saved`
      : `in rounds, stopping a prompt once settled (${decision})`;
  }

  async function cancelJob(job, button) {
    button.disabled = true;
    try {
      const updated = await api(`/api/jobs/${job.id}/cancel`, { method: "POST" });
      if (state.probe && state.probe.job_id === updated.id) {
        state.job = updated;
        renderJob(state.probe, updated);
      }
      notify("Cancel requested: the worker stops after the current batch.");
    } catch (err) {
      reportError(err);
      button.disabled = false;
    }
  }

  probeSelect.addEventListener("change", () => {
    const probe = state.probes.find((p) => String(p.id) === probeSelect.value);
    selectProbe(probe || null);
  });

  probeForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    const data = new FormData(probeForm);
    const template = String(data.get("template") || "");
    const options = String(data.get("chat_template_options") || "").trim();
    let chatTemplateOptions = null;
    try {
      chatTemplateOptions = options ? JSON.parse(options) : null;
    } catch (err) {
      reportError(new Error(`Chat-template options are not valid JSON (${err.message}); write an object such as {"enable_thinking": false}.`));
      return;
    }
    const body = {
      pool_id: Number(poolId),
      model: String(data.get("model") || ""),
      k: Number(data.get("k")),
      temperature: Number(data.get("temperature")),
      max_new_tokens: Number(data.get("max_new_tokens")),
      template: template.trim() ? template : null,
      chat_template_options: chatTemplateOptions,
      grading_policy: String(data.get("grading_policy") || "lenient"),
      seed: Number(data.get("seed")),
    };
    const adaptiveStrategy = String(data.get("adaptive_strategy") || "");
    const adaptiveWidth = String(data.get("adaptive_width") || "").trim();
    if (adaptiveStrategy || adaptiveWidth) {
      body.adaptive = {
        strategy: adaptiveStrategy || null,
        fraction: adaptiveStrategy ? Number(data.get("adaptive_percent")) / 100 : null,
        max_width: adaptiveWidth ? Number(adaptiveWidth) : null,
      };
    }
    submitButton.disabled = true;
    try {
      const probe = await api("/api/probes", { method: "POST", json: body });
      notify(`Probe #${probe.id} queued.`);
      state.probes = [probe, ...state.probes.filter((p) => p.id !== probe.id)];
      state.probe = probe;
      renderProbeOptions();
      await selectProbe(probe);
    } catch (err) {
      reportError(err);
    } finally {
      submitButton.disabled = false;
    }
  });

  // ---------- difficulty chart and prompt table ----------
  function showScores(probe) {
    state.scoredProbeId = probe ? probe.id : null;
    if (probe) {
      state.order = "-difficulty";
      state.offset = 0;
      loadDifficulty(probe);
      planLink.href = `#/planner/${probe.id}`;
      planLink.hidden = false;
      ctx.setNav({ planner: { id: probe.id } });
    } else {
      difficultyCard.hidden = true;
      clearPlot(histogram);
      planLink.hidden = true;
      if (state.order !== "position") { state.order = "position"; state.offset = 0; }
    }
    loadPrompts();
  }

  async function loadDifficulty(probe, partial = false) {
    const seq = state.difficultySeq = (state.difficultySeq || 0) + 1;  // only the latest answer is drawn
    try {
      const result = await api(`/api/probes/${probe.id}/difficulty?bins=20`);
      if (!ctx.alive || seq !== state.difficultySeq) return;
      if (partial ? state.probe !== probe || state.scoredProbeId === probe.id : state.scoredProbeId !== probe.id) return;
      difficultyCard.hidden = false;
      const s = result.summary || {};
      const labelFree = result.label_free || result.metric === "agreement";
      const name = labelFree ? "agreement" : "pass rate";
      const sym = labelFree ? "a" : "p";
      difficultySubtitle.textContent = (labelFree
        ? "How often the model's k answers to each prompt agree (label-free: agreement, not whether they are right)."
        : "How often the model solves each prompt across its k samples.")
        + (result.partial ? ` Partial: ${fmt.int(s.count)} of ${fmt.int(result.prompt_count)} prompts scored so far; the probe is still running.` : "");
      difficultyCard.dataset.partial = result.partial ? "true" : "false";
      replace(summary,
        stat(`mean ${name}`, fmt.num(s.mean), { id: "summary-mean", big: true }),
        stat(`${sym} = 0 ${labelFree ? "" : "(never solved)"}`.trim(), fmt.pct(s.share_at_0), { id: "summary-at-0" }),
        stat(`${sym} = 1 ${labelFree ? "(unanimous)" : "(always solved)"}`, fmt.pct(s.share_at_1), { id: "summary-at-1" }),
        stat("prompts scored", fmt.int(s.count), { id: "summary-count" }));
      renderFigure(histogram, result.figure);
      if (!result.partial) trust.load(probe);
      if (!result.partial && !labelFree) loadFailures(probe);
      else failuresBox.hidden = true;
    } catch (err) {
      reportError(err);
    }
  }

  async function loadFailures(probe) {
    try {
      const f = await api(`/api/probes/${probe.id}/failures`);
      if (!ctx.alive || state.scoredProbeId !== probe.id) return;
      failuresBox.hidden = f.never_solved === 0;
      const p = f.prompts;
      replace(failuresBox,
        h("h3", null, `Why the ${fmt.int(f.never_solved)} never-solved prompts fail`),
        h("div", { class: "stats" },
          stat("likely label errors", fmt.int(p.label_error), { id: "failures-label-error" }),
          stat(`mostly no answer (none, or cut off at ${f.max_new_tokens} tokens)`, fmt.int(p.no_answer), { id: "failures-no-answer" }),
          stat("wrong, scattered answers", fmt.int(p.wrong_answer), { id: "failures-wrong" })),
        f.label_error_examples.length ? h("details", { id: "failures-examples" },
          h("summary", null, "Likely label errors: the samples agree on another answer than the gold"),
          h("ul", { class: "link-list" }, f.label_error_examples.map((x) => h("li", null,
            h("span", { class: "mono" }, x.external_id), ` · gold ${x.gold} · ${fmt.pct(x.agreement, 0)} of samples say ${x.majority_answer} · `,
            h("span", { class: "muted" }, x.text))))) : null);
    } catch (err) {
      reportError(err);
    }
  }

  async function loadPrompts() {
    const params = new URLSearchParams({ order: state.order, limit: String(PAGE_SIZE), offset: String(state.offset) });
    if (state.scoredProbeId) params.set("probe_id", String(state.scoredProbeId));
    const probeId = state.scoredProbeId;
    try {
      const page = await api(`/api/pools/${poolId}/prompts?${params}`);
      if (!ctx.alive || probeId !== state.scoredProbeId) return;
      // Without probe_id the server may still attach the newest finished probe's scores: only show
      // scores of the probe this page has selected.
      if (page.probe_id != null && String(page.probe_id) !== String(state.scoredProbeId)) {
        page.items = (page.items || []).map((item) => ({ ...item, score: null, pass_rate: null, difficulty: null, agreement: null }));
      }
      renderPromptTable(page);
    } catch (err) {
      reportError(err);
    }
  }

  function setOrder(order) {
    state.order = order;
    state.offset = 0;
    loadPrompts();
  }

  function renderPromptTable(page) {
    const items = page.items || [];
    const labelFree = state.pool && !state.pool.has_answers;
    // A label-free pool with labels imported since shows their answers and the re-graded pass rates too.
    const graded = !labelFree || items.some((item) => item.answer != null);
    const scored = Boolean(state.scoredProbeId);
    const arrow = state.order === "-difficulty" ? " ↓" : state.order === "difficulty" ? " ↑" : "";
    const diffHeader = h("th", { class: "num sortable", id: "sort-difficulty", "data-testid": "sort-difficulty", "aria-sort": arrow ? (arrow.includes("↓") ? "descending" : "ascending") : "none" },
      h("button", {
        type: "button", class: "th-button", disabled: !scored,
        title: scored ? `Sort by difficulty, 1 − ${labelFree ? "agreement" : "pass rate"} (click to flip)` : "Probe the pool first",
        onclick: () => setOrder(state.order === "-difficulty" ? "difficulty" : "-difficulty"),
      }, `Difficulty${arrow}`));
    const posHeader = h("th", { class: "num sortable" },
      h("button", { type: "button", class: "th-button", id: "sort-position", onclick: () => setOrder("position") },
        `#${state.order === "position" ? " ↑" : ""}`));

    const rows = items.map((item) => {
      const s = scoreOf(item);
      const tr = h("tr", { "data-prompt-id": item.id, class: scored ? "clickable" : "", tabindex: scored ? "0" : null },
        h("td", { class: "num muted" }, item.position ?? "–"),
        h("td", { class: "mono nowrap" }, item.external_id ?? item.id),
        h("td", { class: "prompt-cell" }, h("div", { class: "clamp" }, item.text)),
        graded && h("td", { class: "answer-cell mono" }, item.answer ?? "–"),
        labelFree && h("td", { class: "num nowrap" }, s ? `${fmt.num(s.agreement)}` : "–",
          s && s.majority_answer != null && h("span", { class: "muted small" }, ` · ${s.majority_answer}`)),
        graded && h("td", { class: "num nowrap wilson" },
          s && s.pass_rate != null ? fmt.wilson(s.pass_rate, s.wilson_low, s.wilson_high) : "–"),
        h("td", { class: "num" }, s ? difficultyBar(s.difficulty) : "–"));
      if (scored) {
        tr.addEventListener("click", () => openDrilldown(item));
        tr.addEventListener("keydown", (e) => { if (e.key === "Enter") openDrilldown(item); });
      }
      return tr;
    });

    replace(tableBox, items.length === 0
      ? emptyState("No prompts in this pool.")
      : h("div", { class: "table-scroll" }, h("table", { class: "table prompts", id: "prompt-table", "data-testid": "prompt-table" },
        h("thead", null, h("tr", null, posHeader, h("th", null, "ID"), h("th", null, "Prompt"),
          graded && h("th", null, "Answer"),
          labelFree && h("th", { class: "num" }, "Agreement · majority"),
          graded && h("th", { class: "num" }, "Pass rate [95% Wilson]"),
          diffHeader)),
        h("tbody", null, rows))));

    const total = page.total ?? items.length;
    const from = total ? state.offset + 1 : 0;
    const to = state.offset + items.length;
    replace(pager,
      h("button", { type: "button", class: "btn btn-ghost btn-small", id: "prompt-prev", disabled: state.offset === 0,
        onclick: () => { state.offset = Math.max(0, state.offset - PAGE_SIZE); loadPrompts(); } }, "← Previous"),
      h("span", { id: "prompt-range", class: "muted" }, `${fmt.int(from)}–${fmt.int(to)} of ${fmt.int(total)}`),
      h("button", { type: "button", class: "btn btn-ghost btn-small", id: "prompt-next", disabled: to >= total,
        onclick: () => { state.offset += PAGE_SIZE; loadPrompts(); } }, "Next →"));
  }

  // ---------- drill-down ----------
  async function openDrilldown(item) {
    const probeId = state.scoredProbeId;
    if (!probeId) return;
    replace(dialog, drawerHead(`Prompt ${item.external_id ?? item.id}`), emptyState("Loading samples…"));
    if (!dialog.open) dialog.showModal();
    try {
      const detail = await api(`/api/probes/${probeId}/prompts/${item.id}/samples`);
      if (!ctx.alive) return;
      renderDrilldown(detail);
    } catch (err) {
      dialog.close();
      reportError(err);
    }
  }

  function drawerHead(text) {
    return h("header", { class: "drawer-head" },
      h("h2", { id: "drilldown-title" }, text),
      h("button", { type: "button", class: "btn btn-ghost btn-small", id: "drilldown-close", "data-testid": "drilldown-close", onclick: () => dialog.close() }, "Close"));
  }

  function renderDrilldown(detail) {
    const prompt = detail.prompt || {};
    const s = detail.score;
    const samples = detail.samples || [];
    const correct = samples.filter((x) => x.correct === true).length;
    const gold = prompt.gold ?? prompt.answer;
    replace(dialog,
      drawerHead(`Prompt ${prompt.external_id ?? prompt.id}`),
      h("div", { class: "drawer-body" },
        h("h3", null, "Prompt"),
        h("pre", { class: "text-block", id: "drilldown-prompt" }, prompt.text ?? ""),
        h("dl", { class: "kv" },
          gold != null && h("dt", null, "Gold answer"), gold != null && h("dd", { class: "mono", id: "drilldown-gold" }, String(gold)),
          s && s.pass_rate != null && h("dt", null, "Pass rate"), s && s.pass_rate != null && h("dd", null, `${fmt.wilson(s.pass_rate, s.wilson_low, s.wilson_high)} (${correct} of ${samples.length} correct)`),
          s && s.agreement != null && h("dt", null, "Agreement"), s && s.agreement != null && h("dd", null, fmt.num(s.agreement)),
          s && s.majority_answer != null && h("dt", null, "Majority answer"), s && s.majority_answer != null && h("dd", { class: "mono" }, String(s.majority_answer)),
          s && s.base_wrong != null && h("dt", null, "Base-wrong"), s && s.base_wrong != null && h("dd", null, s.base_wrong ? "yes: the first answer is wrong" : "no"),
          s && h("dt", null, "Difficulty"), s && h("dd", null, fmt.num(s.difficulty))),
        h("h3", null, `Samples (${samples.length})`),
        h("ol", { class: "samples", id: "drilldown-samples", "data-testid": "drilldown-samples" },
          samples.map((x) => {
            const mark = x.correct === true ? "✓" : x.correct === false ? "✗" : "–";
            const kind = x.correct === true ? "ok" : x.correct === false ? "bad" : "none";
            return h("li", { class: `sample sample-${kind}`, "data-correct": String(x.correct) },
              h("div", { class: "sample-head" },
                h("span", { class: `mark mark-${kind}`, "aria-label": kind === "ok" ? "correct" : kind === "bad" ? "wrong" : "not graded" }, mark),
                h("span", { class: "muted" }, `Sample ${x.sample_index}`),
                h("span", { class: "sample-answer" }, "extracted: ",
                  x.extracted_answer != null ? h("code", null, x.extracted_answer) : h("em", null, "no answer found"))),
              h("pre", { class: "text-block completion" }, x.completion ?? ""));
          }))));
  }

  // ---------- labels ----------
  async function loadLabels() {
    try {
      const labels = await api(`/api/pools/${poolId}/labels`);
      if (!ctx.alive) return;
      renderLabels(labels);
    } catch (err) {
      reportError(err);
    }
  }

  function renderLabels(l) {
    replace(labelStats,
      stat("labeled prompts", h("span", { "data-testid": "labels-labeled" }, fmt.int(l.labeled)), { big: true }),
      stat("unlabeled", h("span", { "data-testid": "labels-unlabeled" }, fmt.int(l.unlabeled))),
      stat("answers from imports in effect", h("span", { "data-testid": "labels-imported" }, fmt.int(l.imported_labels))),
      stat("spent on labels", h("span", { "data-testid": "labels-spent" }, l.spent == null ? "–" : fmt.num(l.spent)),
        { hint: l.cost_per_label == null ? "set a cost per label" : `${fmt.int(l.imported_labels)} × ${l.cost_per_label}` }));
    if (document.activeElement !== costInput) costInput.value = l.cost_per_label == null ? "" : String(l.cost_per_label);
    const sets = l.label_sets || [];
    replace(labelSetsBox, sets.length === 0 ? emptyState("No labels imported yet.")
      : h("div", { class: "table-scroll" }, h("table", { class: "table", id: "label-sets-table", "data-testid": "label-sets-table" },
        h("thead", null, h("tr", null, h("th", null, "#"), h("th", null, "Source"), h("th", null, "Format"),
          h("th", { class: "num", title: "Prompts whose answer this import set" }, "Answers"),
          h("th", { class: "num", title: "Of those, prompts that had another answer before" }, "Changed"),
          h("th", null, "Created · by"), h("th", null, "Undone"), h("th", null, ""))),
        h("tbody", null, sets.flatMap(labelSetRows)))));
    replace(exportsBox, (l.exports || []).length === 0 ? emptyState("Nothing sent for labeling yet: freeze a subset in the planner, then export it from its page.")
      : exportsTable(l.exports, { withSubset: true }));
  }

  function labelSetRows(set) {
    const reportRow = h("tr", { class: "report-row", hidden: true }, h("td", { colspan: "8" }, importReport(set.report, set, set.source)));
    const toggle = h("button", { type: "button", class: "btn btn-ghost btn-small", "data-testid": `label-set-report-${set.id}`,
      onclick: () => { reportRow.hidden = !reportRow.hidden; } }, "Report");
    const undo = !set.undone_at && h("button", {
      type: "button", class: "btn btn-ghost btn-small btn-danger", "data-testid": `label-set-undo-${set.id}`,
      "data-needs": "manager",
    }, "Undo");
    if (undo) undo.addEventListener("click", () => undoLabelSet(set, undo));
    return [h("tr", { "data-label-set-id": set.id, class: set.undone_at ? "undone" : null },
      h("td", { class: "muted" }, set.id),
      h("td", { class: "source-cell" }, set.source),
      h("td", null, set.format),
      h("td", { class: "num" }, fmt.int(set.label_count)),
      h("td", { class: "num" }, fmt.int(set.changed_count)),
      h("td", { class: "created-cell" }, h("div", { class: "nowrap" }, fmt.date(set.created_at)),
        h("div", { class: "muted small", "data-testid": `label-set-by-${set.id}` }, set.token_name ? `by ${set.token_name}` : "")),
      h("td", { class: "undone-cell", "data-testid": `label-set-undone-${set.id}` }, set.undone_at
        ? [badge("undone", "muted"), h("div", { class: "muted small" }, `${fmt.date(set.undone_at)}${set.undone_by ? ` by ${set.undone_by}` : ""}`)]
        : "–"),
      h("td", { class: "nowrap" }, toggle, " ", undo)), reportRow];
  }

  async function undoLabelSet(set, button) {
    const ok = window.confirm(`Undo label set #${set.id} (${set.label_count} answers from ${set.source})? `
      + "The answers it replaced come back, and the stored samples are graded again.");
    if (!ok) return;
    button.disabled = true;
    undoProgress.reset();
    try {
      const result = await api(`/api/label-sets/${set.id}/undo`, { method: "POST" });
      notify(undoReport(result.report).textContent);
      await afterLabelsChanged();
      if (result.report.regrade_job_id) {
        const job = await undoProgress.follow({ id: result.report.regrade_job_id, status: "queued", progress_done: 0, progress_total: 0, message: "" });
        if (job) await afterLabelsChanged();
      }
    } catch (err) {
      reportError(err);
      button.disabled = false;
    }
  }

  costSave.addEventListener("click", async () => {
    const raw = costInput.value.trim();
    const cost = raw === "" ? null : Number(raw);
    if (cost !== null && !(cost >= 0)) {
      reportError(new Error(`Cost per label must be a number of 0 or more (got "${raw}"); leave it empty to clear it.`));
      return;
    }
    costSave.disabled = true;
    try {
      const labels = await api(`/api/pools/${poolId}/labeling`, { method: "PUT", json: { cost_per_label: cost } });
      if (!ctx.alive) return;
      renderLabels(labels);
      notify(cost === null ? "Cost per label cleared." : `Cost per label set to ${cost}.`);
    } catch (err) {
      reportError(err);
    } finally {
      costSave.disabled = false;
    }
  });

  // Answers changed (an import, an undo, its re-grading): the pool's facts, the probe's scores and the
  // trust panel read them.
  async function afterLabelsChanged() {
    await loadLabels();
    try {
      const pool = await fetchPool(poolId);
      if (!ctx.alive) return;
      state.pool = pool;
      renderFacts(pool);
      const probe = state.probe;
      if (probe) {
        const fresh = await api(`/api/probes/${probe.id}`);
        if (!ctx.alive || state.probe !== probe) return;
        Object.assign(probe, fresh, { job: state.job || fresh.job });
        if (state.scoredProbeId === probe.id) showScores(probe);
      }
    } catch (err) {
      reportError(err);
    }
  }

  async function loadSubsets() {
    try {
      const lists = await Promise.all(state.probes.map((p) => api(`/api/subsets?probe_id=${encodeURIComponent(p.id)}`)));
      if (!ctx.alive) return;
      const subsets = lists.flat().sort((a, b) => b.id - a.id);
      replace(subsetsBox, subsets.length === 0 ? emptyState("No frozen subsets yet: plan a budget and freeze one.")
        : h("ul", { class: "link-list" }, subsets.map((x) => h("li", { "data-subset-id": x.id },
          h("a", { href: `#/subsets/${x.id}`, "data-testid": `subset-link-${x.id}` }, x.name),
          h("span", { class: "muted small" }, ` · ${fmt.int(x.n)} prompts · ${x.strategy} · probe #${x.probe_id} · ${createdText(x)}`)))));
    } catch (err) {
      reportError(err);
    }
  }

  // ---------- start ----------
  try {
    state.pool = await fetchPool(poolId);
  } catch (err) {
    reportError(err);
    replace(tableBox, emptyState("Could not load this pool."));
    return;
  }
  if (!ctx.alive) return;
  renderFacts(state.pool);
  ctx.setNav({ pool: { id: state.pool.id, name: state.pool.name } });
  replace(importBox, importLabels(ctx, poolId, { onImported: () => afterLabelsChanged() }));
  await Promise.all([loadModels(), loadPresets(), loadProbes(), loadLabels()]);
}

function fact(label, value) {
  return h("div", { class: "fact" }, h("span", { class: "fact-label" }, label), h("span", { class: "fact-value" }, value));
}

export function difficultyBar(value) {
  if (typeof value !== "number") return "–";
  return h("span", { class: "diff" },
    h("span", { class: "diff-track" }, h("span", { class: "diff-fill", style: { width: `${Math.round(value * 100)}%` } })),
    h("span", { class: "diff-num" }, value.toFixed(2)));
}

// Scores arrive nested ({score: {...}}) or flat on the prompt item (pass_rate, difficulty, ...).
export function scoreOf(item) {
  if (item.score !== undefined) return item.score;
  const scored = [item.difficulty, item.pass_rate, item.agreement].some((x) => x !== null && x !== undefined);
  return scored ? item : null;
}
