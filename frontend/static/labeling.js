// Labeling pieces shared by the subset, pool and planner pages: the export-for-labeling picker, the
// import-labels control with its report, a job's progress bar, the Label Studio settings, and the
// panel saying how far label-free difficulty (agreement) can be trusted. Every text is set as text.
import { api } from "./api.js";
import { h, replace } from "./dom.js";
import {
  ACTIVE_STATUSES, badge, clearPlot, emptyState, field, fmt, notify, renderFigure, reportError, select, stat,
  statusBadge,
} from "./ui.js";

export const LABELING_FORMATS = [
  ["label-studio", "Label Studio tasks (JSON)"],
  ["label-studio-config", "Label Studio labeling config (XML)"],
  ["argilla", "Argilla dataset (zip)"],
  ["csv", "CSV template (id, prompt, answer)"],
  ["jsonl", "JSONL template (id, prompt, answer)"],
];
export const FORMAT_NAMES = Object.fromEntries([...LABELING_FORMATS,
  ["label-studio-project", "Label Studio project"]]);

// Only http(s) addresses become links: a stored URL is user input, and a javascript: one must not be clickable.
export const webHref = (url) => (typeof url === "string" && /^https?:\/\//i.test(url) ? url : null);

const inlineError = (testid) => h("div", { class: "inline-error", "data-testid": testid, role: "alert", hidden: true });
function showInline(box, err) {
  if (err && err.redirected) return;
  if (!(err && err.name === "ApiError")) console.error(err);
  box.textContent = err && err.message ? err.message : String(err);
  box.hidden = false;
}
function hideInline(box) {
  box.hidden = true;
  box.textContent = "";
}

// ---------- export for labeling ----------

// A format picker and a download button. `fetchFile(format)` downloads and resolves to the file name.
export function labelingExport({ prefix = "labeling", fetchFile, onDone, label = "Download for labeling" }) {
  const format = select({ "data-testid": `${prefix}-format`, id: `${prefix}-format` }, LABELING_FORMATS);
  const button = h("button", { type: "button", class: "btn btn-ghost", "data-testid": `${prefix}-export`, id: `${prefix}-export` },
    label);
  button.addEventListener("click", async () => {
    button.disabled = true;
    try {
      const name = await fetchFile(format.value);
      notify(`Downloaded ${name}; it is listed as sent for labeling.`);
      if (onDone) onDone(format.value);
    } catch (err) {
      reportError(err);
    } finally {
      button.disabled = false;
    }
  });
  return h("div", { class: "labeling-export" },
    h("div", { class: "row" }, h("div", { class: "grow" }, field("Format", format)), button),
    h("p", { class: "muted small" },
      "Label Studio: import the tasks into a project made with the config (or use “Send to Label Studio”). ",
      "Argilla: rg.Dataset.from_disk on the unzipped folder. CSV/JSONL: fill in the answer column. ",
      "Bring the answers back with Import labels; they are matched by id."));
}

// What was sent for labeling (GET /api/pools/{id}/labels exports), newest first.
export function exportsTable(exports, { withSubset = false } = {}) {
  return h("div", { class: "table-scroll" }, h("table", { class: "table", "data-testid": "labeling-exports-table" },
    h("thead", null, h("tr", null, h("th", null, "Sent"), withSubset && h("th", null, "Subset"), h("th", null, "Format"),
      h("th", { class: "num" }, "Prompts"), h("th", null, "Label Studio"), h("th", null, "By"))),
    h("tbody", null, exports.map((x) => h("tr", { "data-export-id": x.id },
      h("td", { class: "muted nowrap" }, fmt.date(x.created_at)),
      withSubset && h("td", null, x.subset_id != null
        ? h("a", { href: `#/subsets/${x.subset_id}`, "data-testid": `export-subset-link-${x.id}` }, `subset #${x.subset_id}`)
        : h("span", { class: "muted" }, "planner picks")),
      h("td", null, FORMAT_NAMES[x.format] || x.format),
      h("td", { class: "num" }, fmt.int(x.prompt_count)),
      h("td", null, x.label_studio_project_id != null
        ? (webHref(x.label_studio_url)
          ? h("a", { href: webHref(x.label_studio_url), target: "_blank", rel: "noopener noreferrer" }, `project #${x.label_studio_project_id}`)
          : `project #${x.label_studio_project_id}`)
        : "–"),
      h("td", { class: "muted" }, x.token_name || "–"))))));
}

// ---------- a job's progress ----------

// A progress bar that follows GET /api/jobs/{id} until the job ends. `follow(job)` resolves to the
// finished job (or null when the page was left).
export function jobProgress(ctx, { testid, title }) {
  const element = h("div", { class: "job label-job", "data-testid": testid, id: testid, hidden: true });
  let timer = null;
  let followed = null;
  ctx.onCleanup(() => clearTimeout(timer));

  function render(job) {
    const done = job.progress_done ?? 0;
    const total = job.progress_total ?? 0;
    const share = total > 0 ? Math.min(1, done / total) : (job.status === "succeeded" ? 1 : 0);
    const kind = { succeeded: "ok", failed: "bad", cancelled: "muted", cancelling: "warn" }[job.status] || "";
    element.hidden = false;
    element.dataset.status = job.status;
    element.dataset.jobId = String(job.id);
    replace(element,
      h("div", { class: "job-head" }, h("span", { class: "job-title" }, `${title} · job #${job.id}`),
        h("span", { "data-testid": `${testid}-state`, "data-status": job.status }, statusBadge(job.status))),
      h("div", { class: "progress", role: "progressbar", "aria-valuemin": "0", "aria-valuemax": String(total), "aria-valuenow": String(done) },
        h("div", { class: `progress-fill ${kind}`, style: { width: `${(share * 100).toFixed(1)}%` } })),
      h("div", { class: "job-numbers" }, h("span", null, `${fmt.int(done)} / ${fmt.int(total)}`),
        ACTIVE_STATUSES.has(job.status) && job.eta_seconds != null && h("span", null, `${fmt.duration(job.eta_seconds)} left`)),
      job.message && job.message !== job.error
        && h("p", { class: "muted small job-message", "data-testid": `${testid}-message` }, job.message),
      job.status === "failed" && h("div", { class: "inline-error", "data-testid": `${testid}-error` },
        h("strong", null, "It failed: "), job.error || "no error message was recorded."));
  }

  function follow(job) {
    clearTimeout(timer);
    followed = job.id;
    render(job);
    return new Promise((resolve) => {
      async function tick() {
        if (!ctx.alive || followed !== job.id) { resolve(null); return; }
        try {
          const fresh = await api(`/api/jobs/${job.id}`);
          if (!ctx.alive || followed !== job.id) { resolve(null); return; }
          render(fresh);
          if (!ACTIVE_STATUSES.has(fresh.status)) { resolve(fresh); return; }
        } catch (err) {
          reportError(err);
          if (err && err.status >= 400 && err.status < 500) { resolve(null); return; }
        }
        timer = setTimeout(tick, 1000);
      }
      timer = setTimeout(tick, ACTIVE_STATUSES.has(job.status) ? 500 : 0);
    });
  }
  // Forget the job shown: a new one is about to start, and the old status must not read as its own.
  function reset() {
    clearTimeout(timer);
    followed = null;
    element.hidden = true;
    delete element.dataset.status;
    delete element.dataset.jobId;
    replace(element);
  }
  return { element, follow, reset };
}

// ---------- import labels ----------

// File input with "Check" (dry run) and "Import", then the report. `onImported(result)` runs after an
// import that changed answers, and again when its re-grading job ends.
export function importLabels(ctx, poolId, { onImported } = {}) {
  const file = h("input", { type: "file", "data-testid": "labels-file", id: "labels-file", name: "file", "aria-label": "Labels file" });
  const check = h("button", { type: "button", class: "btn btn-ghost", "data-testid": "labels-check", id: "labels-check" }, "Check");
  const submit = h("button", { type: "button", class: "btn btn-primary", "data-testid": "labels-import", id: "labels-import" }, "Import labels");
  const error = inlineError("labels-error");
  const report = h("div", { "data-testid": "labels-report", id: "labels-report", hidden: true });
  const regrade = jobProgress(ctx, { testid: "labels-regrade", title: "Re-grading the stored samples" });

  async function send(dryRun, button) {
    hideInline(error);
    const chosen = file.files && file.files[0];
    if (!chosen) {
      showInline(error, new Error("Choose the labels file first: a Label Studio or Argilla export, or CSV/JSONL with id and answer."));
      return;
    }
    const form = new FormData();
    form.append("file", chosen, chosen.name);
    if (dryRun) form.append("dry_run", "true");
    check.disabled = submit.disabled = true;
    regrade.reset();
    try {
      const result = await api(`/api/pools/${poolId}/labels`, { method: "POST", form });
      if (!ctx.alive) return;
      report.hidden = false;
      replace(report, importReport(result.report, result.label_set, chosen.name));
      if (dryRun) return;
      notify(result.label_set ? `Imported label set #${result.label_set.id}.` : "No answer changed; nothing was imported.");
      if (onImported) onImported(result);
      if (result.report.regrade_job_id) {
        const job = await regrade.follow({ id: result.report.regrade_job_id, status: "queued", progress_done: 0, progress_total: 0, message: "" });
        if (job && onImported) onImported(result);
      }
    } catch (err) {
      const detailsReport = err && err.body && err.body.details && err.body.details.report;
      report.hidden = !detailsReport;
      if (detailsReport) replace(report, importReport(detailsReport, null, chosen.name, true));
      showInline(error, err);
    } finally {
      check.disabled = submit.disabled = false;
    }
  }
  check.addEventListener("click", () => send(true, check));
  submit.addEventListener("click", () => send(false, submit));
  file.addEventListener("change", () => { hideInline(error); report.hidden = true; });

  return h("div", { class: "labels-import", "data-testid": "labels-import-box", "data-needs": "manager" },
    h("div", { class: "row" }, file, check, submit),
    h("p", { class: "muted small" },
      "A Label Studio JSON export, an Argilla export, or CSV/JSONL with id and answer columns. Rows are matched to ",
      "this pool's prompts by id; several annotators of one prompt are settled by majority. “Check” reports what ",
      "would change without changing anything."),
    error, report, regrade.element);
}

const plural = (n, one, many = `${one}s`) => `${fmt.int(n)} ${n === 1 ? one : many}`;

// The import (or check) report: counts, then the problems listed by id.
export function importReport(report, labelSet, source, failed = false) {
  const r = report || {};
  const head = failed ? "Nothing could be imported"
    : r.dry_run ? "Check only: nothing was changed"
      : labelSet ? `Imported as label set #${labelSet.id}` : "Nothing changed: every answer was already there";
  const regraded = r.regraded
    ? `Re-graded ${plural(r.regraded.samples ?? 0, "stored sample")} of ${plural(r.regraded.probes ?? 0, "probe")}.`
    : r.regrade_job_id ? `Re-grading the stored samples in job #${r.regrade_job_id}.` : null;
  return h("div", { class: "import-report" },
    h("div", { class: "report-head" }, h("strong", { "data-testid": "labels-report-title" }, head),
      h("span", { class: "muted small" }, ` · ${source || "labels"} · ${r.format || "?"} · task type ${r.task_type || "?"}`)),
    h("div", { class: "stats report-stats" },
      reportStat("matched", r.matched, "prompts matched"),
      reportStat("new", r.new, "new answers"),
      reportStat("changed", r.changed, "changed answers"),
      reportStat("unchanged", r.unchanged, "unchanged"),
      reportStat("annotations", r.annotations, "annotations read")),
    regraded && h("p", { class: "muted small" }, regraded),
    problemList(r.unknown_ids, "unknown-ids", ["id not in this pool (skipped)", "ids not in this pool (skipped)"],
      ["Id"], (id) => [h("span", { class: "mono" }, String(id))]),
    problemList(r.empty_answers, "empty", ["empty answer (skipped)", "empty answers (skipped)"],
      ["Id", "Where"], (x) => [h("span", { class: "mono" }, String(x.id)), x.line ?? "–"]),
    problemList(r.ungradeable, "ungradeable", [`answer a ${r.task_type || "this"} pool cannot grade (skipped)`,
      `answers a ${r.task_type || "this"} pool cannot grade (skipped)`],
      ["Id", "Answer", "Where"], (x) => [h("span", { class: "mono" }, String(x.id)), h("span", { class: "mono" }, String(x.answer ?? "")), x.line ?? "–"]),
    problemList(r.disagreements, "disagreements", ["prompt whose annotators disagree (settled by majority)",
      "prompts whose annotators disagree (settled by majority)"],
      ["Id", "Kept answer", "Agreeing / annotations"],
      (x) => [h("span", { class: "mono" }, String(x.id)), h("span", { class: "mono" }, String(x.answer ?? "")), `${x.agreeing} / ${x.annotations}`]),
    problemList(r.ties, "ties", ["tie between annotators (not imported: label it again)",
      "ties between annotators (not imported: label them again)"],
      ["Id", "Tied answers"],
      (x) => [h("span", { class: "mono" }, String(x.id)),
        Object.entries(x.answers || {}).map(([answer, count]) => h("span", { class: "tie" }, h("code", null, answer), ` ×${count}`))]));
}

// The undo report: answers put back, and answers a later import keeps.
export function undoReport(report) {
  const r = report || {};
  return h("span", null, `Put back ${plural(r.restored ?? 0, "answer")}`,
    r.kept_later_answers ? `; ${plural(r.kept_later_answers, "prompt")} keep a later import's answer` : "", ".");
}

function reportStat(key, value, label) {
  return h("div", { class: "stat", "data-testid": `report-${key}` },
    h("div", { class: "stat-value" }, fmt.int(value ?? 0)), h("div", { class: "stat-label" }, label));
}

function problemList(entry, key, [one, many], heads, cells) {
  if (!entry || !entry.count) return null;
  const label = entry.count === 1 ? one : many;
  const examples = entry.examples || [];
  const more = entry.count - examples.length;
  return h("details", { class: "report-problem", "data-testid": `report-${key}`, open: key !== "unknown-ids" || entry.count <= 5 },
    h("summary", null, h("span", { class: "strong" }, fmt.int(entry.count)), ` ${label}`),
    h("table", { class: "table compact" },
      h("thead", null, h("tr", null, heads.map((x) => h("th", null, x)))),
      h("tbody", null, examples.map((x) => h("tr", null, cells(x).map((c) => h("td", null, c)))))),
    more > 0 && h("p", { class: "muted small" }, `… and ${fmt.int(more)} more`));
}

// ---------- Label Studio settings ----------

// Shows the configured server (never a key) or a form to set one. `onChange(connection)` after a load,
// save or forget; `current()` is the last connection read.
export function labelStudioSettings(ctx, { onChange } = {}) {
  const element = h("div", { class: "ls-settings", "data-testid": "ls-settings", id: "ls-settings" }, emptyState("Loading…"));
  let connection = null;

  function show(editing = false) {
    if (connection && connection.configured && !editing) {
      const change = h("button", { type: "button", class: "btn btn-ghost btn-small", "data-testid": "ls-change", "data-needs": "admin" }, "Change");
      const forget = h("button", { type: "button", class: "btn btn-ghost btn-small btn-danger", "data-testid": "ls-forget", "data-needs": "admin" }, "Forget");
      change.addEventListener("click", () => show(true));
      forget.addEventListener("click", async () => {
        if (!window.confirm(`Forget the Label Studio server ${connection.url} and its API key?`)) return;
        forget.disabled = true;
        try {
          await api("/api/label-studio", { method: "DELETE" });
          await load();
        } catch (err) {
          reportError(err);
          forget.disabled = false;
        }
      });
      replace(element, h("div", { class: "row" },
        badge("connected", "ok"),
        webHref(connection.url)
          ? h("a", { href: webHref(connection.url), target: "_blank", rel: "noopener noreferrer", "data-testid": "ls-configured-url", class: "mono" }, connection.url)
          : h("span", { "data-testid": "ls-configured-url", class: "mono" }, connection.url),
        h("span", { class: "muted small" }, `saved ${fmt.date(connection.updated_at)}${connection.updated_by ? ` by ${connection.updated_by}` : ""}`),
        change, forget));
      return;
    }
    const url = h("input", { type: "text", "data-testid": "ls-url", id: "ls-url", placeholder: "http://localhost:8080", value: connection && connection.url ? connection.url : "", spellcheck: "false" });
    const key = h("input", { type: "password", "data-testid": "ls-api-key", id: "ls-api-key", autocomplete: "off", placeholder: "Account & Settings → Access token" });
    const save = h("button", { type: "submit", class: "btn btn-primary", "data-testid": "ls-save", "data-needs": "admin" }, "Check and save");
    const cancel = editing && h("button", { type: "button", class: "btn btn-ghost", "data-testid": "ls-cancel", onclick: () => show(false) }, "Cancel");
    const error = inlineError("ls-settings-error");
    const form = h("form", { class: "stack" },
      h("div", { class: "grid grid-2" }, field("Label Studio URL", url), field("API key", key, { hint: "Kept on the server; never shown again" })),
      h("div", { class: "row" }, save, cancel), error);
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      hideInline(error);
      save.disabled = true;
      try {
        connection = await api("/api/label-studio", { method: "PUT", json: { url: url.value.trim(), api_key: key.value } });
        key.value = "";
        notify(`Label Studio at ${connection.url} is connected.`);
        show(false);
        if (onChange) onChange(connection);
      } catch (err) {
        showInline(error, err);
      } finally {
        save.disabled = false;
      }
    });
    replace(element, connection && !connection.configured
      ? h("p", { class: "muted small" }, "No Label Studio server is set up. Give its URL and an API key (a legacy or personal access token) to send subsets and pull their labels.")
      : null, form);
  }

  async function load() {
    try {
      connection = await api("/api/label-studio");
    } catch (err) {
      reportError(err);
      connection = { configured: false, url: null };
    }
    if (!ctx.alive) return connection;
    show(false);
    if (onChange) onChange(connection);
    return connection;
  }
  return { element, load, current: () => connection };
}

