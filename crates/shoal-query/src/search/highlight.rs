//! Highlighting with the behaviour of OpenSearch's `plain` highlighter: fragments of about
//! `fragment_size` characters cut at token boundaries (Lucene's span fragmenter), matched
//! tokens wrapped in tags, the best `number_of_fragments` fragments per value.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use shoal_mapping::analysis::analyze_with_offsets;
use shoal_mapping::{Analyzer, FieldType};

use super::source::{glob_match, token_name, wildcard_match};
use crate::{QueryContext, QueryError};

/// The `highlight` clause of a request.
#[derive(Debug, Clone, PartialEq)]
pub struct HighlightSpec {
    pub fields: Vec<HighlightFieldSpec>,
    pub pre_tags: Vec<String>,
    pub post_tags: Vec<String>,
    pub fragment_size: usize,
    pub number_of_fragments: usize,
    pub no_match_size: usize,
    pub require_field_match: bool,
    pub html_encoder: bool,
    pub highlight_query: Option<Value>,
}

/// One entry of `highlight.fields`; unset options inherit the top-level ones.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct HighlightFieldSpec {
    pub name: String,
    pub pre_tags: Option<Vec<String>>,
    pub post_tags: Option<Vec<String>>,
    pub fragment_size: Option<usize>,
    pub number_of_fragments: Option<usize>,
    pub no_match_size: Option<usize>,
    pub highlight_query: Option<Value>,
}

const STYLED_PRE_TAGS: [&str; 10] = [
    "<em class=\"hlt1\">",
    "<em class=\"hlt2\">",
    "<em class=\"hlt3\">",
    "<em class=\"hlt4\">",
    "<em class=\"hlt5\">",
    "<em class=\"hlt6\">",
    "<em class=\"hlt7\">",
    "<em class=\"hlt8\">",
    "<em class=\"hlt9\">",
    "<em class=\"hlt10\">",
];

impl HighlightSpec {
    pub fn from_json(map: &Map<String, Value>) -> Result<HighlightSpec, QueryError> {
        let mut spec = HighlightSpec {
            fields: Vec::new(),
            pre_tags: vec!["<em>".into()],
            post_tags: vec!["</em>".into()],
            fragment_size: 100,
            number_of_fragments: 5,
            no_match_size: 0,
            require_field_match: true,
            html_encoder: false,
            highlight_query: None,
        };
        for (key, value) in map {
            match key.as_str() {
                "fields" => spec.fields = parse_fields(value)?,
                "pre_tags" => spec.pre_tags = tags(key, value)?,
                "post_tags" => spec.post_tags = tags(key, value)?,
                "tags_schema" => {
                    if value.as_str() == Some("styled") {
                        spec.pre_tags = STYLED_PRE_TAGS.iter().map(|s| s.to_string()).collect();
                        spec.post_tags = vec!["</em>".into()];
                    }
                }
                "fragment_size" => spec.fragment_size = count(key, value)?,
                "number_of_fragments" => spec.number_of_fragments = count(key, value)?,
                "no_match_size" => spec.no_match_size = count(key, value)?,
                "require_field_match" => spec.require_field_match = value.as_bool().unwrap_or(true),
                "encoder" => spec.html_encoder = value.as_str() == Some("html"),
                "highlight_query" => spec.highlight_query = Some(value.clone()),
                "type"
                | "order"
                | "fragmenter"
                | "boundary_scanner"
                | "boundary_chars"
                | "boundary_max_scan"
                | "boundary_scanner_locale"
                | "phrase_limit"
                | "max_analyzed_offset"
                | "options"
                | "force_source"
                | "fragment_offset"
                | "matched_fields"
                | "max_fragment_length" => {}
                other => {
                    return Err(QueryError::Parsing(format!(
                        "[highlight] unknown field [{other}]"
                    )))
                }
            }
        }
        Ok(spec)
    }
}

