// The browser signs in with a name and password: the server sets an HttpOnly session cookie (never visible to
// this code) and hands over a CSRF token, which every state-changing call sends as X-CSRF-Token. A 401 sends
// the user to the sign-in page with the server's message. Every API error is an RFC 9457 problem
// (application/problem+json): its `detail` is the sentence to show; `errors` (validation) and `details`
// (structured extras) stay on ApiError.body for pages that want them.

const RETURN_KEY = "budgetlab.returnTo";
export const ROLES = ["viewer", "manager", "admin"];  // narrowest first, as the server has them
const UNSAFE = new Set(["POST", "PUT", "PATCH", "DELETE"]);

let current = null;  // { user_id, name, role, via, csrf_token } while signed in

export const currentUser = () => current;
// Whether the signed-in user's role includes `role` (viewer < manager < admin).
export const can = (role) => Boolean(current) && ROLES.indexOf(current.role) >= ROLES.indexOf(role);

export function takeReturnTo() {
  const target = sessionStorage.getItem(RETURN_KEY);
  sessionStorage.removeItem(RETURN_KEY);
  return target && !target.startsWith("#/signin") ? target : "#/pools";
}

let signinMessage = "";
export function takeSigninMessage() {
  const message = signinMessage;
  signinMessage = "";
  return message;
}

export class ApiError extends Error {
  constructor(status, message, body = null) {
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.body = body;
    this.redirected = false;  // true when the 401 handler already took the user to sign-in
  }
}

function detailOf(body, response) {
  if (body && typeof body === "object" && typeof body.detail === "string") return body.detail;
  // Not a problem document (a proxy's error page, a dropped connection): say what we know.
  return `${response.status} ${response.statusText || "request failed"}`;
}

async function send(path, { method = "GET", json, form } = {}) {
  const headers = {};
  if (UNSAFE.has(method) && current?.csrf_token) headers["X-CSRF-Token"] = current.csrf_token;
  let body;
  if (json !== undefined) {
    headers["Content-Type"] = "application/json";
    body = JSON.stringify(json);
  } else if (form !== undefined) {
    body = form;  // the browser sets the multipart boundary
  }
  try {
    return await fetch(path, { method, headers, body, credentials: "same-origin" });
  } catch (err) {
    throw new ApiError(0, `Cannot reach the server (${err.message}). Is it running?`);
  }
}

async function failure(response, redirectOn401) {
  let parsed = null;
  try {
    parsed = await response.json();
  } catch {
    parsed = null;
  }
  const error = new ApiError(response.status, detailOf(parsed, response), parsed);
  if (response.status === 401 && redirectOn401) {
    current = null;
    signinMessage = error.message;
    const here = location.hash;
    if (!here.startsWith("#/signin")) {
      sessionStorage.setItem(RETURN_KEY, here);
      error.redirected = true;
      location.hash = "#/signin";
    }
  }
  return error;
}

export async function api(path, { method = "GET", json, form, redirectOn401 = true } = {}) {
  const response = await send(path, { method, json, form });
  if (!response.ok) throw await failure(response, redirectOn401);
  if (response.status === 204) return null;
  const type = response.headers.get("content-type") || "";
  return type.includes("json") ? response.json() : response.text();
}

// Who is signed in (from the session cookie), or null; called once when the app starts.
export async function loadSession() {
  const me = await api("/api/session", { redirectOn401: false });
  current = me && me.signed_in ? me : null;
  return current;
}

export async function signIn(name, password) {
  current = await api("/api/session", { method: "POST", json: { name, password }, redirectOn401: false });
  return current;
}

// Ends the session on the server (its cookie stops working), then forgets it here.
export async function signOut() {
  try {
    if (current) await api("/api/session", { method: "DELETE", redirectOn401: false });
  } finally {
    current = null;
  }
}

export function filenameFrom(disposition) {
  if (!disposition) return null;
  const star = /filename\*\s*=\s*(?:UTF-8|utf-8)''([^;]+)/.exec(disposition);
  if (star) {
    try {
      return decodeURIComponent(star[1].trim().replace(/^"|"$/g, ""));
    } catch {
      /* fall through to the plain filename */
    }
  }
  const plain = /filename\s*=\s*"?([^";]+)"?/.exec(disposition);
  return plain ? plain[1].trim() : null;
}

// File download through fetch (so the session and CSRF headers go along) → Blob → object URL click.
// `options` as for send(), e.g. a POST with a JSON body.
export async function download(path, fallbackName = "download", options = {}) {
  const response = await send(path, options);
  if (!response.ok) throw await failure(response, true);
  const blob = await response.blob();
  const name = filenameFrom(response.headers.get("content-disposition")) || fallbackName;
  const url = URL.createObjectURL(blob);
  const link = document.createElement("a");
  link.href = url;
  link.download = name;
  link.hidden = true;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 30_000);
  return name;
}

// File download from a POST with a JSON body (the planner's picks for labeling).
export function downloadPost(path, json, fallbackName = "download") {
  return download(path, fallbackName, { method: "POST", json });
}
