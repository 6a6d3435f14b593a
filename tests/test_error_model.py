"""One error model: every 4xx/5xx is an RFC 9457 problem, and out-of-range ids are refused, not crashed on."""

import pytest

from backend.params import INT32_MAX, INT64_MAX
from tests.runs.conftest import make_subset

PROBLEM = "application/problem+json"


def assert_problem(response, status: int) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM
    body = response.json()
    assert body["status"] == status and body["type"] == "about:blank" and body["title"]
    assert isinstance(body["detail"], str) and body["detail"]
    return body


@pytest.mark.parametrize("path", [
    f"/api/runs/{INT32_MAX + 1}/figures", f"/api/subsets/{INT64_MAX}/export",
    "/api/experiments/109531803410769215488/cancel", f"/api/pools/1/prompts?probe_id={-(2**200)}",
    f"/api/jobs/{2**40}", f"/api/probes/1/prompts/{INT64_MAX + 1}/samples",
])
def test_ids_beyond_their_column_are_422_not_500(client, path):
    method = client.post if path.endswith("/cancel") else client.get
    body = assert_problem(method(path), 422)
    assert body["errors"] and all({"loc", "msg", "type"} <= set(e) for e in body["errors"])


def test_a_page_offset_beyond_64_bits_is_422_and_past_the_end_is_empty(client):
    pool = client.post("/api/pools", files={"file": ("o.jsonl", b'{"prompt": "1+1?"}\n')}).json()
    assert_problem(client.get(f"/api/pools/{pool['id']}/prompts", params={"offset": 10**20}), 422)
    page = client.get(f"/api/pools/{pool['id']}/prompts", params={"offset": INT64_MAX})
    assert page.status_code == 200 and page.json()["items"] == [], page.text
    client.delete(f"/api/pools/{pool['id']}")


def test_body_ids_and_seeds_beyond_their_column_are_422(client):
    subset_id = make_subset()
    for path, body in (("/api/probes", {"pool_id": INT32_MAX + 1}), ("/api/runs", {"subset_id": 2**40}),
                       ("/api/subsets", {"probe_id": 1, "strategy": "hard", "budget": {"kind": "count", "value": 1},
                                         "seed": 2**40}),
                       ("/api/runs", {"subset_id": subset_id, "settings": {"eval_pool_id": 2**40}}),
                       ("/api/runs", {"subset_id": subset_id, "settings": {"ood_pool_ids": [2**40]}})):
        problem = assert_problem(client.post(path, json=body), 422)
        assert "errors" in problem or "eval_pool_id" in problem["detail"] or "ood_pool_ids" in problem["detail"]


def test_validation_error_detail_is_a_sentence_with_locations(client):
    body = assert_problem(client.get("/api/probes/1/difficulty?bins=0"), 422)
    assert body["detail"].startswith("query.bins:")
    assert body["errors"] == [{"loc": ["query", "bins"], "msg": body["errors"][0]["msg"],
                               "type": "greater_than_equal"}]


def test_unknown_query_parameter_is_422_not_ignored(client):
    body = assert_problem(client.get("/api/subsets?probeid=3"), 422)
    assert body["errors"][0]["loc"] == ["query", "probeid"] and "probe_id" in body["detail"]


def test_nul_text_is_422_not_a_database_500(client):
    # Postgres text cannot hold U+0000: named as the input to fix, before any query runs.
    subset_id = make_subset()
    run = client.post("/api/runs", json={"subset_id": subset_id, "preset": "quick_cpu", "settings": {"max_steps": 1}})
    body = assert_problem(client.get(f"/api/runs/{run.json()['id']}/metrics?keys=a%00b"), 422)
    assert body["errors"][0]["loc"] == ["query", "keys"] and "NUL" in body["detail"]
    body = assert_problem(client.post("/api/subsets", json={
        "probe_id": 1, "strategy": "hard", "budget": {"kind": "count", "value": 1}, "name": "a\x00b"}), 422)
    assert body["errors"][0]["loc"] == ["body", "name"]
    client.post(f"/api/jobs/{run.json()['job']['id']}/cancel")


def test_unparsable_json_is_400(client):
    body = assert_problem(client.post("/api/subsets", content=b'{"probe_id": 1,', headers={
        "content-type": "application/json"}), 400)
    assert "not valid JSON" in body["detail"]


def test_unknown_route_and_wrong_method(client):
    assert "/api/nothing-here" in assert_problem(client.get("/api/nothing-here"), 404)["detail"]
    response = client.put("/api/pools")
    body = assert_problem(response, 405)
    assert "use GET, POST." in body["detail"] and response.headers["allow"] == "GET, POST"


def test_app_error_keeps_structured_details(client):
    pool = client.post("/api/pools/demo").json()
    body = assert_problem(client.post("/api/probes", json={"pool_id": pool["id"], "model": "gpt-17"}), 422)
    assert "tiny-random-SmolLM2" in body["details"]["available"]
    client.delete(f"/api/pools/{pool['id']}")


def test_unhandled_error_is_a_logged_500_problem_with_a_generic_message(app, caplog):
    from fastapi.testclient import TestClient

    from tests.conftest import ADMIN_TOKEN

    @app.get("/api/test-only-boom", include_in_schema=False)
    def boom():
        raise RuntimeError("secret internals")

    try:
        with TestClient(app, raise_server_exceptions=False) as client:
            response = client.get("/api/test-only-boom", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    finally:
        app.router.routes[:] = [r for r in app.router.routes if getattr(r, "path", "") != "/api/test-only-boom"]
    body = assert_problem(response, 500)
    assert "secret internals" not in body["detail"]
    assert "secret internals" in caplog.text


def test_openapi_documents_the_problem_model_on_every_operation(client):
    schema = client.get("/openapi.json").json()
    assert "HTTPValidationError" not in schema["components"]["schemas"]
    for path, methods in schema["paths"].items():
        for method, operation in methods.items():
            errors = {code: r for code, r in operation["responses"].items() if int(code) >= 400}
            assert "500" in errors, (method, path)
            if operation["x-required-role"] != "public":  # health, and asking or signing in
                assert {"401", "403", "429"} <= set(errors), (method, path)
            for response in errors.values():
                assert response["content"] == {PROBLEM: {"schema": {"$ref": "#/components/schemas/Problem"}}}
