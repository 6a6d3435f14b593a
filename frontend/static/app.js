// Budgetlab browser frontend: a hash-routed single page, plain ES modules, no build step.
import { currentUser, loadSession, signOut } from "./api.js";
import { h } from "./dom.js";
import { clearError, clearNotice } from "./ui.js";
import { renderSignin } from "./pages/signin.js";
import { renderPools } from "./pages/pools.js";
import { renderPool } from "./pages/pool.js";
import { renderPlanner } from "./pages/planner.js";
import { renderSubset } from "./pages/subset.js";
import { renderExperiments } from "./pages/experiments.js";
import { renderExperiment } from "./pages/experiment.js";
import { renderRun } from "./pages/run.js";
import { renderAdmin } from "./pages/admin.js";
import { renderTokens } from "./pages/tokens.js";
import { watchWorkers } from "./worker_banner.js";

const routes = [
  { pattern: /^#\/signin$/, nav: null, render: renderSignin, public: true },
  { pattern: /^#\/pools$/, nav: "pools", render: renderPools },
  { pattern: /^#\/pools\/(\d+)$/, nav: "pool", render: renderPool },
  { pattern: /^#\/planner\/(\d+)$/, nav: "planner", render: renderPlanner },
  { pattern: /^#\/subsets\/(\d+)$/, nav: "planner", render: renderSubset },
  { pattern: /^#\/experiments$/, nav: "experiments", render: renderExperiments },
  { pattern: /^#\/experiments\/(\d+)$/, nav: "experiments", render: renderExperiment },
  { pattern: /^#\/runs\/(\d+)$/, nav: "experiments", render: renderRun },
  { pattern: /^#\/tokens$/, nav: "tokens", render: renderTokens },
  { pattern: /^#\/admin$/, nav: "admin", render: renderAdmin },
];

let current = null;  // { alive, cleanups }

// Context handed to a page: its own root element, a liveness flag for async work, cleanup hooks
// (timers, polls) that run when the user navigates away, and the sidebar's context links.
function makeContext(root) {
  const state = { alive: true, cleanups: [] };
  return {
    state,
    root,
    get alive() { return state.alive; },
    onCleanup(fn) { state.cleanups.push(fn); },
    setNav: setContextNav,
  };
}

function setContextNav({ pool, planner } = {}) {
  const poolLink = document.getElementById("nav-pool");
  const plannerLink = document.getElementById("nav-planner");
  if (pool) {
    poolLink.href = `#/pools/${pool.id}`;
    poolLink.textContent = pool.name ? `Pool · ${pool.name}` : `Pool #${pool.id}`;
    poolLink.hidden = false;
    sessionStorage.setItem("budgetlab.navPool", JSON.stringify(pool));
  }
  if (planner) {
    plannerLink.href = `#/planner/${planner.id}`;
    plannerLink.textContent = `Planner · probe #${planner.id}`;
    plannerLink.hidden = false;
    sessionStorage.setItem("budgetlab.navPlanner", JSON.stringify(planner));
  }
}

function restoreContextNav() {
  try {
    const pool = JSON.parse(sessionStorage.getItem("budgetlab.navPool") || "null");
    const planner = JSON.parse(sessionStorage.getItem("budgetlab.navPlanner") || "null");
    setContextNav({ pool, planner });
  } catch {
    /* ignore a corrupt entry */
  }
}

function updateChrome(activeNav) {
  for (const link of document.querySelectorAll("#nav a")) {
    link.classList.toggle("active", link.dataset.nav === activeNav);
  }
  // The role on <body> hides what it cannot do (app.css: [data-needs]); the server refuses it anyway.
  const user = currentUser();
  document.body.dataset.role = user ? user.role : "";
  document.getElementById("auth-state").textContent = user ? `${user.name} · ${user.role}` : "Not signed in";
  document.getElementById("signout-button").hidden = !user;
  document.getElementById("nav-tokens").hidden = !user;
}

function route() {
  if (current) {
    current.state.alive = false;
    for (const fn of current.state.cleanups) {
      try { fn(); } catch (err) { console.error(err); }
    }
  }
  clearError();
  clearNotice();

  const hash = location.hash;
  if (!hash || hash === "#" || hash === "#/") {
    location.replace(currentUser() ? "#/pools" : "#/signin");
    return;
  }
  const match = routes.map((r) => ({ r, m: r.pattern.exec(hash) })).find((x) => x.m);
  if (match && !match.r.public && !currentUser()) {
    sessionStorage.setItem("budgetlab.returnTo", hash);
    location.replace("#/signin");
    return;
  }

  const page = document.getElementById("page");
  const root = h("div", { class: "page-root" });
  page.replaceChildren(root);
  current = makeContext(root);
  updateChrome(match ? match.r.nav : null);
  window.scrollTo(0, 0);

  if (!match) {
    root.append(h("div", { class: "page-head" }, h("h1", null, "Page not found")),
      h("p", null, "Nothing lives at this address. ", h("a", { href: "#/pools" }, "Go to the pools.")));
    return;
  }
  Promise.resolve(match.r.render(current, ...match.m.slice(1))).catch((err) => console.error(err));
}

document.getElementById("signout-button").addEventListener("click", async () => {
  try {
    await signOut();
  } catch (err) {
    console.warn("sign-out", err);  // the session is forgotten here whatever the server said
  }
  sessionStorage.clear();
  for (const id of ["nav-pool", "nav-planner"]) document.getElementById(id).hidden = true;
  location.hash = "#/signin";
  route();
});
document.getElementById("error-close").addEventListener("click", clearError);

window.addEventListener("hashchange", route);
restoreContextNav();
watchWorkers();
loadSession().catch((err) => console.warn("session", err)).finally(route);
