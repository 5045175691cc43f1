"""A small runner for OpenSearch's REST YAML conformance tests.

The tests and the REST API spec (rest-api-spec/test/**.yml, rest-api-spec/api/*.json) are read at test time
from OpenSearch's `org.opensearch:rest-api-spec` jar on Maven Central; nothing of it is copied into this repo.

Supported: setup/teardown sections, `do` (with catch, headers, ignore, allowed_warnings), `match`, `is_true`,
`is_false`, `length`, `gt`/`gte`/`lt`/`lte`, `contains`, `close_to`, `set` and `$stash` references (also inside
paths and strings), `skip` by version range and by features. Steps or features outside that list make the
test skip, with the reason.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

import requests
import yaml

SPEC_VERSION = os.environ.get("SHOAL_REST_SPEC_VERSION", "2.19.0")
SPEC_ARTIFACT = f"org.opensearch:rest-api-spec:{SPEC_VERSION}"
TEST_PREFIX = "rest-api-spec/test/"
API_PREFIX = "rest-api-spec/api/"

# features a test may require (skip: features: [...]) that this runner implements
SUPPORTED_FEATURES = {
    "headers", "allowed_warnings", "allowed_warnings_regex", "stash_in_path", "arbitrary_key", "contains",
    "close_to", "default_shards", "stash_in_key", "is_after",
}
SUPPORTED_STEPS = {"do", "match", "is_true", "is_false", "length", "gt", "gte", "lt", "lte", "set", "skip",
                   "contains", "close_to"}

CATCH_STATUS = {"bad_request": [400], "unauthorized": [401], "forbidden": [403], "missing": [404],
                "request_timeout": [408], "conflict": [409], "unavailable": [503]}


class SkipTest(Exception):
    pass


class YamlTestFailure(AssertionError):
    pass


# ------------------------------------------------------------------------------------------ YAML loading

class _Loader(yaml.SafeLoader):
    """YAML as OpenSearch's parser reads it: no dates, only true/false booleans, decimal ints."""


_Loader.yaml_implicit_resolvers = {}
for _ch, _resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items():
    kept = [(tag, rx) for tag, rx in _resolvers
            if tag not in ("tag:yaml.org,2002:timestamp", "tag:yaml.org,2002:bool", "tag:yaml.org,2002:int")]
    if kept:
        _Loader.yaml_implicit_resolvers[_ch] = kept
_Loader.add_implicit_resolver("tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
                              list("tTfF"))
_Loader.add_implicit_resolver("tag:yaml.org,2002:int", re.compile(r"^[-+]?(?:0|[1-9][0-9]*)$"),
                              list("-+0123456789"))


def _int_constructor(loader, node):
    return int(loader.construct_scalar(node))


_Loader.add_constructor("tag:yaml.org,2002:int", _int_constructor)


def load_yaml_docs(text: str) -> list:
    return [d for d in yaml.load_all(text, Loader=_Loader) if d is not None]


# ------------------------------------------------------------------------------------------ the jar

def default_jar_path() -> Path:
    env = os.environ.get("SHOAL_REST_SPEC_JAR")
    if env:
        return Path(env)
    m2 = Path(os.environ.get("MAVEN_REPO", Path.home() / ".m2" / "repository"))
    return m2 / "org" / "opensearch" / "rest-api-spec" / SPEC_VERSION / f"rest-api-spec-{SPEC_VERSION}.jar"


def ensure_jar() -> Path | None:
    jar = default_jar_path()
    if jar.exists():
        return jar
    if os.environ.get("SHOAL_REST_SPEC_NO_DOWNLOAD"):
        return None
    try:
        subprocess.run(["mvn", "-q", "dependency:get", f"-Dartifact={SPEC_ARTIFACT}", "-Dtransitive=false"],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=600)
    except (OSError, subprocess.SubprocessError):
        return None
    return jar if jar.exists() else None


@dataclass
class Spec:
    apis: dict
    tests: dict  # "dir/file.yml" -> text


def load_spec(jar: Path) -> Spec:
    apis, tests = {}, {}
    with zipfile.ZipFile(jar) as z:
        for name in z.namelist():
            if name.startswith(API_PREFIX) and name.endswith(".json") and not name.endswith("_common.json"):
                data = json.loads(z.read(name))
                apis.update(data)
            elif name.startswith(TEST_PREFIX) and name.endswith((".yml", ".yaml")):
                tests[name[len(TEST_PREFIX):]] = z.read(name).decode("utf-8")
    return Spec(apis, tests)


