"""Request parameters, checked once for every operation.

Bounded ids: an id the API accepts is one its table's column can hold.

Ids are positive. Their upper bound is the width of the id column on Postgres, the stricter of the
two databases: 32-bit for `INTEGER`/`SERIAL` ids, 64-bit for `BIGINT` ones (prompts). A larger id
is refused by validation (422) instead of reaching the driver (`integer out of range`, a 500), and
the bound follows the table: widening a column in a migration widens the API with it.
"""

import contextlib
from typing import Annotated, Any

from fastapi import Path, Query, Request
from fastapi.dependencies.models import Dependant
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from pydantic import Field
from sqlalchemy import BigInteger

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1


def max_id(table: Any) -> int:
    """The largest value `table.id` holds on every supported database."""
    return INT64_MAX if isinstance(table.__table__.c.id.type, BigInteger) else INT32_MAX


def _text(what: str, table: Any) -> str:
    return f"{what} id (1 to {max_id(table)})"


# These build Annotated types, used like types: `pool_id: PathId(Pool, "pool")`.
def PathId(table: Any, what: str) -> Any:
    return Annotated[int, Path(ge=1, le=max_id(table), description=_text(what, table))]


def QueryId(table: Any, what: str, description: str = "") -> Any:
    return Annotated[int | None, Query(ge=1, le=max_id(table),
                                       description=f"{description or _text(what, table)}")]


def BodyId(table: Any, what: str, description: str = "") -> Any:
    return Annotated[int, Field(ge=1, le=max_id(table), description=description or _text(what, table))]



MAX_PAGE_SIZE = 500
# Every list answers a bounded page, newest first: a client cannot ask for the whole table at once.
Limit = Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE, description=f"At most this many (1 to {MAX_PAGE_SIZE})")]
Offset = Annotated[int, Query(ge=0, le=INT32_MAX, description="Skip this many first (for the next page)")]


def reject_unknown_query(request: Request) -> None:
    """Refuse query parameters the operation does not take: a misspelt filter (`?probeid=3`) would
    otherwise be ignored and answer as if no filter had been asked for."""
    route = request.scope.get("route")
    if not isinstance(route, APIRoute):
        return
    known = _query_names(route.dependant)
    unknown = sorted(set(request.query_params) - known)
    if unknown:
        raise RequestValidationError([{"type": "extra_forbidden", "loc": ("query", name), "input": None,
                                       "msg": f"Unknown query parameter; this operation takes: "
                                              f"{', '.join(sorted(known)) or 'none'}"} for name in unknown])


def _query_names(dependant: Dependant) -> set[str]:
    names = {param.alias for param in dependant.query_params}
    for sub in dependant.dependencies:
        names |= _query_names(sub)
    return names


async def reject_nul_text(request: Request) -> None:
    """Refuse text holding NUL (U+0000) in the query or a JSON body: Postgres cannot store it, so it
    would fail deep in a query (a 500) instead of being named here as the input to fix (422)."""
    places = [("query", key) for key, value in request.query_params.multi_items() if "\x00" in key + value]
    if request.headers.get("content-type", "").split(";")[0].strip() == "application/json":
        with contextlib.suppress(ValueError):  # not JSON: FastAPI answers that itself
            places += [("body", *loc) for loc in _nul_locations(await request.json())]
    if places:
        raise RequestValidationError([{"type": "string_nul", "loc": loc, "input": None,
                                       "msg": "Text cannot contain the NUL character (\\u0000); remove it"}
                                      for loc in places])


def _nul_locations(value: Any, loc: tuple = ()) -> list[tuple]:
    if isinstance(value, str):
        return [loc] if "\x00" in value else []
    if isinstance(value, dict):
        return [found for key, item in value.items()
                for found in ([(*loc, key)] if "\x00" in key else []) + _nul_locations(item, (*loc, key))]
    if isinstance(value, list):
        return [found for index, item in enumerate(value) for found in _nul_locations(item, (*loc, index))]
    return []