fn parse_fields(value: &Value) -> Result<Vec<HighlightFieldSpec>, QueryError> {
    let mut out = Vec::new();
    let mut add = |name: &str, options: &Value| -> Result<(), QueryError> {
        let mut field = HighlightFieldSpec {
            name: name.to_string(),
            ..Default::default()
        };
        if let Value::Object(map) = options {
            for (key, value) in map {
                match key.as_str() {
                    "pre_tags" => field.pre_tags = Some(tags(key, value)?),
                    "post_tags" => field.post_tags = Some(tags(key, value)?),
                    "fragment_size" => field.fragment_size = Some(count(key, value)?),
                    "number_of_fragments" => field.number_of_fragments = Some(count(key, value)?),
                    "no_match_size" => field.no_match_size = Some(count(key, value)?),
                    "highlight_query" => field.highlight_query = Some(value.clone()),
                    _ => {}
                }
            }
        }
        out.push(field);
        Ok(())
    };
    match value {
        Value::Object(map) => {
            for (name, options) in map {
                add(name, options)?;
            }
        }
        Value::Array(items) => {
            for item in items {
                let map = item.as_object().filter(|m| m.len() == 1).ok_or_else(|| {
                    QueryError::Parsing(
                        "[highlight] fields must be an object or an array of single-field objects"
                            .into(),
                    )
                })?;
                for (name, options) in map {
                    add(name, options)?;
                }
            }
        }
        other => {
            return Err(QueryError::Parsing(format!(
                "[highlight] fields expected START_OBJECT or START_ARRAY but found [{}]",
                token_name(other)
            )))
        }
    }
    Ok(out)
}

fn tags(key: &str, value: &Value) -> Result<Vec<String>, QueryError> {
    match value {
        Value::String(s) => Ok(vec![s.clone()]),
        Value::Array(items) => Ok(items
            .iter()
            .filter_map(|v| v.as_str().map(String::from))
            .collect()),
        other => Err(QueryError::Parsing(format!(
            "[highlight] {key} expected an array but found [{}]",
            token_name(other)
        ))),
    }
}

fn count(key: &str, value: &Value) -> Result<usize, QueryError> {
    value
        .as_u64()
        .or_else(|| value.as_str().and_then(|s| s.parse().ok()))
        .map(|n| n as usize)
        .ok_or_else(|| {
            QueryError::Parsing(format!("[highlight] {key} must be a non-negative integer"))
        })
}

/// A term to highlight, as indexed (already analyzed).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub(crate) enum HlTerm {
    Exact(String),
    Glob(String),
}

impl HlTerm {
    fn matches(&self, token: &str) -> bool {
        match self {
            HlTerm::Exact(t) => t == token,
            HlTerm::Glob(g) => wildcard_match(g, token),
        }
    }
}

/// Highlighting resolved for one index: which fields, with which analyzer and terms.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct HighlightPlan {
    fields: Vec<PlannedField>,
    html_encoder: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct PlannedField {
    path: String,
    #[serde(with = "super::wire::analyzer")]
    analyzer: Analyzer,
    terms: Vec<HlTerm>,
    pre_tags: Vec<String>,
    post_tags: Vec<String>,
    fragment_size: usize,
    number_of_fragments: usize,
    no_match_size: usize,
}

/// Resolves a highlight clause against an index mapping and the request's query.
pub(crate) fn plan_highlight(
    spec: &HighlightSpec,
    query: Option<&Value>,
    ctx: &QueryContext,
) -> HighlightPlan {
    let mut all_terms = Vec::new();
    if let Some(q) = spec.highlight_query.as_ref().or(query) {
        query_terms(q, ctx, &mut all_terms);
    }
    let mut fields = Vec::new();
    let mut seen = HashSet::new();
    for field_spec in &spec.fields {
        let mut terms_for_spec = Vec::new();
        let terms = match &field_spec.highlight_query {
            Some(q) => {
                query_terms(q, ctx, &mut terms_for_spec);
                &terms_for_spec
            }
            None => &all_terms,
        };
        for (path, field) in ctx.mapping.leaf_fields() {
            let wanted = if field_spec.name.contains('*') {
                glob_match(&field_spec.name, &path)
            } else {
                field_spec.name == path
            };
            if !wanted
                || !matches!(field.field_type, FieldType::Text | FieldType::Keyword)
                || !seen.insert(path.clone())
            {
                continue;
            }
            let analyzer = if field.field_type == FieldType::Text {
                field.index_analyzer()
            } else {
                Analyzer::Keyword
            };
            let field_terms: Vec<HlTerm> = terms
                .iter()
                .filter(|(f, _)| !spec.require_field_match || *f == path)
                .map(|(_, t)| t.clone())
                .collect();
            fields.push(PlannedField {
                path,
                analyzer,
                terms: field_terms,
                pre_tags: field_spec
                    .pre_tags
                    .clone()
                    .unwrap_or_else(|| spec.pre_tags.clone()),
                post_tags: field_spec
                    .post_tags
                    .clone()
                    .unwrap_or_else(|| spec.post_tags.clone()),
                fragment_size: field_spec.fragment_size.unwrap_or(spec.fragment_size),
                number_of_fragments: field_spec
                    .number_of_fragments
                    .unwrap_or(spec.number_of_fragments),
                no_match_size: field_spec.no_match_size.unwrap_or(spec.no_match_size),
            });
        }
    }
    HighlightPlan {
        fields,
        html_encoder: spec.html_encoder,
    }
}

