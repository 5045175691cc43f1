//! Multi-term queries: `prefix`, `wildcard`, `regexp` and `fuzzy` on keyword and text
//! fields (and `_id`), as constant-score or expanding term-dictionary scans.

use serde_json::{Map, Value};
use tantivy::query::{EmptyQuery, Query};

use super::fields::{analyzer_lowercases, resolve, value_text, FieldRef, Target};
use super::multi_term::{Scoring, TermMatcher, TermScanQuery};
use super::params::{read_bool, read_usize, Fuzziness};
use super::term_level::term_params;
use super::{boosted, illegal, parsing};
use crate::{QueryContext, QueryError};

/// A string-term field (text, keyword) for a multi-term query, or the query's answer when
/// the field is unmapped or of another type.
enum MultiTermTarget<'c> {
    Field(FieldRef<'c>),
    Id,
    Done(Box<dyn Query>),
}

fn multi_term_target<'c>(
    ctx: &QueryContext<'c>,
    kind: &str,
    path: &str,
) -> Result<MultiTermTarget<'c>, QueryError> {
    match resolve(ctx, path)? {
        Target::Unmapped => Ok(MultiTermTarget::Done(Box::new(EmptyQuery))),
        Target::Id => Ok(MultiTermTarget::Id),
        Target::Index => Err(illegal(format!("[{kind}] queries on [_index] are not supported by Shoal"))),
        Target::Field(f) if f.is_text() || f.field_type() == shoal_mapping::FieldType::Keyword => {
            Ok(MultiTermTarget::Field(f))
        }
        Target::Field(f) => Err(illegal(format!(
            "Can only use {kind} queries on keyword and text fields - not on [{path}] which is of type [{}]",
            f.type_name()
        ))),
    }
}

/// Builds a constant-score (or expanding) scan for a multi-term query.
pub(crate) fn multi_term_query(
    ctx: &QueryContext,
    kind: &str,
    path: &str,
    matcher: impl FnOnce(Option<&FieldRef>) -> Result<TermMatcher, QueryError>,
    scoring: Scoring,
) -> Result<Box<dyn Query>, QueryError> {
    match multi_term_target(ctx, kind, path)? {
        MultiTermTarget::Done(q) => Ok(q),
        MultiTermTarget::Id => Ok(Box::new(TermScanQuery::plain(
            ctx.schema.id,
            matcher(None)?,
            scoring,
        ))),
        MultiTermTarget::Field(field) => Ok(field.scan(matcher(Some(&field))?, scoring)),
    }
}

fn text_value(query: &str, value: &Value) -> Result<String, QueryError> {
    value_text(value).ok_or_else(|| parsing(format!("[{query}] unsupported value [{value}]")))
}

pub(crate) fn prefix(
    body: &Map<String, Value>,
    ctx: &QueryContext,
) -> Result<Box<dyn Query>, QueryError> {
    let p = term_params("prefix", body, &["value", "prefix"], &[])?;
    let value = text_value("prefix", p.value)?;
    let query = multi_term_query(
        ctx,
        "prefix",
        p.field,
        |_| prefix_matcher(&value, p.case_insensitive),
        Scoring::Constant,
    )?;
    Ok(boosted(query, p.boost))
}

pub(crate) fn prefix_matcher(
    value: &str,
    case_insensitive: bool,
) -> Result<TermMatcher, QueryError> {
    if case_insensitive {
        return TermMatcher::regex(&format!("{}.*", regex::escape(value)), true, String::new())
            .map_err(|e| illegal(e.to_string()));
    }
    Ok(TermMatcher::Prefix(value.to_string()))
}

pub(crate) fn wildcard(
    body: &Map<String, Value>,
    ctx: &QueryContext,
) -> Result<Box<dyn Query>, QueryError> {
    let p = term_params("wildcard", body, &["value", "wildcard"], &[])?;
    let value = text_value("wildcard", p.value)?;
    let query = multi_term_query(
        ctx,
        "wildcard",
        p.field,
        |field| {
            Ok(TermMatcher::wildcard(
                &normalize_for(field, &value),
                p.case_insensitive,
            ))
        },
        Scoring::Constant,
    )?;
    Ok(boosted(query, p.boost))
}

/// Text fields normalize wildcard patterns with their analyzer (lowercasing).
pub(crate) fn normalize_for(field: Option<&FieldRef>, value: &str) -> String {
    match field {
        Some(f) if f.is_text() && analyzer_lowercases(f.search_analyzer()) => value.to_lowercase(),
        _ => value.to_string(),
    }
}

