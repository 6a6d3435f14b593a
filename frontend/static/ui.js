// Shared page pieces: the error box, notices, number formats, cards, Plotly rendering.
import { h, replace } from "./dom.js";

const errorBox = () => document.getElementById("error-box");

export function showError(message) {
  const box = errorBox();
  document.getElementById("error-text").textContent = String(message);
  box.hidden = false;
  box.scrollIntoView({ block: "nearest" });
}

export function clearError() {
  errorBox().hidden = true;
  document.getElementById("error-text").textContent = "";
}

// Show an API (or any) error, unless the 401 handler already moved the user to sign-in.
export function reportError(err) {
  if (err && err.redirected) return;
  if (!(err && err.name === "ApiError")) console.error(err);
  showError(err && err.message ? err.message : String(err));
}

let noticeTimer = null;
export function notify(message) {
  const box = document.getElementById("notice");
  box.textContent = String(message);
  box.hidden = false;
  clearTimeout(noticeTimer);
  noticeTimer = setTimeout(() => { box.hidden = true; }, 4000);
}

export function clearNotice() {
  const box = document.getElementById("notice");
  box.hidden = true;
  clearTimeout(noticeTimer);
}

const isNum = (x) => typeof x === "number" && Number.isFinite(x);

export const fmt = {
  num: (x, digits = 2) => (isNum(x) ? x.toFixed(digits) : "–"),
  pct: (x, digits = 1) => (isNum(x) ? `${(x * 100).toFixed(digits)}%` : "–"),
  int: (x) => (isNum(x) ? x.toLocaleString("en-US") : "–"),
  // "0.25 [0.07, 0.59]": a pass rate with its 95% Wilson interval
  // "30%–52%": the 95% posterior interval of a predicted learnable share; "" when none was recorded
  interval: (lo, hi) => (isNum(lo) && isNum(hi) ? `${(lo * 100).toFixed(0)}%–${(hi * 100).toFixed(0)}%` : ""),
  wilson: (p, lo, hi) => (isNum(p)
    ? (isNum(lo) && isNum(hi) ? `${p.toFixed(2)} [${lo.toFixed(2)}, ${hi.toFixed(2)}]` : p.toFixed(2))
    : "–"),
  duration(seconds) {
    if (!isNum(seconds) || seconds < 0) return "–";
    const s = Math.round(seconds);
    if (s < 60) return `${s}s`;
    const m = Math.floor(s / 60);
    if (m < 60) return `${m}m ${String(s % 60).padStart(2, "0")}s`;
    return `${Math.floor(m / 60)}h ${String(m % 60).padStart(2, "0")}m`;
  },
  date(value) {
    if (!value) return "–";
    const d = new Date(value);
    if (Number.isNaN(d.getTime())) return String(value);
    return d.toLocaleString("en-GB", { year: "numeric", month: "short", day: "2-digit", hour: "2-digit", minute: "2-digit" });
  },
};

// `needs`: the role the card's actions need ("manager", "admin"): hidden for narrower roles (app.css).
export function card(title, { id, actions, subtitle, cls, needs } = {}, ...body) {
  return h("section", { class: `card ${cls || ""}`.trim(), id, "data-needs": needs },
    (title || actions) && h("header", { class: "card-head" },
      h("div", null, title && h("h2", null, title), subtitle && h("p", { class: "card-sub" }, subtitle)),
      actions && h("div", { class: "card-actions" }, actions)),
    h("div", { class: "card-body" }, body));
}

export function field(label, control, { hint, id, cls } = {}) {
  return h("label", { class: `field ${cls || ""}`.trim(), id },
    h("span", { class: "field-label" }, label),
    control,
    hint && h("span", { class: "field-hint" }, hint));
}

export function select(attrs, options) {
  return h("select", attrs, options.map((o) => (Array.isArray(o)
    ? h("option", { value: o[0] }, o[1])
    : h("option", { value: o }, o))));
}

export function stat(label, value, { id, big, hint } = {}) {
  return h("div", { class: `stat ${big ? "stat-big" : ""}`.trim() },
    h("div", { class: "stat-value", id }, value),
    h("div", { class: "stat-label" }, label),
    hint && h("div", { class: "stat-hint" }, hint));
}

