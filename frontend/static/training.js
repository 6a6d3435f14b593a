// Training settings shared by the planner's "Launch experiment" and "Train on this subset":
// preset, steps, model, evaluation pool, OOD pools and (folded) the GRPO / LoRA settings. The fields
// shown are sent as overrides of the preset (GET /api/training/presets); the server checks them all.
// The model is the probe's (its difficulty scores chose the subset): another one is sent only when
// picked and confirmed, with allow_other_model, because the forecast then no longer applies.
import { api } from "./api.js";
import { h, replace } from "./dom.js";
import { field, reportError } from "./ui.js";

const PRESET_NAMES = ["quick_cpu", "demo_cpu", "paper"];
const NONE = "none";

// Folded under "More settings": [setting, label, input step]. Prefilled from the preset.
const ADVANCED = [
  ["num_generations", "Group size G", "1"],
  ["batch_size", "Completions per step", "1"],
  ["max_completion_length", "Max completion tokens", "1"],
  ["learning_rate", "Learning rate", "any"],
  ["lora_rank", "LoRA rank", "1"],
  ["lora_alpha", "LoRA alpha", "1"],
  ["temperature", "Temperature", "0.05"],
  ["beta", "KL beta", "0.01"],
  ["warmup_ratio", "Warmup share of steps", "0.01"],
  ["weight_decay", "Weight decay", "0.01"],
  ["adam_beta2", "Adam β2", "0.001"],
  ["max_grad_norm", "Gradient clipping", "0.01"],
  ["seed", "Seed", "1"],
];

// Evaluating every ~5th step gives a curve without spending most of the run on evaluation.
const evalEveryFor = (steps) => String(Math.max(1, Math.round(Number(steps || 0) / 5)));

