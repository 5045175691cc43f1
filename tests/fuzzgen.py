"""A seeded generator of HTTP requests for every Shoal API, valid and junk (used by test_fuzz.py).

Every index name it writes to comes from POOL (or its wildcard `fz*`); `_all`, `*` and other
names that could reach indices outside the pool are only used with GET and HEAD, so documents of
any index not starting with `fz` are never written by it.
"""
import gzip
import json
import random
from dataclasses import dataclass, field

POOL = ["fz-a", "fz-b", "fz-c", "fz-d"]
WRITE_TARGETS = POOL + ["fz*", "fz-a,fz-b", "fz-new-1", "fz-new-2"]
READ_ONLY_TARGETS = ["_all", "*", "*,-fz-a", "_all,fz-a", "-fz", "fz-a,-*"]
# No "." or "..": the client would resolve them out of the path (and reach every index).
JUNK_NAMES = ["FZ-UPPER", "fz a", "_fz", "fz:x", "fz#x", "fz\\x", "fz-é", "fz-" + "x" * 300, "%", "fz\"q", "fz<>"]
IDS = ["1", "2", "3", "x", "é-ü", "a b", "a/b", "%41", "_id", "", "0", "-1", "1" * 600, "\U0001F600"]
FIELDS = ["title", "n", "tags", "date", "f", "obj.x", "nested.y", "*", "", "_id", "_source", "title.keyword", "é"]

# Routes from crates/shoal-rest/src/router.rs (and the modules it merges).
ROUTES = [
    "/", "/_alias", "/_alias/{name}", "/_aliases", "/_bulk", "/_cat", "/_cat/aliases", "/_cat/aliases/{name}",
    "/_cat/allocation", "/_cat/allocation/{node}", "/_cat/cluster_manager", "/_cat/count", "/_cat/count/{index}",
    "/_cat/health", "/_cat/indices", "/_cat/indices/{index}", "/_cat/master", "/_cat/nodeattrs", "/_cat/nodes",
    "/_cat/pending_tasks", "/_cat/recovery", "/_cat/recovery/{index}", "/_cat/segments", "/_cat/segments/{index}",
    "/_cat/shards", "/_cat/shards/{index}", "/_cluster/allocation/explain", "/_cluster/health",
    "/_cluster/health/{index}", "/_cluster/pending_tasks", "/_cluster/reroute", "/_cluster/settings",
    "/_cluster/state", "/_cluster/state/{metric}", "/_cluster/state/{metric}/{index}",
    "/_cluster/voting_config_exclusions", "/_cluster/voting_config_exclusions/{node}", "/_count", "/_flush",
    "/_forcemerge", "/_mapping", "/_mget", "/_msearch", "/_nodes", "/_nodes/stats", "/_nodes/stats/{metric}",
    "/_nodes/{node}", "/_nodes/{node}/stats", "/_nodes/{node}/stats/{metric}", "/_nodes/{node}/{metric}",
    "/_recovery", "/_refresh", "/_search", "/_search/scroll", "/_search/scroll/{scroll}", "/_settings", "/_stats",
    "/_stats/{metric}", "/{index}", "/{index}/_alias", "/{index}/_alias/{name}", "/{index}/_aliases",
    "/{index}/_bulk", "/{index}/_close", "/{index}/_count", "/{index}/_create/{id}", "/{index}/_delete_by_query",
    "/{index}/_doc", "/{index}/_doc/{id}", "/{index}/_flush", "/{index}/_forcemerge", "/{index}/_mapping",
    "/{index}/_mget", "/{index}/_msearch", "/{index}/_open", "/{index}/_recovery", "/{index}/_refresh",
    "/{index}/_search", "/{index}/_settings", "/{index}/_settings/{name}", "/{index}/_source/{id}",
    "/{index}/_stats", "/{index}/_stats/{metric}", "/{index}/_update/{id}", "/{index}/_update_by_query",
]
# Paths whose writes reach every index: only read.
ALL_INDEX_WRITES = {"/", "/_settings", "/_mapping"}

