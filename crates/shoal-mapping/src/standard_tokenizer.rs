//! Lucene's `StandardTokenizer`: word boundaries of Unicode UAX #29, keeping only words
//! that hold a letter or digit. `wi-fi` is two tokens, `don't`, `3.14`, `foo_bar` and
//! `libfoo1.2` are one each, unlike tantivy's `SimpleTokenizer` which splits on any symbol.

use tantivy::tokenizer::{Token, TokenStream, Tokenizer};
use unicode_segmentation::{UnicodeSegmentation, UnicodeWordIndices};

#[derive(Clone, Default)]
pub struct StandardTokenizer {
    token: Token,
}

pub struct StandardTokenStream<'a> {
    words: UnicodeWordIndices<'a>,
    token: &'a mut Token,
}

impl Tokenizer for StandardTokenizer {
    type TokenStream<'a> = StandardTokenStream<'a>;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> StandardTokenStream<'a> {
        self.token.reset();
        StandardTokenStream {
            words: text.unicode_word_indices(),
            token: &mut self.token,
        }
    }
}

impl TokenStream for StandardTokenStream<'_> {
    fn advance(&mut self) -> bool {
        let Some((offset, word)) = self.words.next() else {
            return false;
        };
        self.token.text.clear();
        self.token.text.push_str(word);
        self.token.offset_from = offset;
        self.token.offset_to = offset + word.len();
        self.token.position = self.token.position.wrapping_add(1);
        true
    }

    fn token(&self) -> &Token {
        self.token
    }

    fn token_mut(&mut self) -> &mut Token {
        self.token
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<String> {
        let mut tokenizer = StandardTokenizer::default();
        let mut stream = tokenizer.token_stream(text);
        let mut out = Vec::new();
        while stream.advance() {
            out.push(stream.token().text.clone());
        }
        out
    }

    #[test]
    fn splits_like_lucene_standard_tokenizer() {
        assert_eq!(
            words("The quick-brown fox's e-mail"),
            ["The", "quick", "brown", "fox's", "e", "mail"]
        );
        assert_eq!(
            words("libfoo1.2 foo_bar 3.14 don't"),
            ["libfoo1.2", "foo_bar", "3.14", "don't"]
        );
        assert_eq!(words("  ,;!  "), Vec::<String>::new());
    }
}
