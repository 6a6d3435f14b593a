import { api, can, currentUser } from "../api.js";
import { h, replace } from "../dom.js";
import { badge, card, createdText, emptyState, field, fmt, notify, reportError, select } from "../ui.js";

const FORMATS = [["auto", "auto (from the file name)"], ["jsonl", "jsonl"], ["csv", "csv"], ["tsv", "tsv"], ["parquet", "parquet"], ["json", "json"]];
// Used until GET /api/pools/presets answers (it has the presets' field names and titles).
let PRESETS = [
  { name: "gsm8k", title: "GSM8K", prompt_field: "question", answer_field: "answer", id_field: null },
  { name: "bbh", title: "BIG-Bench Hard", prompt_field: "input", answer_field: "target", id_field: null },
  { name: "math500", title: "MATH-500", prompt_field: "problem", answer_field: "answer", id_field: "unique_id" },
];
const NO_PRESET = { name: "none", prompt_field: "prompt", answer_field: "", id_field: "" };
const TASK_TYPES = [["auto", "auto (from the preset or answers)"], ["numeric", "numeric"], ["math", "math (LaTeX)"], ["choice", "choice (A)…(G)"], ["exact", "exact string"]];

export function renderPools(ctx) {
  const list = h("div", { id: "pool-list" }, emptyState("Loading pools…"));
  const demoButton = h("button", { type: "button", id: "demo-button", "data-testid": "demo-button", "data-needs": "manager", class: "btn btn-primary" }, "Create demo pool");
  // A second, disjoint set of demo problems to evaluate training runs on.
  const heldOutButton = h("button", { type: "button", id: "demo-heldout-button", "data-testid": "demo-heldout-button", "data-needs": "manager", class: "btn btn-ghost" }, "Add held-out demo pool");

  async function refresh() {
    try {
      const pools = await api("/api/pools");
      if (ctx.alive) replace(list, poolTable(pools));
    } catch (err) {
      reportError(err);
      replace(list, emptyState("Could not load the pools."));
    }
  }

  async function remove(pool) {
    if (!window.confirm(`Delete pool "${pool.name}" with its ${pool.prompt_count} prompts, probes and subsets?`)) return;
    try {
      await api(`/api/pools/${pool.id}`, { method: "DELETE" });
      notify(`Deleted pool "${pool.name}".`);
      await refresh();
    } catch (err) {
      reportError(err);
    }
  }

  function poolTable(pools) {
    if (!pools.length) return emptyState("No pools yet. Create the demo pool or upload a file below.");
    return h("table", { class: "table", id: "pool-table", "data-testid": "pool-table" },
      h("thead", null, h("tr", null,
        h("th", null, "Name"), h("th", null, "Task"), h("th", null, "Answers"),
        h("th", { class: "num" }, "Prompts"), h("th", null, "Source file"), h("th", null, "Created"), h("th", null, ""))),
      h("tbody", null, pools.map((pool) => h("tr", { "data-pool-id": pool.id },
        h("td", null, h("a", { href: `#/pools/${pool.id}`, class: "strong pool-link", "data-testid": `pool-link-${pool.id}` }, pool.name)),
        h("td", null, badge(pool.task_type || "–")),
        h("td", null, pool.has_answers ? badge("gold answers", "ok") : badge("label-free", "warn")),
        h("td", { class: "num" }, fmt.int(pool.prompt_count)),
        h("td", { class: "muted" }, pool.source_filename || pool.source_format || "–"),
        h("td", { class: "muted nowrap" }, createdText(pool)),
        // Managers delete their own pools, admins any.
        h("td", { class: "right" }, (can("admin") || (can("manager") && pool.created_by === currentUser().name)) && h("button", {
          type: "button", class: "btn btn-ghost btn-small btn-danger", "data-testid": `delete-pool-${pool.id}`,
          onclick: () => remove(pool),
        }, "Delete"))))));
  }

  async function createDemo(button, json) {
    button.disabled = true;
    try {
      const pool = await api("/api/pools/demo", { method: "POST", json });
      notify(`Created demo pool "${pool.name}" with ${pool.prompt_count} prompts.`);
      await refresh();
    } catch (err) {
      reportError(err);
    } finally {
      button.disabled = false;
    }
  }
  demoButton.addEventListener("click", () => createDemo(demoButton));
  heldOutButton.addEventListener("click", () => createDemo(heldOutButton, { held_out: true }));

  // Upload form
  const fileInput = h("input", { type: "file", id: "upload-file", name: "file", required: true, accept: ".jsonl,.json,.csv,.parquet,.ndjson" });
  const nameInput = h("input", { type: "text", id: "upload-name", name: "name", placeholder: "default: the file name" });
  const submit = h("button", { type: "submit", id: "upload-submit", class: "btn btn-primary" }, "Upload pool");
  const presetSelect = h("select", { id: "upload-preset", name: "preset" });
  const promptField = h("input", { type: "text", id: "upload-prompt-field", name: "prompt_field", value: "prompt" });
  const answerField = h("input", { type: "text", id: "upload-answer-field", name: "answer_field", placeholder: "optional: without it the pool is label-free" });
  const idField = h("input", { type: "text", id: "upload-id-field", name: "id_field", placeholder: "optional: rows are numbered" });
  function renderPresetOptions() {
    replace(presetSelect, h("option", { value: "none" }, "none (map the fields yourself)"),
      PRESETS.map((p) => h("option", { value: p.name }, p.title ? `${p.name} — ${p.title}` : p.name)));
  }
  function applyPreset() {
    const preset = PRESETS.find((p) => p.name === presetSelect.value) || NO_PRESET;
    promptField.value = preset.prompt_field || "";
    answerField.value = preset.answer_field || "";
    idField.value = preset.id_field || "";
  }
  presetSelect.addEventListener("change", applyPreset);
  renderPresetOptions();
  api("/api/pools/presets").then((info) => {
    if (!ctx.alive || !info || !Array.isArray(info.presets) || !info.presets.length) return;
    const chosen = presetSelect.value;
    PRESETS = info.presets;
    renderPresetOptions();
    presetSelect.value = PRESETS.some((p) => p.name === chosen) ? chosen : "none";
  }).catch(() => { /* keep the built-in list */ });

  const form = h("form", { id: "upload-form", "data-testid": "upload-form", class: "stack" },
    h("div", { class: "grid grid-3" },
      field("File", fileInput, { hint: "JSONL, CSV, Parquet or JSON" }),
      field("Name", nameInput),
      field("Format", select({ id: "upload-format", name: "format", value: "auto" }, FORMATS))),
    h("div", { class: "grid grid-3" },
      field("Preset", presetSelect, { hint: "Known datasets fill in the field names and task type" }),
      field("Task type", select({ id: "upload-task-type", name: "task_type", value: "auto" }, TASK_TYPES)),
      field("Prompts too long for the model", select({ id: "upload-long-prompts", name: "long_prompts", value: "refuse" },
        [["refuse", "refuse the file (lists them)"], ["truncate", "cut them to the limit"]]))),
    h("div", { class: "grid grid-3" },
      field("Prompt field", promptField),
      field("Answer field", answerField),
      field("ID field", idField)),
    h("div", { class: "row" }, submit));

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const data = new FormData(form);
    // "auto" and "none" are the server's defaults: leave those fields out rather than send them.
    if (data.get("format") === "auto") data.delete("format");
    if (data.get("preset") === "none") data.delete("preset");
    for (const key of ["name", "prompt_field", "answer_field", "id_field"]) {
      if (!String(data.get(key) || "").trim()) data.delete(key);
    }
    submit.disabled = true;
    submit.textContent = "Uploading…";
    try {
      const pool = await api("/api/pools", { method: "POST", form: data });
      notify(`Uploaded pool "${pool.name}" with ${pool.prompt_count} prompts.`);
      form.reset();
      applyPreset();
      await refresh();
    } catch (err) {
      reportError(err);
    } finally {
      submit.disabled = false;
      submit.textContent = "Upload pool";
    }
  });

  ctx.root.append(
    h("div", { class: "page-head" },
      h("h1", null, "Prompt pools"),
      h("p", { class: "lead" }, "A pool is the set of prompts you could pay to label or train on. Probe a model on it to see which prompts are hard.")),
    card("Pools", { actions: [heldOutButton, demoButton] }, list),
    card("Upload a pool", { needs: "manager", subtitle: "One prompt per row. Gold answers are optional: without them Budgetlab scores difficulty by answer agreement." }, form));
  refresh();
}
