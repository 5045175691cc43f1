//! The terms a highlighter should mark for a query.

use serde_json::{Map, Value};
use shoal_mapping::analysis::analyze;
use shoal_mapping::Analyzer;

use super::fields::{expand_fields, resolve, value_text, FieldSpec, Target};
use super::full_text::parse_analyzer;
use super::multi_match::read_fields;
use super::qs_parser::{self, Leaf, Node};
use super::string_query::{query_string_options, simple_query_string_options};
use super::{clause, sqs_parser};
use crate::QueryContext;

/// `(field path, term)` pairs the highlighter should mark, in query order without
/// duplicates: analyzed tokens of full-text clauses (match family, multi_match,
/// query_string, simple_query_string) and raw values of term-level clauses (term, terms,
/// fuzzy) on text and keyword fields. Clauses under `must_not` and `boosting.negative`
/// are skipped. Prefix-like clauses yield *patterns*, where `*` matches any run of
/// characters and `?` one character: `prefix: qu` gives `qu*`, a wildcard gives its
/// pattern, and `match_phrase_prefix: "quick br"` gives `quick` and `br*`. Regexp clauses
/// yield nothing. Malformed queries yield whatever could be read (never an error: building
/// the query reports those).
pub fn query_terms_for_highlight(query: &Value, ctx: &QueryContext) -> Vec<(String, String)> {
    let mut out = Collector {
        ctx,
        terms: Vec::new(),
    };
    out.query(query, 0);
    out.terms
}

struct Collector<'a, 'c> {
    ctx: &'a QueryContext<'c>,
    terms: Vec<(String, String)>,
}

impl Collector<'_, '_> {
    fn push(&mut self, field: &str, term: String) {
        if term.is_empty() {
            return;
        }
        let pair = (field.to_string(), term);
        if !self.terms.contains(&pair) {
            self.terms.push(pair);
        }
    }

    fn query(&mut self, query: &Value, depth: usize) {
        if depth > 64 {
            return;
        }
        let Ok((name, body)) = clause(query) else {
            return;
        };
        match name {
            "bool" => {
                for key in ["must", "should", "filter"] {
                    match body.get(key) {
                        Some(Value::Array(items)) => {
                            items.iter().for_each(|q| self.query(q, depth + 1))
                        }
                        Some(q @ Value::Object(_)) => self.query(q, depth + 1),
                        _ => {}
                    }
                }
            }
            "constant_score" => body
                .get("filter")
                .into_iter()
                .for_each(|q| self.query(q, depth + 1)),
            "boosting" => body
                .get("positive")
                .into_iter()
                .for_each(|q| self.query(q, depth + 1)),
            "dis_max" => {
                if let Some(Value::Array(items)) = body.get("queries") {
                    items.iter().for_each(|q| self.query(q, depth + 1));
                }
            }
            "match" | "match_phrase" | "match_bool_prefix" | "match_phrase_prefix" => {
                let prefix = name.ends_with("prefix");
                for (field, params) in body {
                    let (text, analyzer) = match params {
                        Value::Object(p) => (
                            p.get("query"),
                            p.get("analyzer").and_then(|a| parse_analyzer(name, a).ok()),
                        ),
                        other => (Some(other), None),
                    };
                    if let Some(text) = text.and_then(value_text) {
                        self.analyzed(field, &text, analyzer, prefix);
                    }
                }
            }
            "multi_match" | "combined_fields" => self.multi_match(body),
            "term" | "fuzzy" | "prefix" | "wildcard" => {
                for (field, params) in body {
                    let value = match params {
                        Value::Object(p) => p.get("value").or_else(|| p.get(name)),
                        other => Some(other),
                    };
                    if let Some(value) = value.and_then(value_text) {
                        let term = if name == "prefix" {
                            format!("{value}*")
                        } else {
                            value
                        };
                        self.raw(field, term, name == "wildcard");
                    }
                }
            }
            "terms" => {
                for (field, values) in body {
                    if let Value::Array(values) = values {
                        for value in values.iter().filter_map(value_text) {
                            self.raw(field, value, false);
                        }
                    }
                }
            }
            "query_string" => {
                let Ok((text, opts, _)) = query_string_options(body, self.ctx) else {
                    return;
                };
                if let Ok(node) = qs_parser::parse(&text, opts.match_opts.and) {
                    self.node(&node, None, &opts.fields, opts.match_opts.analyzer);
                }
            }
            "simple_query_string" => {
                let Ok((text, opts, _)) = simple_query_string_options(body, self.ctx) else {
                    return;
                };
                if let Some(node) = sqs_parser::parse(&text, opts.match_opts.and) {
                    self.node(&node, None, &opts.fields, opts.match_opts.analyzer);
                }
            }
            _ => {}
        }
    }

    fn multi_match(&mut self, body: &Map<String, Value>) {
        let Some(text) = body.get("query").and_then(value_text) else {
            return;
        };
        let fields = body
            .get("fields")
            .and_then(|f| read_fields("multi_match", f).ok())
            .unwrap_or_else(|| vec![("*".to_string(), 1.0)]);
        let analyzer = body
            .get("analyzer")
            .and_then(|a| parse_analyzer("multi_match", a).ok());
        let prefix = matches!(
            body.get("type").and_then(Value::as_str),
            Some("phrase_prefix" | "bool_prefix")
        );
        for spec in expand_fields(self.ctx, &fields) {
            self.analyzed(&spec.path, &text, analyzer, prefix);
        }
    }