# ------------------------------------------------------------------------------------------ suites

@dataclass
class TestCase:
    file: str
    name: str
    steps: list
    setup: list = field(default_factory=list)
    teardown: list = field(default_factory=list)

    @property
    def id(self):
        return f"{self.file}::{self.name}"


def parse_suite(file: str, text: str) -> list[TestCase]:
    setup, teardown, cases = [], [], []
    for doc in load_yaml_docs(text):
        if not isinstance(doc, dict):
            continue
        for key, steps in doc.items():
            steps = steps or []
            if key == "setup":
                setup = steps
            elif key == "teardown":
                teardown = steps
            else:
                cases.append(TestCase(file, str(key), steps))
    for c in cases:
        c.setup, c.teardown = setup, teardown
    return cases


# ------------------------------------------------------------------------------------------ allowlist

@dataclass
class Allowlist:
    include: list[str]
    exclude: dict[str, str]  # pattern -> reason

    @staticmethod
    def parse(text: str) -> "Allowlist":
        inc, exc = [], {}
        for raw in text.splitlines():
            line = raw.split("#", 1)[0].strip() if not raw.lstrip().startswith("-") else raw.strip()
            if not line:
                continue
            if line.startswith("-"):
                body = line[1:].strip()
                pat, _, reason = body.partition("#")
                exc[pat.strip()] = reason.strip() or "excluded in allowlist.txt"
            else:
                inc.append(line)
        return Allowlist(inc, exc)

    @staticmethod
    def _matches(pattern: str, file: str, name: str) -> bool:
        if "::" in pattern:
            f, n = pattern.split("::", 1)
            return f == file and n == name
        if pattern.endswith("/"):
            return file.startswith(pattern)
        return file == pattern or file.startswith(pattern + "/")

    def selects(self, file: str, name: str) -> bool:
        return any(self._matches(p, file, name) for p in self.include)

    def excluded(self, file: str, name: str) -> str | None:
        for p, reason in self.exclude.items():
            if self._matches(p, file, name):
                return reason
        return None


# ------------------------------------------------------------------------------------------ versions

def _ver(s: str) -> tuple:
    """Comparable version. OpenSearch 1.x-5.x sort after the legacy Elasticsearch 6.x/7.x versions that old
    tests still name (OpenSearch's own Version class does the same)."""
    parts = [int(p) for p in re.findall(r"\d+", s)[:3]]
    parts += [0] * (3 - len(parts))
    if parts[0] < 6:
        parts[0] += 100
    return tuple(parts)


def version_in_ranges(ranges: str, version: str) -> bool:
    v = _ver(version)
    ranges = ranges.strip()
    if ranges == "all":
        return True
    for r in ranges.split(","):
        r = r.strip()
        if not r:
            continue
        lo, _, hi = r.partition("-")
        lo, hi = lo.strip(), hi.strip()
        low = _ver(lo) if lo else (0, 0, 0)
        high = _ver(hi) if hi else (9999, 999, 999)
        if low <= v <= high:
            return True
    return False


# ------------------------------------------------------------------------------------------ execution

