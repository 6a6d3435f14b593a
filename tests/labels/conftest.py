"""A real Label Studio server, started once per test session (its venv is created on first use)."""

from collections.abc import Iterator

import pytest

from tests.labels.label_studio_server import LABEL_STUDIO_VERSION, VENV, LabelStudioServer, start_server, venv_ready


@pytest.fixture(scope="session")
def label_studio(pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabelStudioServer]:
    capture = pytestconfig.pluginmanager.getplugin("capturemanager")
    if not venv_ready():
        with capture.global_and_fixture_disabled():
            print(f"\ncreating {VENV} with label-studio=={LABEL_STUDIO_VERSION}; the first run takes a few minutes")
    server = start_server(tmp_path_factory.mktemp("label-studio"))
    try:
        yield server
    finally:
        server.stop()
