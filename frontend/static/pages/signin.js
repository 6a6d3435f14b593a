import { signIn, takeReturnTo, takeSigninMessage } from "../api.js";
import { h } from "../dom.js";
import { card, field, reportError, showError } from "../ui.js";

export function renderSignin(ctx) {
  const message = takeSigninMessage();
  const name = h("input", { id: "signin-name", "data-testid": "signin-name", autocomplete: "username",
    spellcheck: "false", required: true });
  const password = h("input", { id: "signin-password", "data-testid": "signin-password", type: "password",
    autocomplete: "current-password", required: true });
  const button = h("button", { id: "signin-button", "data-testid": "signin-button", type: "submit", class: "btn btn-primary" }, "Sign in");
  const status = h("p", { class: "muted small", id: "signin-status" });

  async function submit(event) {
    event.preventDefault();
    if (!name.value.trim() || !password.value) {
      showError("Enter your name and password.");
      return;
    }
    button.disabled = true;
    status.textContent = "Signing in…";
    try {
      await signIn(name.value.trim(), password.value);
      location.hash = takeReturnTo();
    } catch (err) {
      status.textContent = "";
      password.value = "";
      reportError(err);
    } finally {
      button.disabled = false;
    }
  }

  const form = h("form", { id: "signin-form", class: "stack", onsubmit: submit },
    field("Name", name), field("Password", password),
    h("div", { class: "row" }, button),
    status);

  ctx.root.append(
    h("div", { class: "signin-wrap" },
      h("div", { class: "page-head" }, h("h1", null, "Sign in"),
        h("p", { class: "lead" }, "Budgetlab probes a base model on your prompt pool, scores each prompt's difficulty and helps you decide which prompts to pay for.")),
      card("Your account", {},
        h("p", { class: "muted" },
          "The first admin's password is printed in the server log at first start (or set it with ",
          h("code", null, "BUDGETLAB_ADMIN_PASSWORD"), "). An admin adds users on the ", h("em", null, "Users & audit"),
          " page or with ", h("code", null, "budgetlab user add"), ". Scripts use API tokens instead."),
        form)));
  if (message) showError(message);
  name.focus();
}
