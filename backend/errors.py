"""The one error model: every 4xx/5xx is an RFC 9457 problem (application/problem+json).

`detail` is always a sentence a user can act on (the pages show it as is). Validation errors add
`errors`, one entry per offending input with its location; an `AppError` with structured data (an
import's problems, the allowed values) adds it as the extension member `details`.
"""

import logging
import re
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException

PROBLEM_MEDIA_TYPE = "application/problem+json"
log = logging.getLogger("budgetlab.api")


class AppError(Exception):
    """The one application error: a status code and a message a user can act on."""

    def __init__(self, status_code: int, message: str, *, details: Any = None):
        super().__init__(message)
        self.status_code = status_code
        self.message = message
        self.details = details


def not_found(what: str, ident: object) -> AppError:
    return AppError(404, f"{what} {ident} does not exist; list them with GET /api/{what.lower()}s.")


class InputError(BaseModel):
    loc: list[str | int] = Field(description="Where: 'body', 'query', 'path' or 'header', then the field path")
    msg: str = Field(description="What is wrong with it")
    type: str = Field(description="A machine-readable error kind, e.g. 'missing', 'less_than_equal'")


class Problem(BaseModel):
    """An RFC 9457 problem details object, the body of every error response."""

    type: str = Field("about:blank", description="A URI naming the kind of problem; about:blank: see `status`")
    title: str = Field(description="The HTTP status phrase, e.g. 'Not Found'")
    status: int = Field(ge=400, le=599, description="The HTTP status code")
    detail: str = Field(description="What went wrong and what to do about it, for a person to read")
    errors: list[InputError] | None = Field(None, description="Validation errors (422): one per input")
    details: Any = Field(None, description="Extension: structured data for some errors, e.g. the allowed "
                                           "values or an import's problems")


def problem_response(status: int, detail: str, *, errors: list[dict] | None = None, details: Any = None,
                     headers: dict[str, str] | None = None) -> JSONResponse:
    body: dict[str, Any] = {"type": "about:blank", "title": _title(status), "status": status, "detail": detail}
    if errors is not None:
        body["errors"] = errors
    if details is not None:
        body["details"] = details
    return JSONResponse(body, status_code=status, headers=headers, media_type=PROBLEM_MEDIA_TYPE)


def _title(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Error"


def _location(loc: tuple | list) -> str:
    return ".".join(str(part) for part in loc if part != "body") or "body"


def _input_errors(exc: RequestValidationError) -> list[dict]:
    # Only loc, msg and type: `input` and `ctx` can hold the (large) input or non-JSON objects.
    return [{"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]} for e in exc.errors()]


def _allowed_methods(request: Request, exc: HTTPException) -> str:
    """Every documented method at this path: Starlette's own Allow names only the first route's."""
    path = request.url.path
    methods = {method.upper() for template, operations in request.app.openapi()["paths"].items()
               if re.fullmatch(re.sub(r"\\\{[^/]+?\\\}", "[^/]+", re.escape(template)), path)
               for method in operations}
    return ", ".join(sorted(methods)) or (exc.headers or {}).get("Allow", "")


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(AppError)
    async def _app_error(_request: Request, exc: AppError) -> JSONResponse:
        return problem_response(exc.status_code, exc.message, details=exc.details)

    @app.exception_handler(RequestValidationError)
    async def _validation_error(_request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        bad_json = next((e for e in errors if e["type"] == "json_invalid"), None)
        if bad_json is not None:
            reason = (bad_json.get("ctx") or {}).get("error", "JSON decode error")
            return problem_response(400, f"The request body is not valid JSON ({reason} at character "
                                         f"{bad_json['loc'][-1]}); send a JSON object.")
        detail = "; ".join(f"{_location(e['loc'])}: {e['msg']}" for e in errors)
        return problem_response(422, detail, errors=_input_errors(exc))

    @app.exception_handler(HTTPException)
    async def _http_error(request: Request, exc: HTTPException) -> JSONResponse:
        if exc.status_code == 404 and exc.detail == "Not Found":
            detail = f"There is no {request.url.path}; the API is described at /docs."
        elif exc.status_code == 405:
            allowed = _allowed_methods(request, exc)
            detail = f"{request.method} is not allowed on {request.url.path}; use {allowed}."
            return problem_response(405, detail, headers={"Allow": allowed})
        else:
            detail = str(exc.detail)
        return problem_response(exc.status_code, detail, headers=exc.headers)

    @app.exception_handler(Exception)
    async def _server_error(request: Request, exc: Exception) -> JSONResponse:
        log.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
        return problem_response(500, "The server failed on this request; the error is in its log. Retry, and "
                                     "report it if it persists.")


# The error codes every operation can return, and the conditions for the others.
_ALWAYS = {500: "Server error (logged)"}
_PROTECTED = {401: "Not signed in, or an unknown, expired or revoked token or session",
              403: "The caller's role does not allow it, the row is another user's, or the CSRF header is missing",
              429: "Too many bad credentials from this address"}
_WITH_INPUT = {422: "A parameter or the body is invalid (see `errors`)"}
_WITH_BODY = {400: "The body is not valid JSON or not a readable upload", 413: "The body is too large"}
_WITH_PATH = {404: "No such resource"}


def error_responses(operation: dict[str, Any], *, protected: bool) -> dict[int, str]:
    """The 4xx/5xx an operation can return by its shape; codes of its own come from its `responses=`."""
    codes = dict(_ALWAYS)
    parameters = operation.get("parameters", [])
    if protected:
        codes |= _PROTECTED
    if parameters or "requestBody" in operation:
        codes |= _WITH_INPUT
    if "requestBody" in operation:
        codes |= _WITH_BODY
    if any(p["in"] == "path" for p in parameters):
        codes |= _WITH_PATH
    return codes


def problem_openapi(app: FastAPI, rule_of) -> dict[str, Any]:
    """The OpenAPI document with the problem model on every error response of every operation.

    Each operation also states the role it needs (``x-required-role``). Done here, once, so a new router cannot
    forget it; FastAPI's default 422 (HTTPValidationError) is
    replaced by the problem model, which is what a 422 really carries.
    """
    if app.openapi_schema:
        return app.openapi_schema
    schema = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    for name in ("HTTPValidationError", "ValidationError"):
        components.pop(name, None)
    problem_schema = Problem.model_json_schema(ref_template="#/components/schemas/{model}")
    components.update(problem_schema.pop("$defs"))
    components["Problem"] = problem_schema
    problem = {PROBLEM_MEDIA_TYPE: {"schema": {"$ref": "#/components/schemas/Problem"}}}
    for path, methods in schema.get("paths", {}).items():
        for method, operation in methods.items():
            rule = rule_of(method.upper(), path)
            operation["x-required-role"] = rule.role  # backend.auth.access
            responses = operation.setdefault("responses", {})
            for code, description in error_responses(operation, protected=rule.role != "public").items():
                responses.setdefault(str(code), {"description": description})
            for code, response in responses.items():
                if code.isdigit() and int(code) >= 400:
                    if response.get("description") == "Validation Error":
                        response["description"] = _WITH_INPUT[422]
                    response["content"] = problem
    app.openapi_schema = schema
    return schema