// ---------- trust in label-free difficulty ----------

const MIN_GRADED = 10;  // backend/labels/probe_trust.py MIN_GRADED
const SAME_SETTINGS = ["model", "k", "temperature", "max_new_tokens", "template", "grading_policy"];

function sameOptions(a, b) {
  const norm = (x) => JSON.stringify(x && typeof x === "object" ? Object.keys(x).sort().map((k) => [k, x[k]]) : x ?? null);
  return norm(a) === norm(b);
}

// Whether GET /api/probes/{id}/trust can answer: the probe has enough labeled prompts, or a finished probe
// with the same model and settings has. Asking only then keeps a foreseeable 409 out of the console.
async function trustCanAnswer(probe) {
  if ((probe.graded_prompts ?? 0) >= MIN_GRADED) return true;
  const probes = await api("/api/probes");
  return probes.some((other) => other.id !== probe.id && other.job && other.job.status === "succeeded"
    && (other.graded_prompts ?? 0) >= MIN_GRADED && SAME_SETTINGS.every((key) => other[key] === probe[key])
    && sameOptions(other.chat_template_options, probe.chat_template_options));
}

// How far agreement ranks prompts like pass rate does. `load(probe, {n})` fetches and renders; a probe
// with too few labeled prompts (and no comparable probe) gets a one-line hint, not an error.
export function trustPanel(ctx, { testid = "trust" } = {}) {
  const body = h("div", { class: "trust-body" });
  const plot = h("div", { class: "plot plot-small", "data-testid": `${testid}-scatter` });
  const element = h("div", { class: "trust", "data-testid": testid, id: testid, hidden: true }, body, plot);
  let seq = 0;

  function hint(text) {
    clearPlot(plot);
    plot.hidden = true;
    replace(body, h("p", { class: "muted small trust-hint", "data-testid": `${testid}-hint` }, text));
    element.hidden = false;
  }

  async function load(probe, { n } = {}) {
    const mine = ++seq;
    element.dataset.loading = "1";
    try {
      if (!(await trustCanAnswer(probe))) {
        if (ctx.alive && mine === seq) {
          hint(`Trust in label-free difficulty: not measured. It needs ${MIN_GRADED} or more labeled prompts on this probe `
            + "(import labels) or a finished labeled probe with the same model and settings.");
        }
        return;
      }
      const query = n ? `?n=${encodeURIComponent(Math.max(1, Math.round(n)))}` : "";
      const t = await api(`/api/probes/${probe.id}/trust${query}`);
      if (!ctx.alive || mine !== seq) return;
      render(probe, t);
    } catch (err) {
      if (!ctx.alive || mine !== seq) return;
      if (err && err.status === 409) hint(`Trust in label-free difficulty: not measured. ${err.message}`);
      else reportError(err);
    } finally {
      if (mine === seq) delete element.dataset.loading;
    }
  }

  function render(probe, t) {
    element.hidden = false;
    plot.hidden = false;
    const rhoText = t.rho == null ? "–" : `${fmt.num(t.rho)}`;
    const interval = t.rho_low != null && t.rho_high != null ? `95% interval [${fmt.num(t.rho_low)}, ${fmt.num(t.rho_high)}]` : "no interval";
    const source = t.comparable
      ? ["Measured on ", h("a", { href: `#/planner/${t.source_probe_id}`, "data-testid": `${testid}-source` }, `probe #${t.source_probe_id}`),
        ` with the same model and settings (${fmt.int(t.prompts)} labeled prompts); probe #${probe.id} has too few labeled prompts.`]
      : [`Measured on ${fmt.int(t.prompts)} labeled prompts of this probe.`];
    replace(body,
      h("p", { class: "trust-source small", "data-testid": `${testid}-basis` }, ...source),
      t.warning && h("div", { class: "warning trust-warning", role: "alert", "data-testid": `${testid}-warning` },
        h("strong", null, "Careful: "), t.warning),
      h("div", { class: "stats" },
        stat("Spearman ρ, agreement vs pass rate", h("span", { "data-testid": `${testid}-rho` }, rhoText), { hint: interval, big: true }),
        stat(`recall of the hard ${fmt.int(t.n)}`, h("span", { "data-testid": `${testid}-recall` }, fmt.pct(t.recall, 0)),
          { hint: `chance ${fmt.pct(t.chance_recall, 0)} · best ${fmt.pct(t.best_recall, 0)}` }),
        stat("Jaccard of the two picks", h("span", { "data-testid": `${testid}-jaccard` }, fmt.num(t.jaccard)),
          { hint: `chance ${fmt.num(t.chance_jaccard)} · best ${fmt.num(t.best_jaccard)}` }),
        stat("mean pass rate", fmt.num(t.mean_pass_rate), { hint: `${fmt.pct(t.mixed_share, 0)} of prompts have mixed results` })),
      h("p", { class: "muted small" },
        `Recall: the share of the ${fmt.int(t.n)} hardest prompts by pass rate that the ${fmt.int(t.n)} hardest by agreement also pick `
        + "(ties broken at random); best is what ties in pass rate allow."),
      t.note && h("p", { class: "muted small", "data-testid": `${testid}-note` }, t.note));
    renderFigure(plot, t.figure);
  }
  return { element, load };
}