METHODS = ["GET"] * 7 + ["POST"] * 5 + ["PUT"] * 4 + ["DELETE"] * 2 + ["HEAD", "PATCH", "OPTIONS"]
# The methods a route answers (by its last fixed segment); anything else is a 405, tried less often.
ROUTE_METHODS = [
    ("_bulk", "POST PUT"), ("_search/scroll", "GET POST DELETE"), ("_search", "GET POST"), ("_count", "GET POST"),
    ("_msearch", "GET POST"), ("_mget", "GET POST"), ("_by_query", "POST"), ("/_doc/{id}", "GET PUT POST DELETE HEAD"),
    ("/_doc", "POST"), ("_create", "PUT POST"), ("_update/", "POST"), ("_source", "GET HEAD"),
    ("_mapping", "GET PUT POST"), ("_cluster/settings", "GET PUT"), ("_settings", "GET PUT"), ("_aliases", "POST"),
    ("_alias", "GET PUT POST DELETE HEAD"), ("_close", "POST"), ("_open", "POST"), ("_refresh", "GET POST"),
    ("_flush", "GET POST"), ("_forcemerge", "POST"), ("reroute", "POST"), ("explain", "GET POST"),
    ("voting_config", "POST DELETE"), ("/{index}", "PUT GET DELETE HEAD"), ("/", "GET HEAD"),
]
METRICS = ["_all", "indices", "docs", "store", "search", "indexing", "metadata", "routing_table", "nodes", "junk",
           "os,jvm", "*", "settings", "blocks"]
NODES = ["_local", "_all", "test-node", "_master", "_cluster_manager", "nope", "*", "data:true"]

PARAMS = ["pretty", "filter_path", "refresh", "routing", "timeout", "master_timeout", "cluster_manager_timeout",
          "wait_for_active_shards", "version", "version_type", "if_seq_no", "if_primary_term", "op_type", "size",
          "from", "q", "df", "default_operator", "sort", "_source", "_source_includes", "_source_excludes", "scroll",
          "search_type", "track_total_hits", "expand_wildcards", "ignore_unavailable", "allow_no_indices", "level",
          "wait_for_status", "wait_for_nodes", "local", "h", "s", "v", "format", "bytes", "include_defaults",
          "flat_settings", "preference", "request_cache", "conflicts", "max_docs", "slices", "require_alias",
          "error_trace", "human", "max_num_segments", "only_expunge_deletes", "flush", "explain", "stored_fields",
          "analyze_wildcard", "lenient", "terminate_after", "batched_reduce_size", "allow_partial_search_results",
          "scroll_id", "rest_total_hits_as_int", "typed_keys", "retry_on_conflict", "dry_run", "metric", "junk_param",
          "include_type_name", "write_index_only", "index", "fields", "time", "health", "pri", "wait_for_completion"]
JUNK_VALUES = ["", "true", "false", "1", "-1", "0", "99999999999999999999", "1.5", "abc", "1s", "-5m", "null",
               "[]", "{}", '"', "<>", "é", "*", "_all", "x" * 500, "1e400", "NaN", "0x10", " 1", "true,false",
               "title:\"fox\"", "n:>5", "title:(a OR", "%", "\U0001F600", "10000", "2147483648", "_doc", "asc",
               "title:desc", "all", "green", "yellow", "external", "internal", "create", "index", "proceed"]
VALID_VALUES = {"refresh": ["true", "false", ""], "size": ["0", "5", "100"], "from": ["0", "3"],
                "scroll": ["1s", "30s"], "level": ["cluster", "indices", "shards"], "format": ["json", "yaml", "txt"],
                "expand_wildcards": ["open", "closed", "all", "none", "hidden"], "version_type": ["external"],
                "op_type": ["index", "create"], "q": ['title:"fox"', "n:>5", "n:<5", "*"], "wait_for_active_shards": ["1"]}

FIELD_TYPES = ["text", "keyword", "long", "integer", "short", "byte", "double", "float", "half_float", "scaled_float",
               "date", "boolean", "object", "nested", "ip", "binary", "geo_point", "flat_object", "junk_type", "",
               None]
SETTING_KEYS = ["index.number_of_shards", "number_of_shards", "index.number_of_replicas", "index.refresh_interval",
                "index.max_result_window", "index.blocks.write", "index.blocks.read_only", "index.blocks.read",
                "index.blocks.metadata", "index.codec", "index.translog.durability", "index.mapping.total_fields.limit",
                "index.analysis.analyzer.a.type", "index.junk", "index.gc_deletes", "index.max_inner_result_window"]
# Not generated: keys that make later requests wait legitimately (unassigned shards wait up to a minute
# for their primary; cluster blocks are the settings helper's area and would stall the rest of the run).
CLUSTER_SETTING_KEYS = ["search.max_buckets", "action.auto_create_index", "indices.recovery.max_bytes_per_sec",
                        "cluster.routing.allocation.disk.threshold_enabled", "search.default_search_timeout",
                        "action.destructive_requires_name", "cluster.junk.key", "indices.breaker.total.limit",
                        "cluster.routing.allocation.disk.watermark.low", "search.max_open_scroll_context"]


