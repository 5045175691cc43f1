//! Multi-term queries (prefix, wildcard, regexp, fuzzy, ranges on terms): one query type
//! that scans the terms of one field (one JSON path) in the term dictionary and keeps those a
//! matcher accepts. Constant-scored like OpenSearch's default `constant_score` rewrite, or
//! expanded into scored term queries (fuzzy, phrase prefix) with blended document
//! frequencies like Lucene's `top_terms_blended_freqs` rewrite.

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::net::IpAddr;
use std::ops::Bound;
use std::sync::Arc;

use tantivy::query::{
    BitSetDocSet, Bm25StatisticsProvider, BooleanQuery, BoostQuery, ConstScorer, EmptyQuery,
    EnableScoring, Explanation, Query, Scorer, TermQuery, Weight,
};
use tantivy::schema::{Field, IndexRecordOption};
use tantivy::termdict::TermDictionary;
use tantivy::{BitSet, DocId, DocSet, Score, SegmentReader, TantivyError, Term};

use super::bm25;

/// Decides whether a term (its text, without the JSON path) belongs to the query.
#[derive(Clone)]
pub(crate) enum TermMatcher {
    Prefix(String),
    /// An anchored regex over the whole term, with the literal text every match starts with.
    Regex {
        regex: Arc<regex::Regex>,
        literal_prefix: String,
    },
    Fuzzy {
        chars: Vec<char>,
        max_edits: u32,
        prefix_len: usize,
        transpositions: bool,
    },
    Range {
        lower: Bound<String>,
        upper: Bound<String>,
    },
    /// Inclusive range of IP addresses (IPv4 mapped into IPv6 space).
    IpRange {
        lower: u128,
        upper: u128,
    },
}

impl fmt::Debug for TermMatcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TermMatcher::Prefix(p) => write!(f, "Prefix({p:?})"),
            TermMatcher::Regex { regex, .. } => write!(f, "Regex({:?})", regex.as_str()),
            TermMatcher::Fuzzy {
                chars, max_edits, ..
            } => {
                write!(
                    f,
                    "Fuzzy({:?}~{max_edits})",
                    chars.iter().collect::<String>()
                )
            }
            TermMatcher::Range { lower, upper } => write!(f, "Range({lower:?}, {upper:?})"),
            TermMatcher::IpRange { lower, upper } => write!(f, "IpRange({lower}, {upper})"),
        }
    }
}

impl TermMatcher {
    /// An anchored regex; `pattern` is in Rust regex syntax.
    pub(crate) fn regex(
        pattern: &str,
        case_insensitive: bool,
        literal_prefix: String,
    ) -> Result<TermMatcher, regex::Error> {
        let flags = if case_insensitive { "(?si)" } else { "(?s)" };
        let regex = regex::RegexBuilder::new(&format!("{flags}^(?:{pattern})$"))
            .size_limit(10 << 20)
            .build()?;
        let literal_prefix = if case_insensitive {
            String::new()
        } else {
            literal_prefix
        };
        Ok(TermMatcher::Regex {
            regex: Arc::new(regex),
            literal_prefix,
        })
    }

    /// A wildcard pattern (`*` any run of characters, `?` one character, `\` escapes).
    pub(crate) fn wildcard(pattern: &str, case_insensitive: bool) -> TermMatcher {
        let mut regex = String::new();
        let mut literal_prefix = String::new();
        let mut in_prefix = true;
        let mut chars = pattern.chars();
        while let Some(c) = chars.next() {
            match c {
                '*' => {
                    in_prefix = false;
                    regex.push_str(".*");
                }
                '?' => {
                    in_prefix = false;
                    regex.push('.');
                }
                _ => {
                    let literal = if c == '\\' {
                        chars.next().unwrap_or('\\')
                    } else {
                        c
                    };
                    if in_prefix {
                        literal_prefix.push(literal);
                    }
                    regex.push_str(&regex::escape(&literal.to_string()));
                }
            }
        }
        TermMatcher::regex(&regex, case_insensitive, literal_prefix)
            .expect("escaped wildcard regex is valid")
    }

