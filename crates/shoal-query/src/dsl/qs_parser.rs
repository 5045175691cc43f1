//! The Lucene classic query syntax of `query_string`: terms, `"phrases"~slop`, `field:value`,
//! `field:(a b)`, `AND`/`OR`/`NOT`/`&&`/`||`/`!`, `+`/`-`, grouping, wildcards `*` `?`,
//! `/regex/`, `term~N`, `^boost`, ranges `[a TO b]` `{a TO b}` and `>=x`, `_exists_:field`.
//! Produces an [`Node`] tree shared with `simple_query_string`.

use tantivy::query::Occur;

/// A parsed query string.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Node {
    Bool(Vec<(Occur, Node)>),
    /// `field:...`: the sub-query runs on that field (or field pattern).
    Field(String, Box<Node>),
    Boost(Box<Node>, f32),
    Leaf(Leaf),
    MatchAll,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Leaf {
    /// Plain text, analyzed by the field.
    Text(String),
    Phrase {
        text: String,
        slop: Option<u32>,
    },
    /// A pattern with `*`, `?` and `\` escapes.
    Wildcard(String),
    Prefix(String),
    /// `term~` (query's fuzziness) or `term~N`.
    Fuzzy {
        text: String,
        edits: Option<u32>,
    },
    Regex(String),
    Range {
        lower: Option<String>,
        upper: Option<String>,
        include_lower: bool,
        include_upper: bool,
    },
    Exists,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Conj {
    None,
    And,
    Or,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Mods {
    None,
    Req,
    Not,
}

/// Parses `input`; `Err` carries Lucene-like detail for the `Failed to parse query` error.
pub(crate) fn parse(input: &str, default_and: bool) -> Result<Node, String> {
    let mut parser = Parser {
        chars: input.chars().collect(),
        pos: 0,
        default_and,
        depth: 0,
    };
    let clauses = parser.clauses(false)?;
    Ok(make_bool(clauses))
}

fn make_bool(mut clauses: Vec<(Occur, Node)>) -> Node {
    if clauses.len() == 1 && clauses[0].0 != Occur::MustNot {
        return clauses.pop().expect("one clause").1;
    }
    Node::Bool(clauses)
}

struct Parser {
    chars: Vec<char>,
    pos: usize,
    default_and: bool,
    depth: usize,
}

fn is_term_char(c: char) -> bool {
    !c.is_whitespace()
        && !matches!(
            c,
            '(' | ')' | '[' | ']' | '{' | '}' | '"' | ':' | '^' | '~' | '\\'
        )
}

impl Parser {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn peek_at(&self, offset: usize) -> Option<char> {
        self.chars.get(self.pos + offset).copied()
    }

    fn skip_ws(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.pos += 1;
        }
    }

    fn error(&self, what: &str) -> String {
        let found = match self.peek() {
            Some(c) => format!("\"{c}\" at column {}", self.pos + 1),
            None => "<EOF>".to_string(),
        };
        format!("Encountered {found}: {what}")
    }

    /// A word made of term characters starting at the cursor (not consumed).
    fn peek_word(&self) -> String {
        self.chars[self.pos..]
            .iter()
            .take_while(|c| !c.is_whitespace() && !matches!(c, '(' | ')' | '"'))
            .collect()
    }

    fn clauses(&mut self, in_group: bool) -> Result<Vec<(Occur, Node)>, String> {
        let mut clauses: Vec<(Occur, Node)> = Vec::new();
        loop {
            self.skip_ws();
            match self.peek() {
                None if in_group => return Err(self.error("expected \")\"")),
                None => break,
                Some(')') if in_group => {
                    self.pos += 1;
                    break;
                }
                Some(')') => return Err(self.error("unbalanced \")\"")),
                _ => {}
            }
            let conj = self.conjunction();
            if conj != Conj::None && clauses.is_empty() {
                return Err(self.error("a query cannot start with an operator"));
            }
            self.skip_ws();
            let mods = self.modifiers();
            self.skip_ws();
            if self.peek().is_none() || (self.peek() == Some(')') && in_group) {
                return Err(self.error("expected a term after an operator"));
            }
            let node = self.clause()?;
            add_clause(&mut clauses, conj, mods, node, self.default_and);
        }
        Ok(clauses)
    }

    fn conjunction(&mut self) -> Conj {
        let word = self.peek_word();
        let conj = match word.as_str() {
            "AND" | "&&" => Conj::And,
            "OR" | "||" => Conj::Or,
            _ => return Conj::None,
        };
        self.pos += word.chars().count();
        conj
    }

    fn modifiers(&mut self) -> Mods {
        match self.peek() {
            Some('+') => {
                self.pos += 1;
                Mods::Req
            }
            Some('-') | Some('!') => {
                self.pos += 1;
                Mods::Not
            }
            _ if self.peek_word() == "NOT" => {
                self.pos += 3;
                Mods::Not
            }
            _ => Mods::None,
        }
    }

    fn clause(&mut self) -> Result<Node, String> {
        if let Some(field) = self.field_prefix() {
            self.skip_ws();
            if field == "_exists_" {
                let name = self.term_text()?;
                return Ok(Node::Field(
                    unescape(&name),
                    Box::new(Node::Leaf(Leaf::Exists)),
                ));
            }
            if field == "*"
                && self.peek() == Some('*')
                && !self.peek_at(1).is_some_and(is_term_char)
            {
                self.pos += 1;
                return self.boost(Node::MatchAll);
            }
            let value = self.value()?;
            return Ok(Node::Field(field, Box::new(value)));
        }
        self.value()
    }

    /// `name:` at the cursor: consumes it and returns the field name (escapes removed,
    /// except for `\*` which stays a wildcard).
    fn field_prefix(&mut self) -> Option<String> {
        let start = self.pos;
        let mut name = String::new();
        while let Some(c) = self.peek() {
            if c == '\\' {
                if let Some(next) = self.peek_at(1) {
                    name.push(next);
                    self.pos += 2;
                    continue;
                }
            }
            if !is_term_char(c) {
                break;
            }
            name.push(c);
            self.pos += 1;
        }
        if !name.is_empty() && self.peek() == Some(':') {
            self.pos += 1;
            return Some(name);
        }
        self.pos = start;
        None
    }

    fn value(&mut self) -> Result<Node, String> {
        let node = match self.peek() {
            Some('(') => {
                self.pos += 1;
                self.depth += 1;
                if self.depth > 64 {
                    return Err("query nested too deeply".to_string());
                }
                let clauses = self.clauses(true)?;
                self.depth -= 1;
                make_bool(clauses)
            }
            Some('"') => {
                let text = self.quoted()?;
                let slop = self.tilde().map(|n| n.unwrap_or(0.0) as u32);
                Node::Leaf(Leaf::Phrase { text, slop })
            }
            Some('[') | Some('{') => self.range()?,
            Some('>') | Some('<') => self.comparison()?,
            Some('/') => Node::Leaf(Leaf::Regex(self.regex()?)),
            _ => {
                let raw = self.term_text()?;
                if let Some(edits) = self.tilde() {
                    let edits = edits.map(|n| if n < 1.0 && n > 0.0 { 1 } else { n as u32 });
                    Node::Leaf(Leaf::Fuzzy {
                        text: unescape(&raw),
                        edits,
                    })
                } else if has_wildcard(&raw) {
                    Node::Leaf(Leaf::Wildcard(raw))
                } else {
                    Node::Leaf(Leaf::Text(unescape(&raw)))
                }
            }
        };
        self.boost(node)
    }

    /// Reads `^N` (before or after a `~`, which only terms and phrases take).
    fn boost(&mut self, node: Node) -> Result<Node, String> {
        if self.peek() != Some('^') {
            return Ok(node);
        }
        self.pos += 1;
        let number = self
            .number()
            .ok_or_else(|| self.error("expected a number after \"^\""))?;
        Ok(Node::Boost(Box::new(node), number))
    }

    /// `~` then an optional number: None when there is no `~`.
    fn tilde(&mut self) -> Option<Option<f32>> {
        if self.peek() != Some('~') {
            return None;
        }
        self.pos += 1;
        Some(self.number())
    }

    fn number(&mut self) -> Option<f32> {
        let start = self.pos;
        while self.peek().is_some_and(|c| c.is_ascii_digit() || c == '.') {
            self.pos += 1;
        }
        let text: String = self.chars[start..self.pos].iter().collect();
        text.parse().ok()
    }

    /// Term characters with escapes kept (`\:` stays two characters).
    fn term_text(&mut self) -> Result<String, String> {
        let mut raw = String::new();
        while let Some(c) = self.peek() {
            if c == '\\' {
                let next = self
                    .peek_at(1)
                    .ok_or_else(|| self.error("dangling escape"))?;
                raw.push('\\');
                raw.push(next);
                self.pos += 2;
                continue;
            }
            if !is_term_char(c) {
                break;
            }
            raw.push(c);
            self.pos += 1;
        }
        if raw.is_empty() {
            return Err(self.error("expected a term"));
        }
        Ok(raw)
    }

    fn quoted(&mut self) -> Result<String, String> {
        self.pos += 1;
        let mut text = String::new();
        loop {
            match self.peek() {
                None => return Err(self.error("unterminated phrase")),
                Some('"') => {
                    self.pos += 1;
                    return Ok(text);
                }
                Some('\\') => {
                    if let Some(next) = self.peek_at(1) {
                        text.push(next);
                    }
                    self.pos += 2;
                }
                Some(c) => {
                    text.push(c);
                    self.pos += 1;
                }
            }
        }
    }

    fn regex(&mut self) -> Result<String, String> {
        self.pos += 1;
        let mut pattern = String::new();
        loop {
            match self.peek() {
                None => return Err(self.error("unterminated regular expression")),
                Some('/') => {
                    self.pos += 1;
                    return Ok(pattern);
                }
                Some('\\') if self.peek_at(1) == Some('/') => {
                    pattern.push('/');
                    self.pos += 2;
                }
                Some(c) => {
                    pattern.push(c);
                    self.pos += 1;
                }
            }
        }
    }

    /// One bound of a range: quoted, or characters up to whitespace or a closing bracket.
    fn range_bound(&mut self) -> Result<Option<String>, String> {
        self.skip_ws();
        if self.peek() == Some('"') {
            return self.quoted().map(Some);
        }
        let mut raw = String::new();
        while let Some(c) = self.peek() {
            if c.is_whitespace() || c == ']' || c == '}' {
                break;
            }
            if c == '\\' {
                if let Some(next) = self.peek_at(1) {
                    raw.push(next);
                    self.pos += 2;
                    continue;
                }
            }
            raw.push(c);
            self.pos += 1;
        }
        if raw.is_empty() {
            return Err(self.error("expected a range bound"));
        }
        Ok((raw != "*").then_some(raw))
    }

    fn range(&mut self) -> Result<Node, String> {
        let include_lower = self.peek() == Some('[');
        self.pos += 1;
        let lower = self.range_bound()?;
        self.skip_ws();
        if self.peek_word() != "TO" {
            return Err(self.error("expected \"TO\""));
        }
        self.pos += 2;
        let upper = self.range_bound()?;
        self.skip_ws();
        let include_upper = match self.peek() {
            Some(']') => true,
            Some('}') => false,
            _ => return Err(self.error("expected \"]\" or \"}\"")),
        };
        self.pos += 1;
        Ok(Node::Leaf(Leaf::Range {
            lower,
            upper,
            include_lower,
            include_upper,
        }))
    }

    /// `>=5`, `>5`, `<=5`, `<5` after a field.
    fn comparison(&mut self) -> Result<Node, String> {
        let greater = self.peek() == Some('>');
        self.pos += 1;
        let inclusive = self.peek() == Some('=');
        if inclusive {
            self.pos += 1;
        }
        let value = if self.peek() == Some('"') {
            self.quoted()?
        } else {
            unescape(&self.term_text()?)
        };
        let value = (value != "*").then_some(value);
        Ok(Node::Leaf(if greater {
            Leaf::Range {
                lower: value,
                upper: None,
                include_lower: inclusive,
                include_upper: true,
            }
        } else {
            Leaf::Range {
                lower: None,
                upper: value,
                include_lower: true,
                include_upper: inclusive,
            }
        }))
    }
}

/// Lucene's `QueryParserBase.addClause`: how conjunctions and modifiers set occurrences.
fn add_clause(
    clauses: &mut Vec<(Occur, Node)>,
    conj: Conj,
    mods: Mods,
    node: Node,
    default_and: bool,
) {
    if let Some(last) = clauses.last_mut() {
        if conj == Conj::And && last.0 != Occur::MustNot {
            last.0 = Occur::Must;
        }
        if default_and && conj == Conj::Or && last.0 != Occur::MustNot {
            last.0 = Occur::Should;
        }
    }
    let prohibited = mods == Mods::Not;
    let required = if default_and {
        !prohibited && conj != Conj::Or
    } else {
        mods == Mods::Req || (conj == Conj::And && !prohibited)
    };
    let occur = if prohibited {
        Occur::MustNot
    } else if required {
        Occur::Must
    } else {
        Occur::Should
    };
    clauses.push((occur, node));
}

/// Whether a raw term has an unescaped `*` or `?`.
pub(crate) fn has_wildcard(raw: &str) -> bool {
    let mut escaped = false;
    for c in raw.chars() {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == '*' || c == '?' {
            return true;
        }
    }
    false
}

pub(crate) fn unescape(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(next) = chars.next() {
                out.push(next);
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(s: &str) -> Node {
        Node::Leaf(Leaf::Text(s.to_string()))
    }

    #[test]
    fn default_or_makes_plain_terms_optional() {
        assert_eq!(
            parse("a b", false).unwrap(),
            Node::Bool(vec![(Occur::Should, text("a")), (Occur::Should, text("b"))])
        );
        assert_eq!(parse("a", false).unwrap(), text("a"));
    }

    #[test]
    fn and_or_not_follow_lucene_precedence_rules() {
        assert_eq!(
            parse("a AND b OR c", false).unwrap(),
            Node::Bool(vec![
                (Occur::Must, text("a")),
                (Occur::Must, text("b")),
                (Occur::Should, text("c"))
            ])
        );
        assert_eq!(
            parse("a OR b", true).unwrap(),
            Node::Bool(vec![(Occur::Should, text("a")), (Occur::Should, text("b"))])
        );
        assert_eq!(
            parse("a b", true).unwrap(),
            Node::Bool(vec![(Occur::Must, text("a")), (Occur::Must, text("b"))])
        );
        assert_eq!(
            parse("+a -b !c NOT d", false).unwrap(),
            Node::Bool(vec![
                (Occur::Must, text("a")),
                (Occur::MustNot, text("b")),
                (Occur::MustNot, text("c")),
                (Occur::MustNot, text("d")),
            ])
        );
        assert_eq!(
            parse("a && NOT b", false).unwrap(),
            Node::Bool(vec![(Occur::Must, text("a")), (Occur::MustNot, text("b"))])
        );
    }

    #[test]
    fn fields_groups_phrases_and_boosts() {
        assert_eq!(
            parse("title:(quick fox)^2", false).unwrap(),
            Node::Field(
                "title".into(),
                Box::new(Node::Boost(
                    Box::new(Node::Bool(vec![
                        (Occur::Should, text("quick")),
                        (Occur::Should, text("fox"))
                    ])),
                    2.0
                ))
            )
        );
        assert_eq!(
            parse("body:\"lazy dog\"~2", false).unwrap(),
            Node::Field(
                "body".into(),
                Box::new(Node::Leaf(Leaf::Phrase {
                    text: "lazy dog".into(),
                    slop: Some(2)
                }))
            )
        );
        assert_eq!(parse("*:*", false).unwrap(), Node::MatchAll);
        assert_eq!(
            parse("_exists_:title", false).unwrap(),
            Node::Field("title".into(), Box::new(Node::Leaf(Leaf::Exists)))
        );
        assert_eq!(parse(r"a\:b", false).unwrap(), text("a:b"));
    }

    #[test]
    fn wildcards_fuzzy_regex_and_ranges() {
        assert_eq!(
            parse("qu?ck*", false).unwrap(),
            Node::Leaf(Leaf::Wildcard("qu?ck*".into()))
        );
        assert_eq!(parse(r"a\*", false).unwrap(), text("a*"));
        assert_eq!(
            parse("quikc~1", false).unwrap(),
            Node::Leaf(Leaf::Fuzzy {
                text: "quikc".into(),
                edits: Some(1)
            })
        );
        assert_eq!(
            parse("quikc~", false).unwrap(),
            Node::Leaf(Leaf::Fuzzy {
                text: "quikc".into(),
                edits: None
            })
        );
        assert_eq!(
            parse("/jo.n/", false).unwrap(),
            Node::Leaf(Leaf::Regex("jo.n".into()))
        );
        assert_eq!(
            parse("n:[1 TO *}", false).unwrap(),
            Node::Field(
                "n".into(),
                Box::new(Node::Leaf(Leaf::Range {
                    lower: Some("1".into()),
                    upper: None,
                    include_lower: true,
                    include_upper: false
                }))
            )
        );
        assert_eq!(
            parse("n:>=5", false).unwrap(),
            Node::Field(
                "n".into(),
                Box::new(Node::Leaf(Leaf::Range {
                    lower: Some("5".into()),
                    upper: None,
                    include_lower: true,
                    include_upper: true
                }))
            )
        );
        assert_eq!(
            parse("d:[\"2020-01-01\" TO now-1d/d]", false).unwrap(),
            Node::Field(
                "d".into(),
                Box::new(Node::Leaf(Leaf::Range {
                    lower: Some("2020-01-01".into()),
                    upper: Some("now-1d/d".into()),
                    include_lower: true,
                    include_upper: true
                }))
            )
        );
    }

    #[test]
    fn syntax_errors_are_reported() {
        for bad in [
            "(a b", "a)", "\"open", "AND a", "a AND", "n:[1 2]", "title:", "a^x",
        ] {
            assert!(parse(bad, false).is_err(), "{bad} should not parse");
        }
    }
}