pub(crate) fn regexp(
    body: &Map<String, Value>,
    ctx: &QueryContext,
) -> Result<Box<dyn Query>, QueryError> {
    let p = term_params(
        "regexp",
        body,
        &["value"],
        &["flags", "flags_value", "max_determinized_states"],
    )?;
    let value = text_value("regexp", p.value)?;
    let query = multi_term_query(
        ctx,
        "regexp",
        p.field,
        |_| regexp_matcher(&value, p.case_insensitive),
        Scoring::Constant,
    )?;
    Ok(boosted(query, p.boost))
}

pub(crate) fn regexp_matcher(
    pattern: &str,
    case_insensitive: bool,
) -> Result<TermMatcher, QueryError> {
    let (regex, literal_prefix) = lucene_regex(pattern)?;
    TermMatcher::regex(&regex, case_insensitive, literal_prefix).map_err(|e| {
        illegal(format!(
            "failed to create query: invalid regular expression [{pattern}]: {e}"
        ))
    })
}

/// Lucene `RegExp` syntax → Rust regex syntax, plus the literal prefix of every match.
fn lucene_regex(pattern: &str) -> Result<(String, String), QueryError> {
    let chars: Vec<char> = pattern.chars().collect();
    let mut out = String::new();
    let mut literal = String::new();
    let mut in_prefix = !pattern.contains('|');
    let mut i = 0;
    let push_literal = |out: &mut String, c: char| out.push_str(&regex::escape(&c.to_string()));
    while i < chars.len() {
        let c = chars[i];
        let quantified = matches!(chars.get(i + 1), Some('?' | '*' | '+' | '{'));
        match c {
            '\\' => {
                let next = *chars.get(i + 1).unwrap_or(&'\\');
                push_literal(&mut out, next);
                if in_prefix && !matches!(chars.get(i + 2), Some('?' | '*' | '+' | '{')) {
                    literal.push(next);
                } else {
                    in_prefix = false;
                }
                i += 2;
                continue;
            }
            '"' => {
                in_prefix = false;
                i += 1;
                while i < chars.len() && chars[i] != '"' {
                    push_literal(&mut out, chars[i]);
                    i += 1;
                }
            }
            '@' => {
                in_prefix = false;
                out.push_str(".*");
            }
            '#' => {
                in_prefix = false;
                out.push_str(r"[^\s\S]");
            }
            '~' | '&' | '<' => {
                return Err(illegal(format!(
                    "regexp operator [{c}] in [{pattern}] is not supported by Shoal"
                )))
            }
            '[' => {
                in_prefix = false;
                out.push('[');
                i += 1;
                if chars.get(i) == Some(&'^') {
                    out.push('^');
                    i += 1;
                }
                while i < chars.len() && chars[i] != ']' {
                    match chars[i] {
                        '\\' => {
                            if let Some(&n) = chars.get(i + 1) {
                                push_literal(&mut out, n);
                            }
                            i += 1;
                        }
                        '[' | '&' | '~' | '^' => push_literal(&mut out, chars[i]),
                        other => out.push(other),
                    }
                    i += 1;
                }
                out.push(']');
            }
            '^' | '$' => {
                push_literal(&mut out, c);
                if in_prefix && !quantified {
                    literal.push(c);
                } else {
                    in_prefix = false;
                }
            }
            '.' | '?' | '*' | '+' | '|' | '(' | ')' | '{' | '}' | ']' => {
                in_prefix = false;
                out.push(c);
            }
            _ => {
                push_literal(&mut out, c);
                if in_prefix && !quantified {
                    literal.push(c);
                } else {
                    in_prefix = false;
                }
            }
        }
        i += 1;
    }
    Ok((out, literal))
}

pub(crate) fn fuzzy(
    body: &Map<String, Value>,
    ctx: &QueryContext,
) -> Result<Box<dyn Query>, QueryError> {
    let p = term_params(
        "fuzzy",
        body,
        &["value"],
        &[
            "fuzziness",
            "prefix_length",
            "max_expansions",
            "transpositions",
        ],
    )?;
    let value = text_value("fuzzy", p.value)?;
    let mut fuzziness = Fuzziness::Auto { low: 3, high: 6 };
    let (mut prefix_len, mut max_expansions, mut transpositions) = (0, 50, true);
    for (key, v) in &p.extra {
        match *key {
            "fuzziness" => fuzziness = Fuzziness::parse("fuzzy", v)?,
            "prefix_length" => prefix_len = read_usize("fuzzy", key, v)?,
            "max_expansions" => max_expansions = read_usize("fuzzy", key, v)?,
            _ => transpositions = read_bool("fuzzy", key, v)?,
        }
    }
    let matcher = fuzzy_matcher(&value, fuzziness, prefix_len, transpositions);
    let query = multi_term_query(
        ctx,
        "fuzzy",
        p.field,
        |_| Ok(matcher),
        Scoring::Expand { max_expansions },
    )?;
    Ok(boosted(query, p.boost))
}

