import { api, setToken, takeReturnTo, takeSigninMessage, getToken } from "../api.js";
import { h } from "../dom.js";
import { card, field, reportError, showError } from "../ui.js";

export function renderSignin(ctx) {
  const message = takeSigninMessage();
  const input = h("input", {
    id: "token-input", "data-testid": "token-input", type: "password", autocomplete: "off",
    spellcheck: "false", placeholder: "paste your API token", value: getToken(), required: true,
  });
  const button = h("button", { id: "signin-button", "data-testid": "signin-button", type: "submit", class: "btn btn-primary" }, "Sign in");
  const status = h("p", { class: "muted small", id: "signin-status" });

  async function submit(event) {
    event.preventDefault();
    const token = input.value.trim();
    if (!token) {
      showError("Enter a token first.");
      return;
    }
    button.disabled = true;
    status.textContent = "Checking the token…";
    try {
      await api("/api/pools", { token, redirectOn401: false });
      setToken(token);
      location.hash = takeReturnTo();
    } catch (err) {
      status.textContent = "";
      reportError(err);
    } finally {
      button.disabled = false;
    }
  }

  const form = h("form", { id: "signin-form", class: "stack", onsubmit: submit },
    field("API token", input),
    h("div", { class: "row" }, button),
    status);

  ctx.root.append(
    h("div", { class: "signin-wrap" },
      h("div", { class: "page-head" }, h("h1", null, "Sign in"),
        h("p", { class: "lead" }, "Budgetlab probes a base model on your prompt pool, scores each prompt's difficulty and helps you decide which prompts to pay for.")),
      card("API token", {},
        h("p", { class: "muted" },
          "Every request carries this token. The admin token is printed in the server log at first start, ",
          "or set it yourself with the ", h("code", null, "BUDGETLAB_ADMIN_TOKEN"), " environment variable. ",
          "More tokens: ", h("code", null, "budgetlab token create"), "."),
        form)));
  if (message) showError(message);
  input.focus();
}
