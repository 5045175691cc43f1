"""GET / and HEAD /: what clients (opensearch-py, opensearch-benchmark) look at first."""
import pytest


def test_root_info_has_opensearch_fields(http, is_shoal, node):
    r = http.get("/")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("application/json")
    body = r.json()
    assert set(body) >= {"name", "cluster_name", "cluster_uuid", "version", "tagline"}
    v = body["version"]
    assert v["number"] == "2.18.0"
    assert set(v) >= {"distribution", "number", "build_type", "build_hash", "build_date", "build_snapshot",
                      "lucene_version", "minimum_wire_compatibility_version",
                      "minimum_index_compatibility_version"}
    assert v["build_snapshot"] is False
    assert isinstance(body["cluster_uuid"], str) and len(body["cluster_uuid"]) >= 20
    assert isinstance(body["tagline"], str) and body["tagline"]
    if node is not None:
        assert body["name"] == "test-node"
        assert body["cluster_name"] == "shoal-test"


def test_root_distribution_is_shoal(root_info, is_shoal):
    if is_shoal:
        assert root_info["version"]["distribution"] == "shoal"
    else:
        assert root_info["version"]["distribution"] == "opensearch"


def test_root_head_is_200_without_body(http):
    r = http.head("/")
    assert r.status_code == 200
    assert r.content == b""


def test_root_cluster_uuid_is_stable(http):
    assert http.get("/").json()["cluster_uuid"] == http.get("/").json()["cluster_uuid"]


def test_root_pretty_param_indents(http):
    r = http.get("/", params={"pretty": "true"})
    assert r.status_code == 200
    assert "\n  " in r.text
    assert r.json()["version"]["number"] == "2.18.0"


def test_client_info_and_ping(client):
    assert client.ping() is True
    assert client.info()["version"]["number"] == "2.18.0"


@pytest.mark.restart
def test_cluster_uuid_survives_restart(restartable):
    http = restartable.http()
    before = http.get("/").json()
    restartable.restart()
    after = http.get("/").json()
    assert after["cluster_uuid"] == before["cluster_uuid"]
    assert after["name"] == before["name"]

