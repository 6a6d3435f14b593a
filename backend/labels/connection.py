"""The Label Studio server this Budgetlab talks to: saved once, checked when saved, its key never shown."""

import ipaddress
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
    try:
        parsed = urlsplit(url)
        host, _port = parsed.hostname, parsed.port
    except ValueError:
        host = None
    if not url.startswith(("http://", "https://")) or not host:
        raise AppError(422, f"The Label Studio URL must start with http:// or https:// and name a host "
                            f"(got '{url[:100]}'), e.g. http://localhost:8080.")
    allowed = [name.strip().lower() for name in get_settings().label_studio_hosts.split(",") if name.strip()]
    if allowed and host.lower() not in allowed:
        raise AppError(422, f"This Budgetlab may only talk to Label Studio on {', '.join(allowed)} "
                            f"(BUDGETLAB_LABEL_STUDIO_HOSTS), not on '{host}'; ask its administrator.")
    if not allowed and _link_local(host):
        raise AppError(422, f"'{host}' is a link-local address (cloud metadata services live there), not a Label "
                            "Studio server; to allow it anyway, list it in BUDGETLAB_LABEL_STUDIO_HOSTS.")
    return url


def _link_local(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_link_local
    except ValueError:
        return host.lower() in ("metadata", "metadata.google.internal")


def save_connection(session: Session, url: str, api_key: str, token_name: str | None) -> LabelStudioConnection:
    """Check that the server answers and accepts the key, then keep both (one connection at a time)."""
    url = _check_url(url)
    if not api_key.strip() or not api_key.strip().isascii() or not api_key.strip().isprintable():
        raise AppError(422, "The API key is empty or holds characters no Label Studio token has; copy it again "
                            "from Label Studio's Account & Settings page.")
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
