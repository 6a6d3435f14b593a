"""The API keeps the contract its /openapi.json states, checked by schemathesis against a live server.

A real uvicorn process on Postgres, with a real Celery worker, an admin token and a little data (the
demo pool, a finished probe and a subset, so generated ids find rows and success paths run). Every
operation gets schema-valid and schema-violating requests; every response must be documented (status
code, content type, body schema), no request may end in a server error, invalid input must be refused
and valid input not refused as invalid. Generation is derandomized: the same requests on every run.

Nothing is excluded. The multipart upload is generated from its documented form schema, and also sent
once with a real file (it must be accepted); the downloads (zip, CSV, JSONL, Parquet) document their
media types and are checked like the rest. Where validity depends on what JSON Schema cannot state,
SEMANTIC_REFUSALS names the operation and the reason.
"""

import os
import socket
import subprocess
import sys
import time
import uuid
from collections import Counter

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import FailureGroup
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    positive_data_acceptance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.conftest import (
    ADMIN_PASSWORD,
    ADMIN_TOKEN,
    ROOT,
    clear_caches,
    create_pg_database,
    drop_pg_database,
    start_worker,
    stop_worker,
    upgrade_head,
)
from tests.subsets.conftest import make_probed_pool

CASES_PER_OPERATION = 25  # x 2 modes x 31 operations: > 1,000 requests
MIN_CASES = 1000
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance,
          response_headers_conformance, negative_data_rejection, positive_data_acceptance]
