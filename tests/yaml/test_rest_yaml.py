"""OpenSearch's own REST YAML tests (from the org.opensearch:rest-api-spec jar) run against the server.

Which tests run is set by tests/yaml/allowlist.txt. Against Shoal a dedicated node is started (the tests expect
an empty cluster); with SHOAL_TEST_URL the external server is used and only the indices a test creates are
removed afterwards.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from conftest import EXTERNAL_URL, ShoalNode, NodeStartError
from yaml_runner import (Allowlist, Context, Runner, SkipTest, YamlTestFailure, ensure_jar, load_spec,
                         parse_suite, SPEC_ARTIFACT)

HERE = Path(__file__).parent
ALLOWLIST = Path(os.environ.get("SHOAL_YAML_ALLOWLIST", HERE / "allowlist.txt"))
# Tests Shoal is known to fail today, one `file::name  # reason` per line (regenerate with
# tests/yaml/known_failures.py). They run as xfail, so a test that starts passing shows as XPASS.
KNOWN_FAILURES = HERE / "shoal_known_failures.txt"


def _known_failures() -> dict[str, str]:
    if EXTERNAL_URL or not KNOWN_FAILURES.exists():
        return {}
    known = {}
    for line in KNOWN_FAILURES.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        case_id, _, reason = line.partition("  # ")
        known[case_id.strip()] = reason.strip()
    return known

pytestmark = pytest.mark.yaml


def _collect():
    jar = ensure_jar()
    if jar is None:
        return None, [pytest.param(None, id="rest-api-spec-jar-missing",
                                   marks=pytest.mark.skip(reason=f"{SPEC_ARTIFACT} not found (run scripts/test, "
                                                                 f"or mvn dependency:get -Dartifact={SPEC_ARTIFACT})"))]
    spec = load_spec(jar)
    allow = Allowlist.parse(ALLOWLIST.read_text())
    known = _known_failures()
    params = []
    for file in sorted(spec.tests):
        if not any(Allowlist._matches(p, file, "") or p.split("::")[0] == file for p in allow.include):
            continue
        try:
            cases = parse_suite(file, spec.tests[file])
        except Exception as e:  # noqa: BLE001
            params.append(pytest.param(None, id=file, marks=pytest.mark.skip(reason=f"unparseable: {e}")))
            continue
        for case in cases:
            if not allow.selects(case.file, case.name):
                continue
            marks = []
            reason = allow.excluded(case.file, case.name)
            if reason:
                marks.append(pytest.mark.skip(reason=f"allowlist: {reason}"))
            elif case.id in known:
                marks.append(pytest.mark.xfail(reason=f"known Shoal gap: {known[case.id]}", strict=False))
            params.append(pytest.param(case, id=case.id, marks=marks))
    return spec, params


SPEC, PARAMS = _collect()


@pytest.fixture(scope="module")
def yaml_url(tmp_path_factory):
    if EXTERNAL_URL:
        yield EXTERNAL_URL
        return
    home = tmp_path_factory.mktemp("shoal-yaml-node")
    # OpenSearch's test clusters set `path.repo`; the snapshot tests name `fs` locations under it.
    n = ShoalNode(home, name="yaml-node", settings={"path.repo": str(home / "repo")})
    try:
        n.start()
    except NodeStartError as e:
        pytest.fail(f"could not start shoal for the YAML tests: {e}")
    yield n.url
    n.stop()


def _indices(ctx):
    r = ctx.session.get(ctx.base + "/_cat/indices", params={"format": "json", "h": "index",
                                                           "expand_wildcards": "all"}, timeout=60)
    return {row["index"] for row in r.json()} if r.status_code == 200 else set()


def _repositories(ctx):
    r = ctx.session.get(ctx.base + "/_snapshot", timeout=60)
    return set(r.json()) if r.status_code == 200 else set()


def _remove_repositories(ctx, names):
    """As OpenSearch's test framework wipes the cluster: a test's snapshots, then its repositories."""
    for name in sorted(names):
        ctx.session.delete(f"{ctx.base}/_snapshot/{name}/*", timeout=120)
        ctx.session.delete(f"{ctx.base}/_snapshot/{name}", timeout=60)


def _cluster_settings(ctx):
    r = ctx.session.get(ctx.base + "/_cluster/settings", params={"flat_settings": "true"}, timeout=60)
    return r.json() if r.status_code == 200 else {"persistent": {}, "transient": {}}


@pytest.mark.parametrize("case", PARAMS)
def test_rest_yaml(case, yaml_url):
    import requests
    version = requests.get(yaml_url + "/", timeout=30).json()["version"]["number"]
    ctx = Context(yaml_url, SPEC, version)
    before = _indices(ctx)
    repositories_before = _repositories(ctx)
    settings_before = _cluster_settings(ctx)
    try:
        Runner(ctx).run(case)
    except SkipTest as e:
        pytest.skip(str(e))
    except YamlTestFailure as e:
        pytest.fail(f"{case.id}: {e}", pytrace=False)
    finally:
        created = _indices(ctx) - before
        if created:
            ctx.session.delete(ctx.base + "/" + ",".join(sorted(created)),
                               params={"expand_wildcards": "all", "ignore_unavailable": "true"}, timeout=60)
        after = _cluster_settings(ctx)
        reset = {scope: {k: None for k in after.get(scope, {}) if k not in settings_before.get(scope, {})}
                 for scope in ("persistent", "transient")}
        if reset["persistent"] or reset["transient"]:
            ctx.session.put(ctx.base + "/_cluster/settings", json=reset, timeout=60)
        ctx.session.delete(ctx.base + "/_search/scroll/_all", timeout=60)
        _remove_repositories(ctx, _repositories(ctx) - repositories_before)