export function emptyState(text) {
  return h("div", { class: "empty" }, text);
}

// A predicted learnable share at step 0 followed by its muted 95% interval. Label-free subsets have no share;
// subsets frozen before intervals were recorded have a share alone.
export function forecastShare(share, low, high, { strong = false } = {}) {
  const interval = isNum(share) ? fmt.interval(low, high) : "";
  return h("span", { class: "forecast-share nowrap" },
    h("span", { class: strong ? "strong" : null }, fmt.pct(share)),
    interval && " ", interval && h("span", { class: "muted small share-interval", title: "95% interval" }, interval));
}

// "<date> · by <user>": when a row was created, and by whom (rows from before users, or the system's, have no one).
export const createdText = (row) => `${fmt.date(row.created_at)}${row.created_by ? ` · by ${row.created_by}` : ""}`;

export function badge(text, kind = "") {
  return h("span", { class: `badge ${kind ? `badge-${kind}` : ""}`.trim(), "data-status": kind || null }, text);
}

const PLOT_CONFIG = { responsive: true, displaylogo: false, modeBarButtonsToRemove: ["lasso2d", "select2d"] };

// Render a Plotly figure JSON ({data, layout}) from the API. react() re-uses the plot when present.
export function renderFigure(container, figure) {
  if (!window.Plotly) {
    replace(container, emptyState("The chart library did not load (/static-vendor/plotly.min.js)."));
    return;
  }
  const fig = figure || { data: [], layout: {} };
  const layout = {
    autosize: true,
    font: { family: "Inter, system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif", size: 12, color: "#334155" },
    paper_bgcolor: "rgba(0,0,0,0)",
    plot_bgcolor: "rgba(0,0,0,0)",
    margin: { l: 56, r: 16, t: 40, b: 48 },
    ...(fig.layout || {}),
  };
  delete layout.width;  // fill the card
  if (container.dataset.plotted) {
    window.Plotly.react(container, fig.data || [], layout, PLOT_CONFIG);
  } else {
    clearPlot(container);
    window.Plotly.newPlot(container, fig.data || [], layout, PLOT_CONFIG);
    container.dataset.plotted = "1";
  }
}

export function clearPlot(container) {
  if (window.Plotly && container.dataset.plotted) window.Plotly.purge(container);
  delete container.dataset.plotted;
  replace(container);
}

export function debounce(fn, ms) {
  let timer = null;
  const wrapped = (...args) => {
    clearTimeout(timer);
    timer = setTimeout(() => fn(...args), ms);
  };
  wrapped.cancel = () => clearTimeout(timer);
  return wrapped;
}

// Job states shared by probes and training runs.
export const ACTIVE_STATUSES = new Set(["queued", "running", "cancelling"]);
const STATUS_KINDS = {
  succeeded: "ok", failed: "bad", cancelled: "muted", cancelling: "warn", running: "info", queued: "muted", mixed: "warn",
};

export function statusBadge(status) {
  return badge(status || "–", STATUS_KINDS[status] || "");
}

// Call `tick` now and then every `ms` while it resolves to true; stops when the page is left.
// A network or server error is reported once and polling goes on (the server may be restarting);
// a 4xx (unknown id, bad token) will not fix itself, so it stops.
// startPolling that a button can start again once it stopped: starting it while it runs does nothing.
export function restartablePolling(ctx, tick, ms = 3000) {
  let running = false;
  return () => {
    if (running) return;
    running = true;
    startPolling(ctx, async () => {
      try {
        const again = await tick();
        running = Boolean(again);
        return again;
      } catch (err) {
        running = false;
        throw err;
      }
    }, ms);
  };
}

export function startPolling(ctx, tick, ms = 2000) {
  let timer = null;
  let reported = false;
  async function run() {
    if (!ctx.alive) return;
    let again = true;
    try {
      again = await tick();
      reported = false;
    } catch (err) {
      if (!reported) reportError(err);
      reported = true;
      again = !(err && err.status >= 400 && err.status < 500);
    }
    if (again && ctx.alive) timer = setTimeout(run, ms);
  }
  ctx.onCleanup(() => clearTimeout(timer));
  run();
}
