// Admin: users (add, change role, reset password, disable), every user's tokens, and the audit log.
import { ROLES, api, download } from "../api.js";
import { h, replace } from "../dom.js";
import { card, emptyState, field, fmt, notify, reportError, select } from "../ui.js";
import { revokeToken, tokenTable } from "./tokens.js";

const AUDIT_PAGE = 50;

export async function renderAdmin(ctx) {
  const users = h("div", { id: "users-list" });
  const tokens = h("div", { id: "all-tokens" });
  const audit = h("div", { id: "audit-list" });
  let auditFilter = {};

  async function patchUser(user, json, done) {
    try {
      await api(`/api/users/${user.id}`, { method: "PATCH", json });
      notify(done);
      await refreshUsers();
    } catch (err) {
      reportError(err);
    }
  }

  async function refreshUsers() {
    const rows = await api("/api/users?limit=500");
    if (!ctx.alive) return;
    replace(users, h("table", { class: "table", "data-testid": "users-table" },
      h("thead", null, h("tr", null, ["Name", "Role", "State", "Password", "Created", ""].map((x) => h("th", null, x)))),
      h("tbody", null, rows.map((u) => {
        const role = select({ "data-testid": `user-role-${u.name}`, "aria-label": `role of ${u.name}` }, ROLES);
        role.value = u.role;
        role.addEventListener("change", () => patchUser(u, { role: role.value }, `${u.name} is now ${role.value}.`));
        return h("tr", { "data-testid": `user-row-${u.name}` },
          h("td", null, u.name), h("td", null, role), h("td", null, u.disabled ? "disabled" : "active"),
          h("td", null, u.has_password ? "set" : "none (tokens only)"), h("td", null, fmt.date(u.created_at)),
          h("td", { class: "row" },
            h("button", { type: "button", class: "btn btn-ghost btn-small",
              onclick: () => patchUser(u, { disabled: !u.disabled }, `${u.name} ${u.disabled ? "enabled" : "disabled"}.`) },
            u.disabled ? "Enable" : "Disable"),
            h("button", { type: "button", class: "btn btn-ghost btn-small", onclick: () => {
              const password = prompt(`New password for ${u.name} (at least 10 characters):`);
              if (password) patchUser(u, { password }, `Password of ${u.name} changed; their sessions ended.`);
            } }, "Set password")));
      }))));
  }

  async function refreshTokens() {
    const rows = await api("/api/tokens?all_users=true&limit=500");
    if (ctx.alive) {
      replace(tokens, tokenTable(rows, { showUser: true,
        onRevoke: (t) => revokeToken(t).then(refreshTokens).catch(reportError) }));
    }
  }

  async function refreshAudit(beforeId = null) {
    const params = new URLSearchParams({ limit: String(AUDIT_PAGE), ...auditFilter });
    if (beforeId) params.set("before_id", String(beforeId));
    const rows = await api(`/api/audit?${params}`);
    if (!ctx.alive) return;
    const older = rows.length === AUDIT_PAGE
      ? h("button", { type: "button", class: "btn btn-ghost btn-small", id: "audit-older",
        onclick: () => refreshAudit(rows[rows.length - 1].id).catch(reportError) }, "Older")
      : null;
    replace(audit, rows.length ? h("table", { class: "table", "data-testid": "audit-table" },
      h("thead", null, h("tr", null, ["When", "Who", "Via", "What", "Target", "From", "Outcome"].map((x) => h("th", null, x)))),
      h("tbody", null, rows.map((e) => h("tr", { "data-testid": "audit-row" },
        h("td", { class: "nowrap" }, fmt.date(e.at)), h("td", null, e.actor), h("td", null, e.via),
        h("td", null, h("code", null, e.operation)), h("td", null, e.target || "–"), h("td", null, e.address || "–"),
        h("td", null, e.status ? `${e.outcome} (${e.status})` : e.outcome))))) : emptyState("No events match."),
    older);
  }

  const name = h("input", { id: "new-user-name", "data-testid": "new-user-name", required: true });
  const role = select({ id: "new-user-role", "data-testid": "new-user-role" }, ROLES);
  const password = h("input", { id: "new-user-password", "data-testid": "new-user-password", type: "password",
    autocomplete: "new-password", placeholder: "empty: tokens only" });
  async function addUser(event) {
    event.preventDefault();
    try {
      const user = await api("/api/users", { method: "POST",
        json: { name: name.value.trim(), role: role.value, password: password.value || null } });
      notify(`User ${user.name} added (${user.role}).`);
      name.value = "";
      password.value = "";
      await refreshUsers();
    } catch (err) {
      reportError(err);
    }
  }

  const who = h("input", { id: "audit-user", placeholder: "user name" });
  const kind = h("input", { id: "audit-kind", placeholder: "pool, probe, run, session, …" });
  function filter(event) {
    event.preventDefault();
    auditFilter = Object.fromEntries([["user", who.value.trim()], ["kind", kind.value.trim()]].filter(([, v]) => v));
    refreshAudit().catch(reportError);
  }
  const csv = h("button", { type: "button", class: "btn btn-ghost", id: "audit-csv", onclick: () =>
    download(`/api/audit.csv?${new URLSearchParams(auditFilter)}`, "audit.csv").catch(reportError) }, "Download CSV");

  ctx.root.append(
    h("div", { class: "page-head" }, h("h1", null, "Users & audit"),
      h("p", { class: "lead" }, "Viewers read everything; managers also upload, probe, freeze, train and cancel or ",
        "delete what they created; admins also manage users and tokens, delete anything and read this log.")),
    card("Add a user", {},
      h("form", { class: "row wrap", onsubmit: addUser, id: "add-user-form" },
        field("Name", name), field("Role", role), field("Password", password, { hint: "at least 10 characters" }),
        h("button", { type: "submit", class: "btn btn-primary", id: "add-user" }, "Add user"))),
    card("Users", {}, users),
    card("Every user's tokens", {}, tokens),
    card("Audit log", { subtitle: "Every change and sign-in, newest first" },
      h("form", { class: "row wrap", onsubmit: filter },
        field("User", who), field("Kind", kind),
        h("button", { type: "submit", class: "btn" }, "Filter"), csv),
      audit));
  try {
    await refreshUsers();  // first: for a non-admin its refusal is the one message shown
    await Promise.all([refreshTokens(), refreshAudit()]);
  } catch (err) {
    reportError(err);
  }
}