    /// Some(boost) when the term matches.
    fn matches(&self, bytes: &[u8]) -> Option<Score> {
        match self {
            TermMatcher::Prefix(prefix) => bytes.starts_with(prefix.as_bytes()).then_some(1.0),
            TermMatcher::Regex { regex, .. } => regex
                .is_match(std::str::from_utf8(bytes).ok()?)
                .then_some(1.0),
            TermMatcher::Fuzzy {
                chars,
                max_edits,
                prefix_len,
                transpositions,
            } => {
                let text = std::str::from_utf8(bytes).ok()?;
                let candidate: Vec<char> = text.chars().collect();
                if candidate.len() < *prefix_len || chars.len() < *prefix_len {
                    return (candidate == *chars).then_some(1.0);
                }
                if candidate[..*prefix_len] != chars[..*prefix_len] {
                    return None;
                }
                let distance = edit_distance(
                    &chars[*prefix_len..],
                    &candidate[*prefix_len..],
                    *max_edits,
                    *transpositions,
                )?;
                let shortest = chars.len().min(candidate.len()).max(1) as f32;
                Some((1.0 - distance as f32 / shortest).max(0.05))
            }
            TermMatcher::Range { lower, upper } => {
                let above = match lower {
                    Bound::Included(l) => bytes >= l.as_bytes(),
                    Bound::Excluded(l) => bytes > l.as_bytes(),
                    Bound::Unbounded => true,
                };
                let below = match upper {
                    Bound::Included(u) => bytes <= u.as_bytes(),
                    Bound::Excluded(u) => bytes < u.as_bytes(),
                    Bound::Unbounded => true,
                };
                (above && below).then_some(1.0)
            }
            TermMatcher::IpRange { lower, upper } => {
                let ip: IpAddr = std::str::from_utf8(bytes).ok()?.parse().ok()?;
                let n = ip_to_u128(ip);
                (n >= *lower && n <= *upper).then_some(1.0)
            }
        }
    }

    /// Text every matching term starts with (narrows the dictionary scan).
    fn literal_prefix(&self) -> String {
        match self {
            TermMatcher::Prefix(p) => p.clone(),
            TermMatcher::Regex { literal_prefix, .. } => literal_prefix.clone(),
            TermMatcher::Fuzzy {
                chars, prefix_len, ..
            } if chars.len() > *prefix_len => chars[..*prefix_len].iter().collect(),
            _ => String::new(),
        }
    }
}

pub(crate) fn ip_to_u128(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(v4) => u128::from(v4.to_ipv6_mapped()),
        IpAddr::V6(v6) => u128::from(v6),
    }
}

/// Optimal-string-alignment distance, or None when above `max`.
pub(crate) fn edit_distance(a: &[char], b: &[char], max: u32, transpositions: bool) -> Option<u32> {
    let max = max as usize;
    if a.len().abs_diff(b.len()) > max {
        return None;
    }
    let width = b.len() + 1;
    let mut prev2 = vec![0usize; width];
    let mut prev: Vec<usize> = (0..width).collect();
    let mut cur = vec![0usize; width];
    for i in 1..=a.len() {
        cur[0] = i;
        let mut row_min = cur[0];
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (prev[j] + 1).min(cur[j - 1] + 1).min(prev[j - 1] + cost);
            if transpositions && i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(prev2[j - 2] + 1);
            }
            cur[j] = v;
            row_min = row_min.min(v);
        }
        if row_min > max {
            return None;
        }
        std::mem::swap(&mut prev2, &mut prev);
        std::mem::swap(&mut prev, &mut cur);
    }
    let d = prev[b.len()];
    (d <= max).then_some(d as u32)
}

/// The field (and JSON path) a scan runs over.
#[derive(Clone, Debug)]
enum Base {
    /// A JSON field: the term with the path only; string terms follow it with the `s` type byte.
    Json(Term),
    /// A plain text field (`_id`).
    Plain,
}

/// How matching terms score.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Scoring {
    /// Every matching document scores the query boost (1.0).
    Constant,
    /// The best `max_expansions` terms become BM25 term queries with blended frequencies.
    Expand { max_expansions: usize },
}

/// Matches the documents holding a term of one field path accepted by a [`TermMatcher`].
#[derive(Clone, Debug)]
pub(crate) struct TermScanQuery {
    field: Field,
    base: Base,
    key_prefix: Vec<u8>,
    matcher: TermMatcher,
    scoring: Scoring,
}