    /// Tokens of `text` as the field analyzes it; keyword fields keep the whole value.
    fn analyzed(
        &mut self,
        path: &str,
        text: &str,
        analyzer: Option<Analyzer>,
        last_is_prefix: bool,
    ) {
        let Ok(Target::Field(field)) = resolve(self.ctx, path) else {
            return;
        };
        if field.is_text() {
            let tokens = analyze(analyzer.unwrap_or_else(|| field.search_analyzer()), text);
            let last = tokens.len().saturating_sub(1);
            for (i, token) in tokens.into_iter().enumerate() {
                let term = if last_is_prefix && i == last {
                    format!("{token}*")
                } else {
                    token
                };
                self.push(path, term);
            }
        } else if field.is_keyword() {
            self.push(path, text.to_string());
        }
    }

    /// A term-level value: not analyzed, but wildcard patterns of text fields are lowercased
    /// like the query does.
    fn raw(&mut self, path: &str, term: String, normalize: bool) {
        let Ok(Target::Field(field)) = resolve(self.ctx, path) else {
            return;
        };
        if field.is_text() || field.is_keyword() {
            let term = if normalize {
                super::patterns::normalize_for(Some(&field), &term)
            } else {
                term
            };
            self.push(path, term);
        }
    }

    fn node(
        &mut self,
        node: &Node,
        scope: Option<&str>,
        defaults: &[FieldSpec],
        analyzer: Option<Analyzer>,
    ) {
        match node {
            Node::Bool(clauses) => {
                for (occur, child) in clauses {
                    if *occur != tantivy::query::Occur::MustNot {
                        self.node(child, scope, defaults, analyzer);
                    }
                }
            }
            Node::Field(field, inner) => self.node(inner, Some(field), defaults, analyzer),
            Node::Boost(inner, _) => self.node(inner, scope, defaults, analyzer),
            Node::MatchAll => {}
            Node::Leaf(leaf) => {
                let fields = match scope {
                    Some(f) => expand_fields(self.ctx, &[(f.to_string(), 1.0)]),
                    None => defaults.to_vec(),
                };
                for spec in fields {
                    match leaf {
                        Leaf::Text(t) | Leaf::Phrase { text: t, .. } => {
                            self.analyzed(&spec.path, t, analyzer, false)
                        }
                        Leaf::Fuzzy { text, .. } => {
                            self.analyzed(&spec.path, text, analyzer, false)
                        }
                        Leaf::Wildcard(p) if p != "*" => self.raw(&spec.path, p.clone(), true),
                        Leaf::Prefix(p) => self.raw(&spec.path, format!("{p}*"), true),
                        _ => {}
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::dsl::testutil::Fixture;

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(f, t)| (f.to_string(), t.to_string()))
            .collect()
    }

    #[test]
    fn match_queries_yield_analyzed_terms() {
        let fx = Fixture::standard();
        let terms =
            query_terms_for_highlight(&json!({"match": {"body": "The Running Dogs"}}), &fx.ctx());
        assert_eq!(terms, pairs(&[("body", "run"), ("body", "dog")]));
        let terms = query_terms_for_highlight(
            &json!({"match_phrase_prefix": {"title": "quick br"}}),
            &fx.ctx(),
        );
        assert_eq!(terms, pairs(&[("title", "quick"), ("title", "br*")]));
    }

    #[test]
    fn compound_queries_collect_positive_clauses_only() {
        let fx = Fixture::standard();
        let q = json!({"bool": {
            "must": [{"match": {"title": "Quick"}}],
            "should": {"term": {"tag": "animal"}},
            "filter": {"prefix": {"title": "bro"}},
            "must_not": {"match": {"title": "fox"}}
        }});
        let terms = query_terms_for_highlight(&q, &fx.ctx());
        assert_eq!(
            terms,
            pairs(&[("title", "quick"), ("tag", "animal"), ("title", "bro*")])
        );
    }

    #[test]
    fn multi_match_and_query_strings_expand_fields() {
        let fx = Fixture::standard();
        let terms = query_terms_for_highlight(
            &json!({"multi_match": {"query": "Lazy", "fields": ["title", "body"]}}),
            &fx.ctx(),
        );
        assert_eq!(terms, pairs(&[("title", "lazy"), ("body", "lazi")]));
        let q = json!({"query_string": {"query": "title:(Quick OR Qu*) -title:fox \"lazy cat\"", "default_field": "title"}});
        let terms = query_terms_for_highlight(&q, &fx.ctx());
        assert_eq!(
            terms,
            pairs(&[
                ("title", "quick"),
                ("title", "qu*"),
                ("title", "lazy"),
                ("title", "cat")
            ])
        );
        let q = json!({"simple_query_string": {"query": "bear -cat", "fields": ["title"]}});
        assert_eq!(
            query_terms_for_highlight(&q, &fx.ctx()),
            pairs(&[("title", "bear")])
        );
    }
}