_BUDGET = "a fraction budget is at most 1 and a money budget needs cost_per_prompt; band_low <= band_high"
_TRAINING = "training settings are checked together (TrainingSettings, TRL's batch rules, the model must exist)"
# Operations whose schema-valid requests may still be refused (400/415/422) because validity depends on
# what JSON Schema cannot state. For them positive_data_acceptance is replaced by that narrower rule;
# every other check applies as for the rest.
SEMANTIC_REFUSALS = {
    "POST /api/pools": "the file must hold a readable pool; the schema can only say 'binary'",
    "POST /api/probes": "the model must be listed by GET /api/models or be a checkpoint directory, a template must "
                        "contain {prompt}, chat-template options must be identifiers with plain values",
    "POST /api/selections/preview": _BUDGET,
    "POST /api/subsets": _BUDGET,
    "POST /api/experiments": f"{_BUDGET}; {_TRAINING}",
    "POST /api/experiments/demo": "the probe must be of the demo pool (the demo experiment's settings are made for it)",
    "POST /api/runs": _TRAINING,
    "POST /api/selections/labeling-export": _BUDGET,
    "POST /api/pools/{pool_id}/labels": "the file must hold labels (Label Studio, Argilla, CSV or JSONL with id and "
                                        "answer) for the pool's prompts; the schema can only say 'binary'",
    "PUT /api/label-studio": "a Label Studio server must answer at the URL and accept the key",
    "POST /api/users": "a user's name must be free and not blank",
    "PATCH /api/users/{user_id}": "the last active admin stays an active admin",
    "POST /api/tokens": "an expiry must lie in the future",
}
SEMANTIC_STATUSES = {400, 415, 422}
# Generated Label Studio URLs must never send the server anywhere but this machine.
LOOPBACK_ONLY = {"BUDGETLAB_LABEL_STUDIO_HOSTS": "127.0.0.1,localhost"}
VALID_UPLOAD = {"file": b'{"question": "What is 2 + 3?", "answer": "5"}\n', "format": "jsonl", "name": "contract"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def contract_env(service_env):
    """A database and broker prefix of its own: the fuzzer creates users, changes passwords and revokes tokens,
    which must not reach the other tests' admin."""
    from backend.auth.service import ensure_first_admin
    from backend.database import session_scope

    name, url = create_pg_database()
    env = {**service_env, "DATABASE_URL": url, "BUDGETLAB_BROKER_PREFIX": f"contract-{uuid.uuid4().hex[:8]}:"}
    with pytest.MonkeyPatch.context() as patch:
        for key, value in env.items():
            patch.setenv(key, value)
        clear_caches()
        upgrade_head(url)
        with session_scope() as session:
            ensure_first_admin(session, ADMIN_TOKEN, ADMIN_PASSWORD)
        yield env
    clear_caches()
    drop_pg_database(name)


@pytest.fixture(scope="module")
def live_api(contract_env, tmp_path_factory):
    """A uvicorn process serving the app on a free port, and a worker consuming its queues."""
    service_env = contract_env
    logs = tmp_path_factory.mktemp("contract")
    worker = start_worker(service_env, logs / "worker.log")
    port = _free_port()
    log = open(logs / "api.log", "w")
    api = subprocess.Popen([sys.executable, "-m", "uvicorn", "backend.app:create_app", "--factory", "--host",
                            "127.0.0.1", "--port", str(port)], cwd=ROOT,
                           env={**os.environ, **service_env, **LOOPBACK_ONLY}, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{base}/api/health").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert api.poll() is None and time.monotonic() < deadline, (logs / "api.log").read_text()
            time.sleep(0.2)
        yield base
        # Probes and runs the fuzzer started would keep the worker busy: cancel them before it stops.
        auth = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        for job in httpx.get(f"{base}/api/jobs?limit=500", headers=auth).json():
            if job["status"] in ("queued", "running"):
                httpx.post(f"{base}/api/jobs/{job['id']}/cancel", headers=auth)
    finally:
        api.terminate()
        api.wait(timeout=30)
        stop_worker(worker)
        log.close()
        print((logs / "api.log").read_text()[-5000:])


def test_every_operation_keeps_the_documented_contract(live_api):
    auth = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    # Rows for generated ids to find (small ids come up often): a pool, a finished probe, a subset.
    httpx.post(f"{live_api}/api/pools/demo", headers=auth, json={}).raise_for_status()
    probed = make_probed_pool(40)
    httpx.post(f"{live_api}/api/subsets", headers=auth, json={
        "probe_id": probed.probe_id, "strategy": "hard", "budget": {"kind": "count", "value": 10}}).raise_for_status()
    schema = schemathesis.openapi.from_url(f"{live_api}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 30

    cases: Counter[str] = Counter()
    statuses: Counter[tuple[str, int]] = Counter()
    failures: dict[tuple[str, str, str], list[str]] = {}  # (operation, mode, check) -> reproductions

    def fuzz(operation, mode):
        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(max_examples=CASES_PER_OPERATION, derandomize=True, deadline=None, database=None,
                  phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
        def run(case):
            cases[operation.label] += 1
            response = case.call(base_url=live_api, headers=auth, timeout=60)
            statuses[operation.label, response.status_code] += 1
            checks = CHECKS
            if operation.label in SEMANTIC_REFUSALS and mode == schemathesis.GenerationMode.POSITIVE:
                checks = [check for check in CHECKS if check is not positive_data_acceptance]
                if response.status_code not in SEMANTIC_STATUSES:
                    checks = CHECKS
            try:
                case.validate_response(response, checks=checks, headers=auth)
            except FailureGroup as group:  # collect every failure, then report them all
                for failure in group.exceptions:
                    key = (operation.label, mode.value, f"{failure.code} {failure.title}")
                    failures.setdefault(key, []).append(f"[{response.status_code}] {response.text[:300]}\n"
                                                        f"{case.as_curl_command(auth)[:600]}")

        run()

    # Success paths that random data rarely reaches (a valid upload, a selection, a probe, an experiment
    # and its reads), through the same checks, first: their rows are then there for the fuzzing too.
    by_label = {op.label: op for op in operations}

    def succeeds(label: str, status: int, **parts) -> dict:
        media = "multipart/form-data" if label == "POST /api/pools" else "application/json"
        case = by_label[label].Case(media_type=media if "body" in parts else None, **parts)
        response = case.call(base_url=live_api, headers=auth, timeout=60)
        case.validate_response(response, checks=CHECKS, headers=auth)
        assert response.status_code == status, (label, response.text)
        return response.json()

    selection = {"probe_id": probed.probe_id, "strategy": "hard", "budget": {"kind": "count", "value": 5}}
    succeeds("POST /api/pools", 201, body=VALID_UPLOAD)
    succeeds("POST /api/selections/preview", 200, body=selection)
    succeeds("POST /api/subsets", 201, body={**selection, "name": "contract"})
    succeeds("GET /api/probes/{probe_id}/prompts/{prompt_id}/samples", 200,
             path_parameters={"probe_id": probed.probe_id, "prompt_id": probed.prompt_ids[0]})
    succeeds("POST /api/probes", 202, body={"pool_id": probed.pool_id, "model": "tiny-random-SmolLM2", "k": 1,
                                            "max_new_tokens": 4})
    experiment = succeeds("POST /api/experiments", 201, body={
        "probe_id": probed.probe_id, "budget": {"kind": "count", "value": 4}, "strategies": ["hard", "random"],
        "preset": "quick_cpu", "settings": {"max_steps": 1}})
    ident = {"experiment_id": experiment["id"]}
    for label in ("GET /api/experiments/{experiment_id}", "GET /api/experiments/{experiment_id}/compare",
                  "POST /api/experiments/{experiment_id}/cancel"):
        succeeds(label, 200, path_parameters=ident)

    document = httpx.get(f"{live_api}/openapi.json").json()
    for operation in operations:
        spec = document["paths"][operation.path][operation.method.lower()]
        fuzz(operation, schemathesis.GenerationMode.POSITIVE)
        # An operation without parameters or body has no input to get wrong: its only negative case
        # (no token) is covered by tests/test_auth_middleware.py.
        if spec.get("parameters") or "requestBody" in spec:
            fuzz(operation, schemathesis.GenerationMode.NEGATIVE)

    total = sum(cases.values())
    print(f"{total} cases over {len(cases)} operations")
    for label in sorted(cases):
        print(f"  {label}: " + ", ".join(f"{code} x{n}" for (op, code), n in sorted(statuses.items()) if op == label))
    assert total >= MIN_CASES
    assert set(cases) == {op.label for op in operations}, "an operation got no generated case"
    report = [f"{op} ({mode}) {check}: {len(seen)} case(s), e.g.\n{seen[0]}"
              for (op, mode, check), seen in sorted(failures.items())]
    assert not failures, f"{len(failures)} kinds of contract failure:\n\n" + "\n\n".join(report)
