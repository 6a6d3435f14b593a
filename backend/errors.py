"""The one application error: a status code and a message a user can act on."""

from typing import Any


class AppError(Exception):
    def __init__(self, status_code: int, message: str, *, details: Any = None):
        super().__init__(message)
        self.status_code = status_code
        self.message = message
        self.details = details


def not_found(what: str, ident: object) -> AppError:
    return AppError(404, f"{what} {ident} does not exist; list them with GET /api/{what.lower()}s.")