class Context:
    def __init__(self, base_url: str, spec: Spec, server_version: str):
        self.base = base_url.rstrip("/")
        self.spec = spec
        self.version = server_version
        self.stash: dict = {}
        self.session = requests.Session()
        self.last_body = None
        self.last_status = None
        self.last_headers = {}

    # ---- stash
    def resolve(self, value):
        if isinstance(value, str):
            if value.startswith("$") and value[1:] in self.stash and not value.startswith("${"):
                return self.stash[value[1:]]
            if value == "$body":
                return self.last_body

            def sub(m):
                key = m.group(1)
                if key not in self.stash:
                    raise YamlTestFailure(f"stash has no key [{key}]")
                return str(self.stash[key])
            return re.sub(r"\$\{([^}]+)\}", sub, value)
        if isinstance(value, dict):
            return {self.resolve(k): self.resolve(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.resolve(v) for v in value]
        return value

    # ---- path evaluation into the last response
    def evaluate(self, path: str):
        if path in ("", "$body"):
            return self.last_body
        parts = [p.replace("\x00", ".") for p in path.replace("\\.", "\x00").split(".")]
        cur = self.last_body
        for p in parts:
            if p.startswith("$") and p[1:] in self.stash:
                p = str(self.stash[p[1:]])
            elif "${" in p:
                p = self.resolve(p)
            if isinstance(cur, dict):
                if p == "_arbitrary_key_":
                    if not cur:
                        raise YamlTestFailure(f"no key in empty object for path [{path}]")
                    return next(iter(cur))
                cur = cur.get(p)
            elif isinstance(cur, list):
                try:
                    cur = cur[int(p)]
                except (ValueError, IndexError):
                    return None
            else:
                return None
            if cur is None:
                return None
        return cur

    # ---- requests
    def build_request(self, api_name: str, args: dict):
        api = self.spec.apis.get(api_name)
        if api is None:
            raise SkipTest(f"API [{api_name}] not in the REST spec")
        args = dict(args)
        body = args.pop("body", None)
        ignore = args.pop("ignore", None)
        parts_given = {}
        params = {}
        path_parts = set()
        for p in api["url"]["paths"]:
            path_parts |= set(p.get("parts", {}))
        for k, v in args.items():
            if k in path_parts:
                parts_given[k] = v
            else:
                params[k] = v
        # the path whose parts are all given, with the most parts
        best = None
        for p in api["url"]["paths"]:
            needed = set(p.get("parts", {}))
            if needed <= set(parts_given) and (best is None or len(needed) > len(best.get("parts", {}))):
                best = p
        if best is None:
            raise ParamError(f"no path of [{api_name}] matches parts {sorted(parts_given)}")
        for k in set(parts_given) - set(best.get("parts", {})):
            params[k] = parts_given.pop(k)
        path = best["path"]
        for k, v in parts_given.items():
            if isinstance(v, list):
                v = ",".join(str(x) for x in v)
            path = path.replace("{" + k + "}", quote(_str(v), safe=",*"))
        methods = best["methods"]
        if body is not None:
            method = next((m for m in ("POST", "PUT") if m in methods), methods[0])
        else:
            method = "GET" if "GET" in methods else methods[0]
        q = {k: (",".join(_str(x) for x in v) if isinstance(v, list) else _str(v)) for k, v in params.items()}
        ignore_set = set()
        if ignore is not None:
            ignore_set = {int(x) for x in (ignore if isinstance(ignore, list) else [ignore])}
        return method, path, q, body, ignore_set, api

    def call(self, api_name: str, args: dict, headers: dict | None = None):
        method, path, params, body, ignore, api = self.build_request(api_name, args)
        h = {}
        data = None
        if body is not None:
            ndjson = (api.get("body") or {}).get("serialize") == "bulk" or \
                "application/x-ndjson" in ((api.get("headers") or {}).get("content_type") or [])
            if isinstance(body, list) and ndjson:
                data = "".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in body)
                h["Content-Type"] = "application/x-ndjson"
            elif isinstance(body, str):
                data = body if not ndjson or body.endswith("\n") else body + "\n"
                h["Content-Type"] = "application/x-ndjson" if ndjson else "application/json"
            else:
                data = json.dumps(body)
                h["Content-Type"] = "application/json"
            data = data.encode("utf-8")
        h.update(headers or {})
        r = self.session.request(method, self.base + path, params=params, data=data, headers=h, timeout=120)
        self.last_status = r.status_code
        self.last_headers = r.headers
        if method == "HEAD":
            self.last_body = r.status_code == 200
            ignore = ignore | {404}
        else:
            ctype = r.headers.get("content-type", "")
            if "json" in ctype and r.content:
                try:
                    self.last_body = json.loads(r.content)
                except ValueError:
                    self.last_body = r.text
            elif "yaml" in ctype:
                self.last_body = yaml.load(r.text, Loader=_Loader)
            else:
                self.last_body = r.text
        return r, ignore


class ParamError(Exception):
    pass


