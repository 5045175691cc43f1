//! The built-in analyzers, registered under fixed tokenizer names on every shard index.

use tantivy::tokenizer::{
    Language, LowerCaser, RawTokenizer, RegexTokenizer, RemoveLongFilter, Stemmer, StopWordFilter,
    TextAnalyzer, TokenizerManager, WhitespaceTokenizer,
};

use crate::standard_tokenizer::StandardTokenizer;
use crate::Analyzer;

/// Lucene drops tokens longer than 255 characters in the standard analyzer.
const MAX_TOKEN_LENGTH: usize = 255;

/// The tokenizer name under which an analyzer is registered.
pub fn tokenizer_name(analyzer: Analyzer) -> &'static str {
    match analyzer {
        Analyzer::Standard => "shoal_standard",
        Analyzer::Simple => "shoal_simple",
        Analyzer::Whitespace => "shoal_whitespace",
        Analyzer::Keyword => "shoal_keyword",
        Analyzer::English => "shoal_english",
    }
}

/// Builds the tantivy analyzer equivalent to an OpenSearch built-in analyzer.
pub fn build_analyzer(analyzer: Analyzer) -> TextAnalyzer {
    match analyzer {
        Analyzer::Standard => TextAnalyzer::builder(StandardTokenizer::default())
            .filter(RemoveLongFilter::limit(MAX_TOKEN_LENGTH + 1))
            .filter(LowerCaser)
            .build(),
        Analyzer::Simple => {
            TextAnalyzer::builder(RegexTokenizer::new(r"\p{L}+").expect("static regex is valid"))
                .filter(LowerCaser)
                .build()
        }
        Analyzer::Whitespace => TextAnalyzer::builder(WhitespaceTokenizer::default()).build(),
        Analyzer::Keyword => TextAnalyzer::builder(RawTokenizer::default()).build(),
        Analyzer::English => {
            let stop_words =
                StopWordFilter::new(Language::English).expect("tantivy ships English stop words");
            TextAnalyzer::builder(StandardTokenizer::default())
                .filter(RemoveLongFilter::limit(MAX_TOKEN_LENGTH + 1))
                .filter(EnglishPossessiveFilter)
                .filter(LowerCaser)
                .filter(stop_words)
                .filter(Stemmer::new(Language::English))
                .build()
        }
    }
}

/// Lucene's `EnglishPossessiveFilter`: `fox's` → `fox`.
#[derive(Clone, Copy)]
struct EnglishPossessiveFilter;

impl tantivy::tokenizer::TokenFilter for EnglishPossessiveFilter {
    type Tokenizer<T: tantivy::tokenizer::Tokenizer> = PossessiveTokenizer<T>;

    fn transform<T: tantivy::tokenizer::Tokenizer>(self, tokenizer: T) -> PossessiveTokenizer<T> {
        PossessiveTokenizer(tokenizer)
    }
}

#[derive(Clone)]
struct PossessiveTokenizer<T>(T);

impl<T: tantivy::tokenizer::Tokenizer> tantivy::tokenizer::Tokenizer for PossessiveTokenizer<T> {
    type TokenStream<'a> = PossessiveStream<T::TokenStream<'a>>;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> Self::TokenStream<'a> {
        PossessiveStream(self.0.token_stream(text))
    }
}

struct PossessiveStream<S>(S);

impl<S: tantivy::tokenizer::TokenStream> tantivy::tokenizer::TokenStream for PossessiveStream<S> {
    fn advance(&mut self) -> bool {
        if !self.0.advance() {
            return false;
        }
        let text = &mut self.0.token_mut().text;
        for suffix in ["'s", "'S", "\u{2019}s", "\u{2019}S"] {
            if text.len() > suffix.len() && text.ends_with(suffix) {
                text.truncate(text.len() - suffix.len());
                break;
            }
        }
        true
    }

    fn token(&self) -> &tantivy::tokenizer::Token {
        self.0.token()
    }

    fn token_mut(&mut self) -> &mut tantivy::tokenizer::Token {
        self.0.token_mut()
    }
}

/// Registers every built-in analyzer on a tokenizer manager.
pub fn register_analyzers(manager: &TokenizerManager) {
    for analyzer in Analyzer::ALL {
        manager.register(tokenizer_name(analyzer), build_analyzer(analyzer));
    }
}

/// Runs an analyzer over a text and returns its tokens (used by queries and highlighting).
pub fn analyze(analyzer: Analyzer, text: &str) -> Vec<String> {
    analyze_with_offsets(analyzer, text)
        .into_iter()
        .map(|t| t.text)
        .collect()
}

/// One token with its byte offsets in the analyzed text and its position.
#[derive(Debug, Clone, PartialEq)]
pub struct AnalyzedToken {
    pub text: String,
    pub offset_from: usize,
    pub offset_to: usize,
    pub position: usize,
}

/// Runs an analyzer and keeps offsets and positions.
pub fn analyze_with_offsets(analyzer: Analyzer, text: &str) -> Vec<AnalyzedToken> {
    let mut text_analyzer = build_analyzer(analyzer);
    let mut stream = text_analyzer.token_stream(text);
    let mut tokens = Vec::new();
    while stream.advance() {
        let token = stream.token();
        tokens.push(AnalyzedToken {
            text: token.text.clone(),
            offset_from: token.offset_from,
            offset_to: token.offset_to,
            position: token.position,
        });
    }
    tokens
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standard_lowercases_and_splits_on_punctuation() {
        assert_eq!(
            analyze(Analyzer::Standard, "Quick-Brown FOX!"),
            ["quick", "brown", "fox"]
        );
    }

    #[test]
    fn english_drops_stop_words_and_stems() {
        assert_eq!(
            analyze(Analyzer::English, "The foxes are running"),
            ["fox", "run"]
        );
    }

    #[test]
    fn simple_keeps_letters_only() {
        assert_eq!(analyze(Analyzer::Simple, "abc123def"), ["abc", "def"]);
    }

    #[test]
    fn whitespace_keeps_case() {
        assert_eq!(
            analyze(Analyzer::Whitespace, "Foo bar-Baz"),
            ["Foo", "bar-Baz"]
        );
    }

    #[test]
    fn keyword_is_one_token() {
        assert_eq!(analyze(Analyzer::Keyword, "New York"), ["New York"]);
    }
}
