"""Helpers for the pools tests: upload a file through the API and count what is stored."""

import pytest
from sqlalchemy import text


def upload(client, filename: str, content: bytes, **fields):
    """POST /api/pools with `content` as the file and `fields` as form fields (None values left out)."""
    data = {key: str(value) for key, value in fields.items() if value is not None}
    return client.post("/api/pools", files={"file": (filename, content)}, data=data)


@pytest.fixture
def stored(service_env):
    """Counts of committed pools and prompts, read on a fresh connection."""
    from backend.database import get_engine

    def counts() -> tuple[int, int]:
        with get_engine().connect() as connection:
            pools = connection.execute(text("SELECT count(*) FROM pool")).scalar_one()
            prompts = connection.execute(text("SELECT count(*) FROM prompt")).scalar_one()
        return pools, prompts

    return counts
