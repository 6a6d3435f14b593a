"""A small synchronous client for the parts of Label Studio's HTTP API that Budgetlab uses.

Budgetlab hands chosen prompts to a Label Studio server as tasks and pulls the annotators' answers back
as the project's JSON export, the same bytes a manager gets from "Export → JSON", so one importer reads both.

Label Studio 1.2x accepts two kinds of API key (https://labelstud.io/guide/access_tokens):
- legacy tokens, sent as `Authorization: Token <key>`;
- personal access tokens, which are JWT refresh tokens: they are exchanged at `/api/token/refresh/`
  for a short-lived access token sent as `Authorization: Bearer <access>`.
The kind is told apart by the key's shape. Every error is a `LabelStudioError` whose message says what went
wrong and what to do; the API key never appears in one.
"""

import base64
import json
from collections.abc import Callable
from typing import Any

import httpx

EXPORT_FORMAT = "JSON"
_REFUSED_KEY = "Label Studio refused the API key ({status}); copy the token from Account & Settings and save it again"


def _is_json(response: httpx.Response) -> bool:
    return response.headers.get("content-type", "").startswith("application/json")


class LabelStudioError(Exception):
    """Talking to Label Studio failed; the message is meant for the manager who configured it."""

    def __init__(self, message: str):
        super().__init__(message if message.endswith((".", "?", "!")) else message + ".")


def is_personal_access_token(key: str) -> bool:
    """True when the key has a JWT's shape (three base64url parts, a JSON header naming an algorithm)."""
    parts = key.split(".")
    if len(parts) != 3 or not all(parts):
        return False
    try:
        header = json.loads(base64.urlsafe_b64decode(parts[0] + "=" * (-len(parts[0]) % 4)))
    except ValueError:
        return False
    return isinstance(header, dict) and "alg" in header