export function trainingForm(ctx) {
  const state = { presets: {}, defaults: {}, touched: new Set(), probeModel: null };

  const preset = h("select", { id: "training-preset", "data-testid": "training-preset", name: "preset" },
    PRESET_NAMES.map((name) => h("option", { value: name }, name)));
  const steps = h("input", { type: "number", id: "training-steps", "data-testid": "training-steps", name: "max_steps", value: "30", min: "1", step: "1" });
  const model = h("select", { id: "training-model", "data-testid": "training-model", name: "model" }, h("option", { value: "" }, "Loading models…"));
  const evalPool = h("select", { id: "eval-pool", "data-testid": "eval-pool", name: "eval_pool_id" }, h("option", { value: NONE }, "none"));
  const evalEvery = h("input", { type: "number", id: "eval-every", "data-testid": "eval-every", name: "eval_every", value: "0", min: "0", step: "1" });
  const evalSamples = h("input", { type: "number", id: "eval-samples", "data-testid": "eval-samples", name: "eval_samples", value: "100", min: "1", step: "1" });
  const oodPools = h("select", { id: "ood-pools", "data-testid": "ood-pools", name: "ood_pool_ids", multiple: true, size: "3" });
  const presetHint = h("span", { class: "field-hint", id: "training-preset-hint" });
  const modelHint = h("span", { class: "field-hint", id: "training-model-hint" });
  const otherModel = h("input", { type: "checkbox", id: "training-other-model", "data-testid": "training-other-model" });
  const otherModelText = h("span", null);
  const otherModelRow = h("label", { class: "check warning", id: "training-other-model-row", hidden: true }, otherModel, otherModelText);
  const advanced = new Map(ADVANCED.map(([key, , step]) => [key, h("input", {
    type: "number", id: `training-${key.replaceAll("_", "-")}`, "data-testid": `training-${key}`, name: key, step,
  })]));

  // A value the user typed survives presets and lists that finish loading later.
  for (const input of [steps, model, evalPool, evalEvery, evalSamples, ...advanced.values()]) {
    input.addEventListener("input", () => state.touched.add(input.id));
    input.addEventListener("change", () => state.touched.add(input.id));
  }

  function current() {
    return state.presets[preset.value] || state.defaults;
  }

  function applyPreset({ force } = {}) {
    const p = current();
    presetHint.textContent = p.max_steps ? describePreset(p) : "";
    const set = (input, value) => {
      if (value === undefined || value === null) return;
      if (force || !state.touched.has(input.id)) input.value = String(value);
    };
    set(steps, p.max_steps);
    set(evalSamples, p.eval_samples);
    for (const [key, input] of advanced) set(input, p[key]);
    syncModel();
    syncEvalEvery(force);
  }

  // The probe's model unless the user picked another; picking another asks for a confirmation.
  function syncModel() {
    const probeModel = state.probeModel;
    if (probeModel && !state.touched.has(model.id) && [...model.options].some((o) => o.value === probeModel)) {
      model.value = probeModel;
    }
    const other = Boolean(probeModel && model.value && model.value !== probeModel);
    modelHint.textContent = probeModel ? (other ? `The probe used ${probeModel}` : "The model the probe measured") : "";
    otherModelRow.hidden = !other;
    if (!other) otherModel.checked = false;
    otherModelText.textContent = other
      ? ` Train ${model.value} instead of ${probeModel}: difficulty was measured on ${probeModel}, so the forecast will not apply`
      : "";
  }
  model.addEventListener("change", syncModel);

  function syncEvalEvery(force) {
    const evaluating = evalPool.value !== NONE;
    evalEvery.disabled = !evaluating;
    evalSamples.disabled = !evaluating;
    if (force || !state.touched.has(evalEvery.id)) {
      const fromPreset = current().eval_every;
      evalEvery.value = evaluating ? (fromPreset > 0 ? String(fromPreset) : evalEveryFor(steps.value)) : "0";
    }
  }

  preset.addEventListener("change", () => {
    for (const input of [steps, model, evalEvery, evalSamples, ...advanced.values()]) state.touched.delete(input.id);
    applyPreset({ force: true });
  });
  evalPool.addEventListener("change", () => syncEvalEvery(false));
  steps.addEventListener("input", () => syncEvalEvery(false));

  async function loadPresets() {
    const info = await api("/api/training/presets");
    state.presets = info.presets || {};
    state.defaults = info.defaults || {};
    const names = Object.keys(state.presets);
    if (names.length) {
      const chosen = preset.value;
      replace(preset, names.map((name) => h("option", { value: name }, name)));
      preset.value = names.includes(chosen) ? chosen : names[0];
    }
  }

  async function loadModels() {
    const models = await api("/api/models");
    const chosen = model.value;
    if (state.probeModel && !models.some((m) => m.name === state.probeModel)) {
      models.unshift({ name: state.probeModel, description: "the probe's model (a checkpoint directory)" });
    }
    replace(model, models.map((m) => h("option", { value: m.name, title: m.description },
      m.name === state.probeModel ? probeLabel(m.name) : m.name)));
    if (chosen) model.value = chosen;
    syncModel();
  }

  async function loadPools() {
    const pools = (await api("/api/pools")).filter((p) => p.has_answers);
    const heldOut = pools.find((p) => /held-out/i.test(p.name));
    replace(evalPool, h("option", { value: NONE }, "none"), pools.map((p) => h("option", { value: p.id }, poolLabel(p))));
    if (!state.touched.has(evalPool.id)) evalPool.value = heldOut ? String(heldOut.id) : NONE;
    replace(oodPools, pools.map((p) => h("option", { value: p.id }, poolLabel(p))));
  }

  Promise.all([loadPresets(), loadModels(), loadPools()])
    .then(() => { if (ctx.alive) applyPreset(); })
    .catch(reportError);

  const element = h("div", { class: "stack", id: "training-form" },
    h("div", { class: "grid grid-3" },
      field("Preset", preset, { hint: presetHint }),
      field("Max steps", steps, { hint: "Optimizer steps per run" }),
      field("Model", model, { hint: modelHint })),
    otherModelRow,
    h("div", { class: "grid grid-4" },
      field("Evaluation pool", evalPool, { hint: "Accuracy on held-out prompts; step 0 is the base model" }),
      field("Evaluate every", evalEvery, { hint: "steps (0: only at the start and the end)" }),
      field("Evaluation prompts", evalSamples, { hint: "at most this many of the pool: fewer is faster, noisier" }),
      field("OOD pools", oodPools, { hint: "pass@k after training; Ctrl/⌘-click for several" })),
    h("details", { id: "training-more" },
      h("summary", null, "More settings (GRPO and LoRA)"),
      h("div", { class: "grid grid-3" },
        ADVANCED.map(([key, label]) => field(label, advanced.get(key))))));

  // Overrides of the preset for POST /api/runs and /api/experiments.
  function settings() {
    const evalId = evalPool.value === NONE ? null : Number(evalPool.value);
    const out = {
      max_steps: Number(steps.value),
      eval_pool_id: evalId,
      eval_every: evalId === null ? 0 : Number(evalEvery.value),
      ood_pool_ids: [...oodPools.selectedOptions].map((o) => Number(o.value)),
    };
    if (evalId !== null) out.eval_samples = Number(evalSamples.value);
    for (const [key, input] of advanced) if (input.value !== "") out[key] = Number(input.value);
    if (model.value && model.value !== state.probeModel) out.model = model.value;
    return out;
  }

  // The request fields for POST /api/runs and /api/experiments (besides the subset or probe).
  function request() {
    const body = { preset: preset.value, settings: settings() };
    if (body.settings.model) body.allow_other_model = otherModel.checked;
    return body;
  }

  // The probe whose subsets are trained: its model becomes the default.
  function setProbe(probe) {
    // Only the current probe's model is labelled: the previous probe's goes back to its plain name.
    const previous = [...model.options].find((o) => o.value === state.probeModel);
    if (previous) previous.textContent = previous.value;
    state.probeModel = probe ? probe.model : null;
    const option = [...model.options].find((o) => o.value === state.probeModel);
    if (option) option.textContent = probeLabel(state.probeModel);
    else if (state.probeModel) model.prepend(h("option", { value: state.probeModel }, probeLabel(state.probeModel)));
    syncModel();
  }

  return { element, settings, request, setProbe, preset: () => preset.value };
}

function probeLabel(modelName) {
  return `${modelName} (the probe's)`;
}

function poolLabel(pool) {
  return `${pool.name} (${pool.prompt_count})`;
}

function describePreset(p) {
  return `${p.max_steps} steps · G = ${p.num_generations} · ${p.batch_size} completions/step · LoRA r ${p.lora_rank} · lr ${p.learning_rate}`;
}
