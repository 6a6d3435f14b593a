// A banner on every page while no worker is alive: queued jobs would otherwise look stuck.
// /api/health is public, so this runs before sign-in too. Polls every 10 s (and on focus).
const POLL_MS = 10_000;

async function refresh(banner) {
  let health;
  try {
    const response = await fetch("/api/health", { cache: "no-store" });
    if (!response.ok) return;
    health = await response.json();
  } catch {
    return;  // the API itself is down: the pages' own requests say so
  }
  const message = health.workers && health.workers.alive === 0 ? health.message : null;
  banner.hidden = !message;
  banner.dataset.workersAlive = String(health.workers ? health.workers.alive : "");
  banner.textContent = message || "";
}

export function watchWorkers() {
  const banner = document.getElementById("worker-banner");
  if (!banner) return;
  refresh(banner);
  setInterval(() => refresh(banner), POLL_MS);
  window.addEventListener("focus", () => refresh(banner));
}