pub(crate) fn fuzzy_matcher(
    value: &str,
    fuzziness: Fuzziness,
    prefix_len: usize,
    transpositions: bool,
) -> TermMatcher {
    let chars: Vec<char> = value.chars().collect();
    let max_edits = fuzziness.edits(chars.len());
    TermMatcher::Fuzzy {
        chars,
        max_edits,
        prefix_len,
        transpositions,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::dsl::testutil::{ids as v, Fixture};

    #[test]
    fn prefix_wildcard_and_regexp_scan_terms_with_constant_score() {
        let fx = Fixture::standard();
        assert_eq!(
            fx.matching(json!({"prefix": {"tag": "an"}})),
            v(&["1", "2"])
        );
        assert_eq!(
            fx.matching(json!({"prefix": {"title": {"value": "bro"}}})),
            v(&["1", "2", "4"])
        );
        assert_eq!(
            fx.matching(json!({"prefix": {"tag": {"value": "AN", "case_insensitive": true}}})),
            v(&["1", "2"])
        );
        assert_eq!(
            fx.matching(json!({"wildcard": {"tag": "*a*"}})),
            v(&["1", "2"])
        );
        assert_eq!(
            fx.matching(json!({"wildcard": {"title": {"wildcard": "Qu?ck"}}})),
            v(&["1", "2"])
        );
        assert_eq!(
            fx.matching(json!({"regexp": {"tag": "w.l[a-d]"}})),
            v(&["4"])
        );
        assert_eq!(
            fx.matching(json!({"regexp": {"author.id": {"value": "a[0-9]+"}}})),
            v(&["1", "3"])
        );
        assert_eq!(fx.matching(json!({"regexp": {"tag": "p@"}})), v(&["3"]));
        assert_eq!(fx.matching(json!({"prefix": {"_id": "3"}})), v(&["3"]));
        let scored = fx.scored(json!({"prefix": {"tag": {"value": "a", "boost": 4}}}));
        assert!(scored.iter().all(|(_, s)| *s == 4.0));
    }

    #[test]
    fn multi_term_queries_on_numbers_are_refused() {
        let fx = Fixture::standard();
        assert_eq!(
            fx.error(json!({"prefix": {"count": "1"}})).to_string(),
            "Can only use prefix queries on keyword and text fields - not on [count] which is of type [long]"
        );
        assert!(fx
            .error(json!({"regexp": {"tag": "a~b"}}))
            .to_string()
            .contains("not supported by Shoal"));
    }

    #[test]
    fn fuzzy_matches_within_edit_distance_and_ranks_exact_first() {
        let fx = Fixture::standard();
        assert_eq!(
            fx.matching(json!({"fuzzy": {"title": "quikc"}})),
            v(&["1", "2"])
        );
        assert_eq!(
            fx.matching(json!({"fuzzy": {"title": {"value": "brwn", "fuzziness": 1}}})),
            v(&["1", "2", "4"])
        );
        assert_eq!(
            fx.matching(json!({"fuzzy": {"title": {"value": "brwn", "fuzziness": 0}}})),
            v(&[])
        );
        assert_eq!(
            fx.matching(json!({"fuzzy": {"title": {"value": "xrown", "prefix_length": 1}}})),
            v(&[])
        );
        assert_eq!(fx.matching(json!({"fuzzy": {"tag": "pat"}})), v(&["3"]));
        // "dogs" exact (doc 2 title) outranks "dog"-like variants.
        let ids = fx.ids(json!({"fuzzy": {"title": "dogs"}}));
        assert_eq!(ids, v(&["2"]));
    }

    #[test]
    fn lucene_regex_translation_escapes_anchors_and_keeps_prefix() {
        assert_eq!(
            lucene_regex("ab.*").unwrap(),
            ("ab.*".to_string(), "ab".to_string())
        );
        assert_eq!(lucene_regex("a^b").unwrap().0, r"a\^b");
        assert_eq!(lucene_regex("ab?c").unwrap().1, "a");
        assert_eq!(lucene_regex("ab|cd").unwrap().1, "");
        assert_eq!(lucene_regex(r#""a.b"c"#).unwrap().0, r"a\.bc");
    }
}