impl HighlightPlan {
    /// The `highlight` object of a hit, or `None` when nothing matched.
    pub fn highlight(&self, source: &Value) -> Option<Value> {
        let mut out = Map::new();
        for field in &self.fields {
            let mut texts = Vec::new();
            collect_texts(source, &field.path, &mut texts);
            if texts.is_empty() {
                continue;
            }
            let mut fragments = Vec::new();
            for text in &texts {
                fragments.extend(highlight_terms(
                    text,
                    field.analyzer,
                    &field.terms,
                    &field.pre_tags,
                    &field.post_tags,
                    field.fragment_size,
                    field.number_of_fragments,
                    self.html_encoder,
                ));
            }
            if field.number_of_fragments > 0 {
                fragments.truncate(field.number_of_fragments);
            }
            if fragments.is_empty() && field.no_match_size > 0 {
                fragments.push(no_match_fragment(
                    &texts[0],
                    field.no_match_size,
                    self.html_encoder,
                ));
            }
            if !fragments.is_empty() {
                out.insert(field.path.clone(), json!(fragments));
            }
        }
        (!out.is_empty()).then_some(Value::Object(out))
    }
}

/// The string values at a dotted path of a source document.
fn collect_texts(value: &Value, path: &str, out: &mut Vec<String>) {
    match value {
        Value::Array(items) => items.iter().for_each(|item| collect_texts(item, path, out)),
        Value::Object(map) => {
            if path.is_empty() {
                return;
            }
            if let Some(v) = map.get(path) {
                collect_leaf(v, out);
            }
            let mut end = 0;
            while let Some(pos) = path[end..].find('.') {
                let split = end + pos;
                if let Some(child) = map.get(&path[..split]) {
                    collect_texts(child, &path[split + 1..], out);
                }
                end = split + 1;
            }
        }
        _ => {}
    }
}

fn collect_leaf(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(s) => out.push(s.clone()),
        Value::Number(n) => out.push(n.to_string()),
        Value::Bool(b) => out.push(b.to_string()),
        Value::Array(items) => items.iter().for_each(|item| collect_leaf(item, out)),
        _ => {}
    }
}

fn no_match_fragment(text: &str, size: usize, html: bool) -> String {
    let mut end = text.len().min(size);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    if end < text.len() {
        if let Some(space) = text[..end].rfind(char::is_whitespace) {
            end = space;
        }
    }
    encode(&text[..end], html)
}

/// Highlights `terms` (analyzed forms) in `text` like the plain highlighter and returns the
/// best fragments (all of `text` as one fragment when `number_of_fragments` is 0).
pub fn highlight_field(
    text: &str,
    analyzer: Analyzer,
    terms: &[String],
    pre: &str,
    post: &str,
    fragment_size: usize,
    number_of_fragments: usize,
) -> Vec<String> {
    let terms: Vec<HlTerm> = terms.iter().map(|t| HlTerm::Exact(t.clone())).collect();
    highlight_terms(
        text,
        analyzer,
        &terms,
        &[pre.to_string()],
        &[post.to_string()],
        fragment_size,
        number_of_fragments,
        false,
    )
}

struct Fragment {
    text: String,
    matched: HashSet<String>,
    num: usize,
}