impl TermScanQuery {
    /// A scan over the string terms of `path` inside the JSON field `field`.
    pub(crate) fn json(
        field: Field,
        path: &str,
        matcher: TermMatcher,
        scoring: Scoring,
    ) -> TermScanQuery {
        let base = Term::from_field_json_path(field, path, true);
        let mut key_prefix = base.serialized_value_bytes().to_vec();
        key_prefix.push(tantivy::schema::Type::Str.to_code());
        TermScanQuery {
            field,
            base: Base::Json(base),
            key_prefix,
            matcher,
            scoring,
        }
    }

    /// A scan over a plain text field.
    pub(crate) fn plain(field: Field, matcher: TermMatcher, scoring: Scoring) -> TermScanQuery {
        TermScanQuery {
            field,
            base: Base::Plain,
            key_prefix: Vec::new(),
            matcher,
            scoring,
        }
    }

    fn make_term(&self, text: &[u8]) -> Term {
        let text = String::from_utf8_lossy(text);
        match &self.base {
            Base::Json(base) => {
                let mut term = base.clone();
                term.append_type_and_str(&text);
                term
            }
            Base::Plain => Term::from_field_text(self.field, &text),
        }
    }

    /// Calls `f(text, term_info, boost)` for every matching term of the dictionary.
    fn for_each_match(
        &self,
        dict: &TermDictionary,
        mut f: impl FnMut(&[u8], &tantivy::postings::TermInfo, Score),
    ) -> tantivy::Result<()> {
        let mut start = self.key_prefix.clone();
        start.extend_from_slice(self.matcher.literal_prefix().as_bytes());
        let mut builder = dict.range().ge(&start);
        if let Some(end) = prefix_end(&start) {
            builder = builder.lt(end);
        }
        let mut stream = builder.into_stream()?;
        while stream.advance() {
            let text = &stream.key()[self.key_prefix.len()..];
            if let Some(boost) = self.matcher.matches(text) {
                f(text, stream.value(), boost);
            }
        }
        Ok(())
    }

    fn expanded_query(
        &self,
        readers: &[SegmentReader],
        max_expansions: usize,
    ) -> tantivy::Result<(Box<dyn Query>, HashSet<Term>)> {
        let mut found: BTreeMap<Vec<u8>, Score> = BTreeMap::new();
        for reader in readers {
            let inverted = reader.inverted_index(self.field)?;
            self.for_each_match(inverted.terms(), |text, _, boost| {
                found.insert(text.to_vec(), boost);
            })?;
        }
        let mut ranked: Vec<(Vec<u8>, Score)> = found.into_iter().collect();
        // Best boost first, then term order, like Lucene's top-terms rewrite.
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        ranked.truncate(max_expansions.max(1));
        let mut terms = HashSet::new();
        let clauses: Vec<Box<dyn Query>> = ranked
            .into_iter()
            .map(|(text, boost)| {
                let term = self.make_term(&text);
                terms.insert(term.clone());
                let query: Box<dyn Query> =
                    bm25(Box::new(TermQuery::new(term, IndexRecordOption::WithFreqs)));
                if boost == 1.0 {
                    query
                } else {
                    Box::new(BoostQuery::new(query, boost)) as Box<dyn Query>
                }
            })
            .collect();
        let query: Box<dyn Query> = match clauses.len() {
            0 => Box::new(EmptyQuery),
            1 => clauses.into_iter().next().expect("one clause"),
            _ => Box::new(BooleanQuery::union(clauses)),
        };
        Ok((query, terms))
    }
}

impl Query for TermScanQuery {
    fn weight(&self, enable_scoring: EnableScoring<'_>) -> tantivy::Result<Box<dyn Weight>> {
        if let (
            Scoring::Expand { max_expansions },
            EnableScoring::Enabled {
                searcher,
                statistics_provider,
            },
        ) = (self.scoring, enable_scoring)
        {
            let (query, terms) = self.expanded_query(searcher.segment_readers(), max_expansions)?;
            let mut max_df = 0;
            for term in &terms {
                max_df = max_df.max(statistics_provider.doc_freq(term)?);
            }
            let blended = BlendedStats {
                inner: statistics_provider,
                terms,
                doc_freq: max_df,
            };
            return query.weight(EnableScoring::enabled_from_statistics_provider(
                &blended, searcher,
            ));
        }
        Ok(Box::new(ScanWeight {
            query: self.clone(),
        }))
    }
}