@dataclass
class Request:
    method: str
    path: str
    params: dict = field(default_factory=dict)
    body: bytes | None = None
    headers: dict = field(default_factory=dict)

    def describe(self) -> str:
        body = (self.body or b"")[:300]
        return f"{self.method} {self.path} params={self.params} headers={self.headers} body={body!r}"


class Generator:
    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.scroll_ids = ["junk-scroll-id", "", "_all", "DnF1ZXJ5VGhlbkZldGNo"]

    # --- scalars -------------------------------------------------------------------------
    def pick(self, items):
        return self.rng.choice(items)

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def junk_scalar(self):
        r = self.rng
        return self.pick([
            lambda: r.randint(-5, 100), lambda: 2 ** r.choice([31, 53, 63, 64, 70]) * r.choice([1, -1]),
            lambda: r.random() * 10 ** r.randint(-5, 300), lambda: self.pick(JUNK_VALUES), lambda: None,
            lambda: r.choice([True, False]), lambda: "".join(chr(r.randint(0x20, 0x2FFF)) for _ in range(r.randint(0, 12))),
            lambda: "fox", lambda: "2024-01-0" + str(r.randint(1, 9)), lambda: [], lambda: {},
        ])()

    def junk_value(self, depth: int = 0):
        if depth > 3 or self.chance(0.6):
            return self.junk_scalar()
        if self.chance(0.5):
            return [self.junk_value(depth + 1) for _ in range(self.rng.randint(0, 3))]
        return {self.pick(FIELDS + ["query", "match", "type", "field", "value"]): self.junk_value(depth + 1)
                for _ in range(self.rng.randint(0, 3))}

    # --- names ---------------------------------------------------------------------------
    def index_for(self, method: str) -> str:
        if method in ("GET", "HEAD") and self.chance(0.15):
            return self.pick(READ_ONLY_TARGETS)
        if self.chance(0.1):
            return self.pick(JUNK_NAMES)
        return self.pick(WRITE_TARGETS)

    def fill(self, template: str, method: str) -> str:
        path = template
        for key, choices in (("{name}", ["fz-alias", "fz-al*", "_all", "junk", "fz-a"]), ("{id}", IDS),
                             ("{metric}", METRICS), ("{node}", NODES), ("{scroll}", self.scroll_ids)):
            if key in path:
                path = path.replace(key, quote_segment(self.pick(choices)))
        if "{index}" in path:
            path = path.replace("{index}", quote_segment(self.index_for(method)))
        return path

    def junk_path(self) -> str:
        segments = [self.pick(["_search", "_doc", "fz-a", "_cat", "", "%", "%zz", "%C3%A9", "é", "_junk",
                               "x" * self.rng.randint(1, 200), "%00", "_bulk", "a;b", "~", "fz-b"])
                    for _ in range(self.rng.randint(0, 5))]
        return "/" + "/".join(segments) + self.pick(["", "/", "//"])

    # --- requests ------------------------------------------------------------------------
    def method_for(self, template: str | None) -> str:
        if template is None or self.chance(0.15):
            return self.pick(METHODS)
        for marker, methods in ROUTE_METHODS:
            if marker in template:
                return self.pick(methods.split())
        return "GET"

    def request(self) -> Request:
        template = self.pick(ROUTES) if self.chance(0.9) else None
        method = self.method_for(template)
        if template in ALL_INDEX_WRITES and method not in ("GET", "HEAD"):
            method = "GET"
        path = self.fill(template, method) if template else self.junk_path()
        if template is None and method not in ("GET", "HEAD") and not path.startswith("/fz"):
            method = "GET"
        req = Request(method, path, self.params())
        if path.startswith(("/_cluster/health", "/_cluster/voting_config_exclusions")):
            # these wait by design (an index that does not exist yet, a node's removal): up to `timeout`
            req.params.setdefault("timeout", "1s")
        if method not in ("GET", "HEAD") or self.chance(0.2):
            self.add_body(req, template or "")
        return req

    def params(self) -> dict:
        params = {}
        for _ in range(self.rng.choice([0, 0, 1, 1, 2, 3])):
            name = self.pick(PARAMS)
            valid = VALID_VALUES.get(name)
            params[name] = self.pick(valid) if valid and self.chance(0.5) else self.pick(JUNK_VALUES)
        if params.get("refresh") == "wait_for":
            # waits for the next refresh, which a fuzzed refresh_interval can push past 10 s
            params["refresh"] = "true"
        if any(k.startswith("wait_for") for k in params):
            # waits are bounded by `timeout` (default 30 s to 1 m): keep them short
            params["timeout"] = "1s"
        return params

    def add_body(self, req: Request, template: str):
        kind = self.rng.random()
        if kind < 0.55:
            body = json.dumps(self.api_body(template), ensure_ascii=self.chance(0.5)).encode()
        elif kind < 0.65:
            body = json.dumps(self.junk_value()).encode()
        elif kind < 0.72:
            depth = self.rng.choice([50, 500, 3000])
            body = (b'{"a":' * depth) + b"1" + (b"}" * depth) if self.chance(0.5) else b"[" * depth + b"]" * depth
        elif kind < 0.80:
            body = self.pick([b"{", b"{'a':1}", b'{"a":1,}', b"\xef\xbb\xbf{}", b'{"a":1e999999}', b"\x00\x01\xff",
                              b'{"query":{"match_all":{}}}}', b'{"a":"\\ud800"}', b"nul", b'{"a":NaN}', b"   "])
        elif kind < 0.9:
            body = self.ndjson()
        else:
            body = b""
        req.body = body
        ctype = self.pick(["application/json"] * 6 + ["application/x-ndjson", "text/plain", None,
                                                      "application/json; charset=UTF-8"])
        if ctype:
            req.headers["Content-Type"] = ctype
        if self.chance(0.08):
            req.body = gzip.compress(body) if self.chance(0.8) else body[:5] + b"\x1f\x8b"
            req.headers["Content-Encoding"] = "gzip"

    def api_body(self, template: str):
        if "_bulk" in template or "_msearch" in template:
            return self.junk_value()
        if "_search" in template or "_count" in template or "_by_query" in template:
            return self.search_body()
        if "_mapping" in template:
            return self.mapping()
        if "_settings" in template and "_cluster" not in template:
            return {"index": self.index_settings()} if self.chance(0.5) else self.index_settings()
        if "_cluster/settings" in template:
            return {self.pick(["persistent", "transient", "junk"]): {self.pick(CLUSTER_SETTING_KEYS): self.junk_scalar()}}
        if "_aliases" in template:
            action = self.pick(["add", "remove", "remove_index", "junk"])
            target = {"index": self.pick(WRITE_TARGETS), "alias": self.pick(["fz-alias", "fz-al2", "", "_all"])}
            if self.chance(0.3):
                target[self.pick(["filter", "routing", "is_write_index", "junk"])] = self.junk_value()
            return {"actions": [{action: target}]}
        if "_update/" in template:
            return self.pick([{"doc": self.document()}, {"doc": self.document(), "doc_as_upsert": self.junk_scalar()},
                              {"upsert": self.document()}, {"script": "ctx._source.n++"}, self.junk_value()])
        if "_mget" in template:
            return self.pick([{"ids": [self.pick(IDS) for _ in range(3)]},
                              {"docs": [{"_index": self.pick(POOL), "_id": self.pick(IDS)}]}, self.junk_value()])
        if "_cluster/reroute" in template:
            cmd = self.pick(["move", "cancel", "allocate_replica", "allocate_empty_primary", "junk"])
            return {"commands": [{cmd: {"index": self.pick(POOL), "shard": self.junk_scalar(), "node": "test-node",
                                        "from_node": "test-node", "to_node": "x"}}]}
        if "allocation/explain" in template:
            return {"index": self.pick(POOL), "shard": self.junk_scalar(), "primary": self.junk_scalar()}
        if template in ("/{index}",):
            return {"settings": self.index_settings(), "mappings": self.mapping(), "aliases": {"fz-al3": {}}}
        if "_doc" in template or "_create" in template:
            return self.document()
        return self.junk_value()

    def document(self):
        doc = {self.pick(FIELDS): self.junk_value() for _ in range(self.rng.randint(0, 4))}
        if self.chance(0.5):
            doc["title"] = self.pick(["the quick fox", "lazy dog", "", "é" * 50])
        return doc

    def index_settings(self):
        settings = {self.pick(SETTING_KEYS): self.junk_scalar() for _ in range(self.rng.randint(0, 2))}
        if self.chance(0.7):
            settings["number_of_shards"] = self.pick([1, 1, 2, 3, 0, -1, "x", 2000])
            settings["number_of_replicas"] = self.pick([0, 0, 1, -1, "x"])
        return settings

    def mapping(self):
        props = {}
        for _ in range(self.rng.randint(0, 3)):
            spec = {}
            kind = self.pick(FIELD_TYPES)
            if kind is not None:
                spec["type"] = kind
            if self.chance(0.4):
                spec[self.pick(["index", "doc_values", "ignore_above", "format", "analyzer", "fields", "properties",
                                "scaling_factor", "null_value", "copy_to", "dynamic", "junk"])] = self.junk_value()
            props[self.pick(FIELDS)] = spec
        body = {"properties": props}
        if self.chance(0.2):
            body["dynamic"] = self.pick([True, False, "strict", "runtime", "junk", 1])
        return body

    def query(self, depth: int = 0):
        f = self.pick(FIELDS)
        v = self.junk_scalar()
        choices = [
            {"match_all": {}}, {"match": {f: v}}, {"term": {f: v}}, {"terms": {f: [v, self.junk_scalar()]}},
            {"range": {f: {self.pick(["gt", "gte", "lt", "lte", "junk"]): v}}}, {"exists": {"field": v}},
            {"prefix": {f: v}}, {"wildcard": {f: v}}, {"regexp": {f: self.pick(["a.*", "[", "(", "fo+"])}},
            {"fuzzy": {f: v}}, {"ids": {"values": [v]}}, {"query_string": {"query": self.pick(JUNK_VALUES)}},
            {"multi_match": {"query": v, "fields": [f]}}, {"match_phrase": {f: v}}, {"junk_query": {}},
            {"simple_query_string": {"query": self.pick(JUNK_VALUES)}}, {"nested": {"path": f, "query": {}}},
        ]
        if depth < 3:
            choices.append({"bool": {self.pick(["must", "should", "filter", "must_not", "junk"]):
                                     [self.query(depth + 1) for _ in range(self.rng.randint(0, 2))]}})
            choices.append({"constant_score": {"filter": self.query(depth + 1)}})
        return self.pick(choices)

    def aggs(self, depth: int = 0):
        f = self.pick(FIELDS)
        kind = self.pick(["terms", "avg", "sum", "min", "max", "value_count", "cardinality", "histogram",
                          "date_histogram", "range", "filter", "filters", "top_hits", "stats", "extended_stats",
                          "percentiles", "missing", "composite", "significant_terms", "junk_agg"])
        spec = {"field": f} if self.chance(0.8) else {}
        for key in self.rng.sample(["size", "interval", "calendar_interval", "fixed_interval", "ranges", "min_doc_count",
                                    "order", "missing", "format", "percents", "sources", "shard_size", "offset"], 2):
            if self.chance(0.4):
                spec[key] = self.junk_value()
        agg = {kind: spec if kind not in ("filter",) else self.query(2)}
        if depth < 2 and self.chance(0.3):
            agg["aggs"] = self.aggs(depth + 1)
        return {self.pick(["a", "b", "", "x>y", "é"]): agg}

    def search_body(self):
        body = {}
        if self.chance(0.8):
            body["query"] = self.query()
        if self.chance(0.35):
            body["aggs"] = self.aggs()
        for key in ("size", "from", "sort", "_source", "track_total_hits", "search_after", "highlight",
                    "timeout", "min_score", "post_filter", "collapse", "terminate_after"):
            if self.chance(0.08):
                body[key] = self.junk_value()
        if self.chance(0.05):
            body["junk_key"] = 1
        return body

    def ndjson(self) -> bytes:
        lines = []
        for _ in range(self.rng.randint(1, 6)):
            action = self.pick(["index", "create", "update", "delete", "junk"])
            meta = {"_index": self.pick(WRITE_TARGETS[:4] + ["fz-new-1"]), "_id": self.pick(IDS)}
            if self.chance(0.2):
                meta[self.pick(["routing", "version", "version_type", "if_seq_no", "require_alias", "junk"])] = \
                    self.junk_scalar()
            lines.append(json.dumps({action: meta}))
            if action in ("index", "create"):
                lines.append(json.dumps(self.document()))
            elif action == "update":
                lines.append(json.dumps({"doc": self.document()}))
            if self.chance(0.1):
                lines.append(self.pick(["{", "", "[]", "{}", '{"index":{}} {"a":1}', json.dumps({"query": {}})]))
        text = "\n".join(lines) + ("\n" if self.chance(0.85) else "")
        return text.encode()


def quote_segment(text: str) -> str:
    from urllib.parse import quote
    return quote(text, safe="*,:-_.~")
