"""docker-compose.yml and the Dockerfiles cannot be run here (no Docker engine), so check what can
be: the YAML's wiring, and that every command they run parses with our CLI."""

import re
from pathlib import Path

import pytest
import typer
import yaml

from backend.cli import app

ROOT = Path(__file__).resolve().parent.parent
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def _parses(argv: list[str]) -> None:
    assert argv[0] == "budgetlab"
    group = typer.main.get_command(app)
    sub = group.get_command(group.make_context("budgetlab", [argv[1]]), argv[1])
    assert sub is not None, f"unknown command {argv[1]!r}"
    sub.make_context(argv[1], list(argv[2:]))


def _dockerfile_cmd(path: str) -> list[str]:
    line = next(line_ for line_ in (ROOT / path).read_text().splitlines() if line_.startswith("CMD"))
    return yaml.safe_load(line[len("CMD"):])


def test_services_are_wired():
    services = COMPOSE["services"]
    assert {"postgres", "redis", "api", "worker-cpu", "worker-gpu"} <= set(services)
    for name in ("api", "worker-cpu", "worker-gpu"):
        env = services[name]["environment"]
        assert env["DATABASE_URL"].startswith("postgresql://") and "@postgres:" in env["DATABASE_URL"]
        assert env["CELERY_BROKER_URL"].startswith("redis://:") and "@redis:6379" in env["CELERY_BROKER_URL"]
        assert (ROOT / services[name]["build"]["dockerfile"]).exists()
    assert services["worker-gpu"]["command"][-3:] == ["gpu", "--concurrency", "1"]
    assert services["worker-cpu"]["command"][3] == "cpu"


def test_a_restart_loses_no_queued_task():
    """Every service comes back by itself, and Redis keeps its queues in an append-only file on a volume."""
    services = COMPOSE["services"]
    assert {name: service.get("restart") for name, service in services.items()} == {
        name: "unless-stopped" for name in services}
    redis = services["redis"]
    command = redis["command"]
    assert command[0] == "redis-server" and command[command.index("--appendonly") + 1] == "yes"
    volume, path = redis["volumes"][0].split(":")
    assert path == "/data" and volume in COMPOSE["volumes"]  # the official image writes its files under /data


def test_every_command_parses():
    services = COMPOSE["services"]
    for name in ("worker-cpu", "worker-gpu"):
        _parses(services[name]["command"])
    for dockerfile in ("docker/api.Dockerfile", "docker/worker.Dockerfile"):
        _parses(_dockerfile_cmd(dockerfile))


def test_a_bad_command_is_caught():
    with pytest.raises(Exception, match="no-such-option"):
        _parses(["budgetlab", "worker", "--no-such-option"])
    with pytest.raises(AssertionError, match="unknown command"):
        _parses(["budgetlab", "wrker"])


def test_only_the_api_is_published_on_loopback_and_every_secret_comes_from_env_without_a_default():
    services = COMPOSE["services"]
    published = {name: service["ports"] for name, service in services.items() if service.get("ports")}
    assert list(published) == ["api"] and published["api"] == ["${BUDGETLAB_BIND:-127.0.0.1}:8000:8000"]
    text = (ROOT / "docker-compose.yml").read_text()
    secrets = {"POSTGRES_PASSWORD", "REDIS_PASSWORD", "BUDGETLAB_ADMIN_TOKEN", "BUDGETLAB_ADMIN_PASSWORD"}
    for secret in secrets:
        uses = re.findall(r"\$\{" + secret + r"([^}]*)\}", text)
        assert uses and all(use.startswith(":?") for use in uses), (secret, uses)  # refused when unset
    assert "budgetlab:budgetlab@" not in text and "POSTGRES_PASSWORD: budgetlab" not in text
    env = services["api"]["environment"]
    assert "${REDIS_PASSWORD" in env["CELERY_BROKER_URL"] and "${POSTGRES_PASSWORD" in env["DATABASE_URL"]
    assert "--requirepass" in services["redis"]["command"]
    example = dict(line.split("=", 1) for line in (ROOT / ".env.example").read_text().splitlines()
                   if line and not line.startswith("#"))
    assert set(example) == secrets and all(value == "" for value in example.values())
    assert ".env" in (ROOT / ".gitignore").read_text().splitlines()