class LabelStudioClient:
    def __init__(self, url: str, api_key: str, timeout: float = 30) -> None:
        self.url = url.strip().rstrip("/")
        if not self.url.startswith(("http://", "https://")):
            raise LabelStudioError(f"Label Studio URL {self.url!r} must start with http:// or https://")
        self._key = api_key.strip()
        if not self._key:
            raise LabelStudioError("no Label Studio API key is set; copy the token from Account & Settings")
        self.timeout = timeout
        self._personal = is_personal_access_token(self._key)
        self._access: str | None = None  # the Bearer token a personal access token was exchanged for
        self._http = httpx.Client(base_url=self.url, timeout=timeout)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> "LabelStudioClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- public operations ---

    def check(self) -> str:
        """Validate URL and key; return who the key belongs to and the server's version."""
        user = self._json("GET", "/api/current-user/whoami")
        version = self._json("GET", "/api/version", authenticated=False)
        who = user.get("email") or user.get("username") or f"user {user.get('id')}"
        release = version.get("release") if isinstance(version, dict) else None
        return f"{who} on Label Studio {release or '(unknown version)'}"

    def create_project(self, title: str, label_config: str) -> int:
        project = self._json("POST", "/api/projects/", json={"title": title, "label_config": label_config})
        return int(project["id"])

    def import_tasks(
        self,
        project_id: int,
        tasks: list[dict],
        batch_size: int = 500,
        on_progress: Callable[[int, int], None] | None = None,
    ) -> int:
        """Import tasks in batches; call on_progress(imported so far, total) after each batch."""
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        imported = 0
        for start in range(0, len(tasks), batch_size):
            batch = tasks[start : start + batch_size]
            answer = self._json("POST", f"/api/projects/{project_id}/import", json=batch, project_id=project_id)
            # Older servers leave task_count out; then the batch is taken as imported whole.
            imported += int(answer.get("task_count", len(batch))) if isinstance(answer, dict) else len(batch)
            if on_progress is not None:
                on_progress(imported, len(tasks))
        return imported

    def export_annotations(self, project_id: int) -> bytes:
        """The project's JSON export (tasks that have annotations), as the bytes the server sent."""
        response = self._request(
            "GET", f"/api/projects/{project_id}/export", params={"exportType": EXPORT_FORMAT}, project_id=project_id
        )
        self._decode(response)  # an HTML page here means a proxy or login page answered, not Label Studio
        return response.content

    def project_url(self, project_id: int) -> str:
        return f"{self.url}/projects/{project_id}/data"

    # --- plumbing ---

    def _json(self, method: str, path: str, *, authenticated: bool = True, **kwargs: Any) -> Any:
        return self._decode(self._request(method, path, authenticated=authenticated, **kwargs))

    def _decode(self, response: httpx.Response) -> Any:
        try:
            return response.json()
        except ValueError:
            kind = response.headers.get("content-type", "no content type").split(";")[0]
            # Not echoed: a URL that is not Label Studio must not become a way to read other servers' pages.
            raise LabelStudioError(
                f"{self.url}{response.request.url.path} answered with {kind}, not JSON; check that the URL points "
                "at Label Studio itself, not a proxy or login page"
            ) from None

    def _request(
        self,
        method: str,
        path: str,
        *,
        authenticated: bool = True,
        project_id: int | None = None,
        **kwargs: Any,
    ) -> httpx.Response:
        headers = self._auth_headers() if authenticated else {}
        response = self._send(method, path, headers=headers, **kwargs)
        if authenticated and self._personal and response.status_code == 401:
            # Access tokens live minutes; get a fresh one once before calling the key refused.
            self._access = None
            response = self._send(method, path, headers=self._auth_headers(), **kwargs)
        self._raise_for_status(response, project_id)
        return response

    def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            return self._http.request(method, path, **kwargs)
        except httpx.TimeoutException:
            raise LabelStudioError(
                f"Label Studio at {self.url} did not answer {method} {path} within {self.timeout:g} s; "
                "check that it runs and is not overloaded, or raise the timeout"
            ) from None
        except httpx.ConnectError as exc:
            reason = "connection refused" if "refused" in str(exc).lower() else self._scrub(str(exc))
            raise LabelStudioError(
                f"Could not reach Label Studio at {self.url}: {reason}; check that it is running and that the URL "
                "is right"
            ) from None
        except httpx.TransportError as exc:
            raise LabelStudioError(
                f"The connection to Label Studio at {self.url} failed ({type(exc).__name__}: {self._scrub(str(exc))}); "
                "check that it is running and that the URL is right"
            ) from None

    def _auth_headers(self) -> dict[str, str]:
        if not self._personal:
            return {"Authorization": f"Token {self._key}"}
        if self._access is None:
            response = self._send("POST", "/api/token/refresh/", json={"refresh": self._key})
            self._raise_for_status(response, None)
            access = self._decode(response).get("access")
            if not access:
                raise LabelStudioError(
                    f"Label Studio at {self.url} gave no access token for the personal access token; "
                    "check that the URL points at Label Studio 1.16 or newer"
                )
            self._access = access
        return {"Authorization": f"Bearer {self._access}"}

    def _raise_for_status(self, response: httpx.Response, project_id: int | None) -> None:
        status = response.status_code
        if status < 400:
            return
        if status in (401, 403):
            # Label Studio's reason matters here, e.g. "legacy token authentication has been disabled for this
            # organization" means: use a personal access token instead.
            reason = self._detail(response) if _is_json(response) else ""
            raise LabelStudioError(
                _REFUSED_KEY.format(status=status) + (f". Label Studio says: {reason}" if reason else "")
            )
        if status == 404 and project_id is not None:
            raise LabelStudioError(
                f"Label Studio at {self.url} has no project {project_id} (404); it may have been deleted. "
                "Send the prompts to Label Studio again to create a new project"
            )
        raise LabelStudioError(
            f"Label Studio at {self.url} answered {status} to {response.request.method} "
            f"{response.request.url.path}: {self._detail(response)}"
        )

    def _detail(self, response: httpx.Response) -> str:
        if not _is_json(response):  # only Label Studio's own JSON reason is quoted (see _decode)
            return f"{response.reason_phrase or 'error'} (not a JSON answer)"
        try:
            body = response.json()
        except ValueError:
            return f"{response.reason_phrase or 'error'} (not a JSON answer)"
        if isinstance(body, dict):
            found = body.get("validation_errors") or body.get("detail") or body.get("message") or body
        else:
            found = body
        text = found if isinstance(found, str) else json.dumps(found, ensure_ascii=False)
        return self._scrub(text)[:300]

    def _scrub(self, text: str) -> str:
        return text.replace(self._key, "<api key>")
