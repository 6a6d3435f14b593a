"""The Label Studio server this Budgetlab talks to: saved once, checked when saved, its key never shown."""

from urllib.parse import urlsplit

from sqlmodel import Session, select

from backend.errors import AppError
from backend.labels.label_studio import LabelStudioClient, LabelStudioError
from backend.labels.tables import LabelStudioConnection
from backend.settings import get_settings
from backend.timeutil import utcnow


def get_connection(session: Session) -> LabelStudioConnection | None:
    return session.exec(select(LabelStudioConnection).order_by(LabelStudioConnection.id.desc())).first()


def connection_read(connection: LabelStudioConnection | None) -> dict:
    """What the API shows: never the key."""
    if connection is None:
        return {"configured": False, "url": None, "updated_at": None, "updated_by": None}
    return {"configured": True, "url": connection.url, "updated_at": connection.updated_at,
            "updated_by": connection.updated_by}


def _check_url(url: str) -> str:
    url = url.strip().rstrip("/")
    parsed = urlsplit(url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise AppError(422, f"The Label Studio URL must start with http:// or https:// and name a host "
                            f"(got '{url[:100]}'), e.g. http://localhost:8080.")
    allowed = [host.strip().lower() for host in get_settings().label_studio_hosts.split(",") if host.strip()]
    if allowed and parsed.hostname.lower() not in allowed:
        raise AppError(422, f"This Budgetlab may only talk to Label Studio on {', '.join(allowed)} "
                            f"(BUDGETLAB_LABEL_STUDIO_HOSTS), not on '{parsed.hostname}'; ask its administrator.")
    return url


def save_connection(session: Session, url: str, api_key: str, token_name: str | None) -> LabelStudioConnection:
    """Check that the server answers and accepts the key, then keep both (one connection at a time)."""
    url = _check_url(url)
    if not api_key.strip():
        raise AppError(422, "The API key is empty; copy it from Label Studio's Account & Settings page.")
    try:
        LabelStudioClient(url, api_key.strip()).check()
    except LabelStudioError as exc:
        raise AppError(422, f"{exc} Nothing was saved.") from exc
    connection = get_connection(session) or LabelStudioConnection(url=url, api_key="")
    connection.url, connection.api_key = url, api_key.strip()
    connection.updated_at, connection.updated_by = utcnow(), token_name
    session.add(connection)
    session.flush()
    return connection


def delete_connection(session: Session) -> None:
    for connection in session.exec(select(LabelStudioConnection)):
        session.delete(connection)
    session.flush()


def client_for(session: Session) -> LabelStudioClient:
    connection = get_connection(session)
    if connection is None:
        raise AppError(409, "No Label Studio server is configured; save its URL and API key first "
                            "(PUT /api/label-studio, or the Label Studio settings on the subset page).")
    return LabelStudioClient(_check_url(connection.url), connection.api_key)
