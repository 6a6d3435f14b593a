// Your API tokens, for scripts and the CLI: list, create (your role or a narrower one, with an expiry), revoke.
import { ROLES, api, currentUser } from "../api.js";
import { h, replace } from "../dom.js";
import { card, emptyState, field, fmt, notify, reportError, select } from "../ui.js";


export function tokenTable(tokens, { onRevoke, showUser = false } = {}) {
  if (!tokens.length) return emptyState("No tokens yet.");
  return h("table", { class: "table", "data-testid": "token-table" },
    h("thead", null, h("tr", null, showUser && h("th", null, "User"), h("th", null, "Name"), h("th", null, "Role"),
      h("th", null, "Created"), h("th", null, "Last used"), h("th", null, "Expires"), h("th", null, ""))),
    h("tbody", null, tokens.map((t) => h("tr", { "data-testid": `token-row-${t.id}` },
      showUser && h("td", null, t.user),
      h("td", null, t.name), h("td", null, t.role), h("td", null, fmt.date(t.created_at)),
      h("td", null, fmt.date(t.last_used_at)), h("td", null, t.expires_at ? fmt.date(t.expires_at) : "never"),
      h("td", null, t.revoked_at
        ? h("span", { class: "muted" }, `revoked ${fmt.date(t.revoked_at)}`)
        : h("button", { type: "button", class: "btn btn-ghost btn-small", "data-testid": `revoke-token-${t.id}`,
          onclick: () => onRevoke(t) }, "Revoke"))))));
}

export async function revokeToken(token) {
  await api(`/api/tokens/${token.id}`, { method: "DELETE" });
  notify(`Token "${token.name}" revoked: it stops working now.`);
}

export async function renderTokens(ctx) {
  const user = currentUser();
  const list = h("div", { id: "tokens-list" });
  const secret = h("div", { id: "token-secret" });

  async function refresh() {
    try {
      const tokens = await api("/api/tokens");
      if (ctx.alive) replace(list, tokenTable(tokens, { onRevoke: (t) => revokeToken(t).then(refresh).catch(reportError) }));
    } catch (err) {
      reportError(err);
    }
  }

  const name = h("input", { id: "token-name", "data-testid": "token-name", required: true, placeholder: "e.g. nightly probe script" });
  const role = select({ id: "token-role", "data-testid": "token-role" },
    ROLES.slice(0, ROLES.indexOf(user.role) + 1).map((r) => [r, r]));
  role.value = user.role;
  const days = h("input", { id: "token-days", type: "number", min: "1", step: "1", placeholder: "never" });
  async function create(event) {
    event.preventDefault();
    const json = { name: name.value.trim(), role: role.value };
    if (days.value) json.expires_at = new Date(Date.now() + Number(days.value) * 86_400_000).toISOString();
    try {
      const made = await api("/api/tokens", { method: "POST", json });
      replace(secret, h("p", { class: "notice-inline", "data-testid": "token-secret" },
        "Copy it now, it is not shown again: ", h("code", null, made.token)));
      name.value = "";
      await refresh();
    } catch (err) {
      reportError(err);
    }
  }

  ctx.root.append(
    h("div", { class: "page-head" }, h("h1", null, "API tokens"),
      h("p", { class: "lead" }, `Tokens act for you (${user.name}, ${user.role}) in scripts and the CLI: `,
        "send them as ", h("code", null, "Authorization: Bearer <token>"), ".")),
    card("New token", {},
      h("form", { class: "row wrap", onsubmit: create },
        field("Name", name), field("Role", role, { hint: "yours or narrower" }),
        field("Expires after (days)", days, { hint: "empty: never" }),
        h("button", { type: "submit", class: "btn btn-primary", id: "token-create" }, "Create token")),
      secret),
    card("Your tokens", {}, list));
  await refresh();
}