/// Gives every expanded term the same document frequency (the highest), so that a rare
/// misspelling does not outscore the exact term (Lucene's blended frequencies).
struct BlendedStats<'a> {
    inner: &'a dyn Bm25StatisticsProvider,
    terms: HashSet<Term>,
    doc_freq: u64,
}

impl Bm25StatisticsProvider for BlendedStats<'_> {
    fn total_num_tokens(&self, field: Field) -> tantivy::Result<u64> {
        self.inner.total_num_tokens(field)
    }

    fn total_num_docs(&self) -> tantivy::Result<u64> {
        self.inner.total_num_docs()
    }

    fn doc_freq(&self, term: &Term) -> tantivy::Result<u64> {
        if self.terms.contains(term) {
            return Ok(self.doc_freq);
        }
        self.inner.doc_freq(term)
    }
}

struct ScanWeight {
    query: TermScanQuery,
}

impl Weight for ScanWeight {
    fn scorer(&self, reader: &SegmentReader, boost: Score) -> tantivy::Result<Box<dyn Scorer>> {
        let inverted = reader.inverted_index(self.query.field)?;
        let mut bitset = BitSet::with_max_value(reader.max_doc());
        let mut error = None;
        self.query
            .for_each_match(inverted.terms(), |_, term_info, _| {
                if error.is_some() {
                    return;
                }
                match inverted
                    .read_block_postings_from_terminfo(term_info, IndexRecordOption::Basic)
                {
                    Ok(mut postings) => loop {
                        let docs = postings.docs();
                        if docs.is_empty() {
                            break;
                        }
                        for &doc in docs {
                            bitset.insert(doc);
                        }
                        postings.advance();
                    },
                    Err(e) => error = Some(e),
                }
            })?;
        if let Some(e) = error {
            return Err(e.into());
        }
        Ok(Box::new(ConstScorer::new(
            BitSetDocSet::from(bitset),
            boost,
        )))
    }

    fn explain(&self, reader: &SegmentReader, doc: DocId) -> tantivy::Result<Explanation> {
        let mut scorer = self.scorer(reader, 1.0)?;
        if scorer.seek(doc) != doc {
            return Err(TantivyError::InvalidArgument(format!(
                "Document #({doc}) does not match"
            )));
        }
        Ok(Explanation::new_with_string(
            format!("{:?}", self.query.matcher),
            scorer.score(),
        ))
    }
}

/// The smallest byte string greater than every string starting with `prefix`.
pub(crate) fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < u8::MAX {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chars(s: &str) -> Vec<char> {
        s.chars().collect()
    }

    #[test]
    fn edit_distance_counts_transpositions_as_one_edit() {
        assert_eq!(
            edit_distance(&chars("quikc"), &chars("quick"), 2, true),
            Some(1)
        );
        assert_eq!(
            edit_distance(&chars("quikc"), &chars("quick"), 2, false),
            Some(2)
        );
        assert_eq!(edit_distance(&chars("abc"), &chars("xyz"), 2, true), None);
        assert_eq!(edit_distance(&chars(""), &chars("ab"), 2, true), Some(2));
    }

    #[test]
    fn wildcard_patterns_keep_escapes_and_literal_prefix() {
        let m = TermMatcher::wildcard(r"qu?ck\*x*", false);
        assert!(m.matches(b"quick*xyz").is_some());
        assert!(m.matches(b"quickxyz").is_none());
        assert_eq!(m.literal_prefix(), "qu");
        let ci = TermMatcher::wildcard("QU*", true);
        assert!(ci.matches(b"quick").is_some());
    }

    #[test]
    fn prefix_end_skips_max_bytes() {
        assert_eq!(prefix_end(b"ab"), Some(b"ac".to_vec()));
        assert_eq!(prefix_end(&[b'a', 0xff]), Some(b"b".to_vec()));
        assert_eq!(prefix_end(&[0xff]), None);
    }
}