#[allow(clippy::too_many_arguments)]
fn highlight_terms(
    text: &str,
    analyzer: Analyzer,
    terms: &[HlTerm],
    pre_tags: &[String],
    post_tags: &[String],
    fragment_size: usize,
    number_of_fragments: usize,
    html: bool,
) -> Vec<String> {
    if terms.is_empty() {
        return Vec::new();
    }
    let tokens = analyze_with_offsets(analyzer, text);
    let tag_of = |term_index: usize| {
        let i = term_index % pre_tags.len().max(1);
        (
            pre_tags
                .get(i)
                .or(pre_tags.first())
                .cloned()
                .unwrap_or_default(),
            post_tags
                .get(i)
                .or(post_tags.first())
                .cloned()
                .unwrap_or_default(),
        )
    };
    let fragment_size = if number_of_fragments == 0 {
        usize::MAX / 2
    } else {
        fragment_size.max(1)
    };
    let mut fragments = vec![Fragment {
        text: String::new(),
        matched: HashSet::new(),
        num: 0,
    }];
    let mut last_end = 0;
    let mut num_frags = 1usize;
    let mut term_order: Vec<String> = Vec::new();
    for (i, token) in tokens.iter().enumerate() {
        if token.offset_from < last_end || token.offset_to > text.len() {
            continue;
        }
        if i > 0
            && token.offset_to >= fragment_size.saturating_mul(num_frags)
            && text.len().saturating_sub(token.offset_from) >= fragment_size / 2
        {
            num_frags += 1;
            let num = fragments.len();
            fragments.push(Fragment {
                text: String::new(),
                matched: HashSet::new(),
                num,
            });
        }
        let current = fragments.last_mut().expect("one fragment");
        current
            .text
            .push_str(&encode(&text[last_end..token.offset_from], html));
        let original = &text[token.offset_from..token.offset_to];
        if terms.iter().any(|t| t.matches(&token.text)) {
            let index = match term_order.iter().position(|t| *t == token.text) {
                Some(index) => index,
                None => {
                    term_order.push(token.text.clone());
                    term_order.len() - 1
                }
            };
            let (pre, post) = tag_of(if pre_tags.len() > 1 { index } else { 0 });
            current.text.push_str(&pre);
            current.text.push_str(&encode(original, html));
            current.text.push_str(&post);
            current.matched.insert(token.text.clone());
        } else {
            current.text.push_str(&encode(original, html));
        }
        last_end = token.offset_to;
    }
    if let Some(last) = fragments.last_mut() {
        last.text.push_str(&encode(&text[last_end..], html));
    }
    let mut scored: Vec<Fragment> = fragments
        .into_iter()
        .filter(|f| !f.matched.is_empty())
        .collect();
    scored.sort_by(|a, b| {
        b.matched
            .len()
            .cmp(&a.matched.len())
            .then(a.num.cmp(&b.num))
    });
    if number_of_fragments > 0 {
        scored.truncate(number_of_fragments);
    }
    scored.into_iter().map(|f| f.text).collect()
}

fn encode(text: &str, html: bool) -> String {
    if !html {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#x27;"),
            '/' => out.push_str("&#x2F;"),
            c => out.push(c),
        }
    }
    out
}

/// The (field, term) pairs a query highlights, from the query DSL: exact analyzed terms,
/// or patterns (`*`, `?`) for prefix-like clauses.
pub(crate) fn query_terms(query: &Value, ctx: &QueryContext, out: &mut Vec<(String, HlTerm)>) {
    for (field, term) in crate::dsl::query_terms_for_highlight(query, ctx) {
        let term = if term.contains(['*', '?']) {
            HlTerm::Glob(term)
        } else {
            HlTerm::Exact(term)
        };
        out.push((field, term));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hl(text: &str, terms: &[&str], fragment_size: usize, n: usize) -> Vec<String> {
        let terms: Vec<String> = terms.iter().map(|s| s.to_string()).collect();
        highlight_field(
            text,
            Analyzer::Standard,
            &terms,
            "<em>",
            "</em>",
            fragment_size,
            n,
        )
    }

    #[test]
    fn short_text_is_one_fragment_with_tagged_tokens() {
        assert_eq!(
            hl("The Quick brown fox", &["quick"], 100, 5),
            ["The <em>Quick</em> brown fox"]
        );
        assert!(hl("The quick brown fox", &["dog"], 100, 5).is_empty());
    }

    #[test]
    fn long_text_is_cut_into_fragments_at_token_boundaries() {
        let text = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma";
        let frags = hl(text, &["beta", "sigma"], 20, 5);
        assert_eq!(frags.len(), 2, "{frags:?}");
        // Lucene starts a fragment at the first token ending past `fragment_size`.
        assert_eq!(frags[0], "alpha <em>beta</em> gamma");
        assert!(frags[1].ends_with("<em>sigma</em>"), "{frags:?}");
        assert!(frags[1].len() < 60);
        // Only the best fragment when one is asked for; the whole text when zero are.
        assert_eq!(hl(text, &["beta", "sigma"], 20, 1).len(), 1);
        let whole = hl(text, &["beta"], 20, 0);
        assert_eq!(whole, [text.replace("beta", "<em>beta</em>")]);
    }

    #[test]
    fn fragments_with_more_distinct_terms_come_first() {
        let text =
            "one two three four five six seven eight nine ten eleven twelve thirteen fourteen";
        let frags = hl(text, &["one", "twelve", "thirteen"], 25, 2);
        assert!(frags[0].contains("<em>twelve</em>"), "{frags:?}");
        assert!(frags[1].contains("<em>one</em>"), "{frags:?}");
    }
}
