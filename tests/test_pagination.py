"""Every list endpoint answers a bounded page: no limit means no `limit=-1` on SQLite and no 500 on Postgres."""

from backend.params import MAX_PAGE_SIZE

NOT_FROM_THE_DATABASE = {"/api/models"}  # the configured model catalog, a handful of entries


def list_operations(client) -> list[str]:
    spec = client.get("/openapi.json").json()
    paths = []
    for path, methods in spec["paths"].items():
        ok = methods.get("get", {}).get("responses", {}).get("200", {})
        if ok.get("content", {}).get("application/json", {}).get("schema", {}).get("type") == "array":
            paths.append(path)
    return [p for p in paths if p not in NOT_FROM_THE_DATABASE]


def test_every_list_takes_a_bounded_limit_and_an_offset(any_client):
    lists = list_operations(any_client)
    assert len(lists) >= 10
    spec = any_client.get("/openapi.json").json()
    for path in lists:
        parameters = {p["name"]: p["schema"] for p in spec["paths"][path]["get"].get("parameters", [])}
        assert parameters["limit"]["maximum"] <= MAX_PAGE_SIZE and parameters["limit"]["minimum"] == 1, path
        if path != "/api/audit":  # the audit log pages by before_id: rows keep arriving while one reads it
            assert "offset" in parameters, path
        url = path.replace("{job_id}", "1")
        for bad in ("-1", "0", str(MAX_PAGE_SIZE + 1), "all"):
            assert any_client.get(url, params={"limit": bad}).status_code == 422, (path, bad)


def test_pages_follow_each_other(any_client):
    made = [any_client.post("/api/pools/demo", json={}).json()["id"] for _ in range(3)]
    first = any_client.get("/api/pools", params={"limit": 2}).json()
    second = any_client.get("/api/pools", params={"limit": 2, "offset": 2}).json()
    assert [p["id"] for p in first] == sorted(made, reverse=True)[:2]
    assert second[0]["id"] <= min(made)
    assert {p["id"] for p in first}.isdisjoint(p["id"] for p in second)