def _str(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _numeq(a, b) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return float(a) == float(b)
    return False


def _deep_equal(expected, actual) -> bool:
    if isinstance(expected, dict):
        return isinstance(actual, dict) and set(expected) == set(actual) and \
            all(_deep_equal(expected[k], actual[k]) for k in expected)
    if isinstance(expected, list):
        return isinstance(actual, list) and len(expected) == len(actual) and \
            all(_deep_equal(e, a) for e, a in zip(expected, actual))
    if isinstance(expected, (int, float)) and not isinstance(expected, bool):
        return _numeq(expected, actual)
    if isinstance(expected, str) and not isinstance(actual, str) and actual is not None \
            and not isinstance(actual, (dict, list)):
        return expected == _str(actual)
    return expected == actual


def _is_regex(s) -> bool:
    return isinstance(s, str) and len(s.strip()) > 1 and s.strip().startswith("/") and s.strip().endswith("/")


def _regex_match(pattern: str, text: str, verbose: bool = True) -> bool:
    """`match` regexes use Java's COMMENTS flag (free spacing); `catch` regexes are plain."""
    p = pattern.strip()[1:-1]
    try:
        rx = re.compile(p, (re.VERBOSE | re.DOTALL) if verbose else 0)
    except re.error as e:
        raise SkipTest(f"regex not supported by Python: {e}")
    return rx.search(text) is not None


def _truthy(v) -> bool:
    return not (v is None or v is False or v == "" or v == "false" or v == 0 and not isinstance(v, bool))


class Runner:
    def __init__(self, ctx: Context):
        self.ctx = ctx

    def check_skip(self, steps: list):
        for step in steps:
            if not isinstance(step, dict) or "skip" not in step:
                continue
            sk = step["skip"] or {}
            reason = sk.get("reason", "")
            if "version" in sk and version_in_ranges(str(sk["version"]), self.ctx.version):
                raise SkipTest(f"version {self.ctx.version} in [{sk['version']}]: {reason}")
            feats = sk.get("features") or []
            if isinstance(feats, str):
                feats = [feats]
            missing = [f for f in feats if f not in SUPPORTED_FEATURES]
            if missing:
                raise SkipTest(f"runner does not support feature(s) {missing}")
            if "os" in sk:
                pass

    def run_steps(self, steps: list):
        for step in steps:
            if not isinstance(step, dict) or len(step) != 1:
                raise YamlTestFailure(f"malformed step {step!r}")
            (kind, arg), = step.items()
            if kind not in SUPPORTED_STEPS:
                raise SkipTest(f"runner does not support step [{kind}]")
            getattr(self, "step_" + kind)(arg)

    # ---- steps
    def step_skip(self, arg):
        pass  # evaluated up front

    def step_do(self, arg):
        arg = dict(arg)
        catch = arg.pop("catch", None)
        headers = arg.pop("headers", None)
        arg.pop("allowed_warnings", None)
        arg.pop("allowed_warnings_regex", None)
        if "warnings" in arg or "warnings_regex" in arg:
            raise SkipTest("runner does not check deprecation Warning headers")
        if "node_selector" in arg:
            raise SkipTest("runner does not support node_selector")
        if len(arg) != 1:
            raise YamlTestFailure(f"do with several APIs: {list(arg)}")
        (api_name, api_args), = arg.items()
        api_args = self.ctx.resolve(api_args or {})
        headers = self.ctx.resolve(headers) if headers else None
        try:
            r, ignore = self.ctx.call(api_name, api_args, headers)
        except ParamError as e:
            if catch == "param":
                return
            raise YamlTestFailure(str(e))
        status = r.status_code
        if catch == "param":
            raise YamlTestFailure(f"expected a parameter error for {api_name}, got HTTP {status}")
        if catch is None:
            if status >= 400 and status not in ignore:
                raise YamlTestFailure(f"{api_name} {api_args!r} failed: HTTP {status}: {r.text[:2000]}")
            return
        if catch in CATCH_STATUS:
            if status not in CATCH_STATUS[catch]:
                raise YamlTestFailure(f"expected {catch} ({CATCH_STATUS[catch]}) from {api_name}, "
                                      f"got HTTP {status}: {r.text[:1500]}")
        elif catch == "request":
            if status < 400 or status in (400, 401, 403, 404, 408, 409):
                raise YamlTestFailure(f"expected a generic request error from {api_name}, got HTTP {status}")
        elif _is_regex(catch):
            if status < 400:
                raise YamlTestFailure(f"expected an error matching {catch} from {api_name}, got HTTP {status}")
            if not _regex_match(catch, r.text, verbose=False):
                raise YamlTestFailure(f"error body of {api_name} does not match {catch}: {r.text[:1500]}")
        else:
            raise SkipTest(f"unknown catch [{catch}]")

    def _pairs(self, arg):
        if not isinstance(arg, dict):
            raise YamlTestFailure(f"bad assertion argument {arg!r}")
        for k, v in arg.items():
            yield k, self.ctx.evaluate(self.ctx.resolve(k) if "${" in k else k)

    def step_match(self, arg):
        for path, actual in self._pairs(arg):
            expected = self.ctx.resolve(arg[path])
            if _is_regex(expected):
                text = actual if isinstance(actual, str) else json.dumps(actual)
                if actual is None or not _regex_match(expected, text):
                    raise YamlTestFailure(f"match [{path}]: {actual!r} does not match regex {expected!r}")
                continue
            if not _deep_equal(expected, actual):
                raise YamlTestFailure(f"match [{path}]: expected {expected!r}, got {actual!r}")

    def step_is_true(self, arg):
        path = self.ctx.resolve(arg) if isinstance(arg, str) else arg
        v = self.ctx.evaluate(path)
        if not _truthy(v):
            raise YamlTestFailure(f"is_true [{arg}]: got {v!r}")

    def step_is_false(self, arg):
        v = self.ctx.evaluate(arg)
        if _truthy(v):
            raise YamlTestFailure(f"is_false [{arg}]: got {v!r}")

    def step_length(self, arg):
        for path, actual in self._pairs(arg):
            expected = self.ctx.resolve(arg[path])
            if actual is None or not hasattr(actual, "__len__"):
                raise YamlTestFailure(f"length [{path}]: no list/object/string there: {actual!r}")
            if len(actual) != int(expected):
                raise YamlTestFailure(f"length [{path}]: expected {expected}, got {len(actual)}")

    def _cmp(self, arg, op, name):
        for path, actual in self._pairs(arg):
            expected = self.ctx.resolve(arg[path])
            try:
                ok = op(float(actual), float(expected))
            except (TypeError, ValueError):
                try:
                    ok = op(str(actual), str(expected))
                except TypeError:
                    ok = False
            if not ok:
                raise YamlTestFailure(f"{name} [{path}]: {actual!r} vs {expected!r}")

    def step_gt(self, arg):
        self._cmp(arg, lambda a, b: a > b, "gt")

    def step_gte(self, arg):
        self._cmp(arg, lambda a, b: a >= b, "gte")

    def step_lt(self, arg):
        self._cmp(arg, lambda a, b: a < b, "lt")

    def step_lte(self, arg):
        self._cmp(arg, lambda a, b: a <= b, "lte")

    def step_set(self, arg):
        for path, actual in self._pairs(arg):
            self.ctx.stash[arg[path]] = actual

    def step_contains(self, arg):
        for path, actual in self._pairs(arg):
            expected = self.ctx.resolve(arg[path])
            if not isinstance(actual, list):
                raise YamlTestFailure(f"contains [{path}]: not a list: {actual!r}")
            if isinstance(expected, dict):
                ok = any(isinstance(a, dict) and all(_deep_equal(v, a.get(k)) for k, v in expected.items())
                         for a in actual)
            else:
                ok = any(_deep_equal(expected, a) for a in actual)
            if not ok:
                raise YamlTestFailure(f"contains [{path}]: {expected!r} not in {actual!r}")

    def step_close_to(self, arg):
        for path, actual in self._pairs(arg):
            spec = arg[path]
            if abs(float(actual) - float(spec["value"])) > float(spec["error"]):
                raise YamlTestFailure(f"close_to [{path}]: {actual} vs {spec}")

    # ---- a whole test
    def run(self, case: TestCase):
        self.check_skip(case.setup)
        self.check_skip(case.steps)
        try:
            self.run_steps(case.setup)
            self.run_steps(case.steps)
        finally:
            try:
                self.ctx.stash.clear()
                self.run_steps(case.teardown)
            except Exception:  # noqa: BLE001  teardown problems do not hide the test's own result
                pass
