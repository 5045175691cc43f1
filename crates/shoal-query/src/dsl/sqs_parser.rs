//! The syntax of `simple_query_string` (Lucene's `SimpleQueryParser`): `+` (AND), `|` (OR),
//! `-` (NOT), `"phrase"`, `prefix*`, `(` `)`, `term~N` (fuzzy) and `"phrase"~N` (slop), `\`
//! escapes. It never fails: malformed input is read as well as it can be.

use tantivy::query::Occur;

use super::qs_parser::{Leaf, Node};

struct State {
    top: Option<Node>,
    current: Option<Occur>,
    previous: Option<Occur>,
    not: usize,
}

/// Parses `input`; `None` when it holds no clause at all.
pub(crate) fn parse(input: &str, default_and: bool) -> Option<Node> {
    let chars: Vec<char> = input.chars().collect();
    parse_chars(&chars, default_and, 0)
}

fn parse_chars(chars: &[char], default_and: bool, depth: usize) -> Option<Node> {
    let default_op = if default_and {
        Occur::Must
    } else {
        Occur::Should
    };
    let mut state = State {
        top: None,
        current: None,
        previous: None,
        not: 0,
    };
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let branch = match c {
            '(' => {
                let (inner, next) = sub_query(chars, i + 1);
                i = next;
                if depth > 32 {
                    None
                } else {
                    parse_chars(inner, default_and, depth + 1)
                }
            }
            ')' => {
                i += 1;
                continue;
            }
            '"' => {
                let (text, next) = phrase(chars, i + 1);
                i = next;
                let (slop, next) = tilde_number(chars, i);
                i = next;
                Some(Node::Leaf(Leaf::Phrase {
                    text,
                    slop: slop.map(|s| s.unwrap_or(0)),
                }))
            }
            '+' => {
                state.current = Some(Occur::Must);
                i += 1;
                continue;
            }
            '|' => {
                state.current = Some(Occur::Should);
                i += 1;
                continue;
            }
            '-' => {
                state.not += 1;
                i += 1;
                continue;
            }
            c if c.is_whitespace() => {
                i += 1;
                continue;
            }
            _ => {
                let (leaf, next) = token(chars, i);
                i = next;
                leaf.map(Node::Leaf)
            }
        };
        build_tree(&mut state, branch, default_op);
    }
    state.top
}

/// Lucene's `buildQueryTree`: a change of operator wraps what was parsed so far.
fn build_tree(state: &mut State, branch: Option<Node>, default_op: Occur) {
    let Some(mut branch) = branch else {
        state.not = 0;
        return;
    };
    if state.not % 2 == 1 {
        branch = Node::Bool(vec![
            (Occur::MustNot, branch),
            (Occur::Should, Node::MatchAll),
        ]);
    }
    state.not = 0;
    match state.top.take() {
        None => state.top = Some(branch),
        Some(top) => {
            let op = state.current.unwrap_or(default_op);
            let mut clauses = match top {
                Node::Bool(clauses) if state.previous == Some(op) => clauses,
                other => vec![(op, other)],
            };
            clauses.push((op, branch));
            state.top = Some(Node::Bool(clauses));
            state.previous = Some(op);
        }
    }
    state.current = None;
}

/// The characters up to the matching `)` (or the end), and the index after it.
fn sub_query(chars: &[char], start: usize) -> (&[char], usize) {
    let mut depth = 1;
    let mut i = start;
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 1,
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return (&chars[start..i], i + 1);
                }
            }
            _ => {}
        }
        i += 1;
    }
    (&chars[start..chars.len().min(i)], chars.len())
}

fn phrase(chars: &[char], start: usize) -> (String, usize) {
    let mut text = String::new();
    let mut i = start;
    while i < chars.len() {
        match chars[i] {
            '\\' if i + 1 < chars.len() => {
                text.push(chars[i + 1]);
                i += 2;
                continue;
            }
            '"' => return (text, i + 1),
            c => text.push(c),
        }
        i += 1;
    }
    (text, i)
}

/// `~` followed by optional digits: `(Some(Some(n)), next)`, `(Some(None), next)` for a bare
/// `~`, `(None, start)` without `~`.
fn tilde_number(chars: &[char], start: usize) -> (Option<Option<u32>>, usize) {
    if chars.get(start) != Some(&'~') {
        return (None, start);
    }
    let mut i = start + 1;
    let digits_start = i;
    while i < chars.len() && chars[i].is_ascii_digit() {
        i += 1;
    }
    let digits: String = chars[digits_start..i].iter().collect();
    (Some(digits.parse().ok()), i)
}

fn token_finished(c: char) -> bool {
    c.is_whitespace() || matches!(c, '"' | '|' | '+' | '(' | ')')
}

fn token(chars: &[char], start: usize) -> (Option<Leaf>, usize) {
    let mut text = String::new();
    let mut i = start;
    let mut prefix = false;
    let mut fuzzy = None;
    while i < chars.len() {
        let c = chars[i];
        if c == '\\' {
            if let Some(&next) = chars.get(i + 1) {
                text.push(next);
            }
            i += 2;
            continue;
        }
        if token_finished(c) {
            break;
        }
        if c == '~' {
            let (n, next) = tilde_number(chars, i);
            fuzzy = n;
            i = next;
            // Anything glued after the fuzziness ends the token.
            while i < chars.len() && !token_finished(chars[i]) {
                i += 1;
            }
            break;
        }
        if c == '*' && (i + 1 == chars.len() || token_finished(chars[i + 1])) && !text.is_empty() {
            prefix = true;
            i += 1;
            break;
        }
        text.push(c);
        i += 1;
    }
    if text.is_empty() {
        return (None, i.max(start + 1));
    }
    let leaf = match (fuzzy, prefix) {
        (Some(edits), _) => Leaf::Fuzzy { text, edits },
        (None, true) => Leaf::Prefix(text),
        (None, false) => Leaf::Text(text),
    };
    (Some(leaf), i)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(s: &str) -> Node {
        Node::Leaf(Leaf::Text(s.to_string()))
    }

    #[test]
    fn whitespace_uses_the_default_operator() {
        assert_eq!(
            parse("a b", false),
            Some(Node::Bool(vec![
                (Occur::Should, text("a")),
                (Occur::Should, text("b"))
            ]))
        );
        assert_eq!(
            parse("a b", true),
            Some(Node::Bool(vec![
                (Occur::Must, text("a")),
                (Occur::Must, text("b"))
            ]))
        );
    }

    #[test]
    fn operators_change_wrap_the_tree() {
        assert_eq!(
            parse("a b +c", false),
            Some(Node::Bool(vec![
                (
                    Occur::Must,
                    Node::Bool(vec![(Occur::Should, text("a")), (Occur::Should, text("b"))])
                ),
                (Occur::Must, text("c")),
            ]))
        );
        assert_eq!(
            parse("a | -b", true),
            Some(Node::Bool(vec![
                (Occur::Should, text("a")),
                (
                    Occur::Should,
                    Node::Bool(vec![
                        (Occur::MustNot, text("b")),
                        (Occur::Should, Node::MatchAll)
                    ])
                ),
            ]))
        );
    }

    #[test]
    fn phrases_prefixes_fuzzy_and_groups() {
        assert_eq!(
            parse("\"a b\"~2", false),
            Some(Node::Leaf(Leaf::Phrase {
                text: "a b".into(),
                slop: Some(2)
            }))
        );
        assert_eq!(
            parse("qui*", false),
            Some(Node::Leaf(Leaf::Prefix("qui".into())))
        );
        assert_eq!(
            parse("quikc~1", false),
            Some(Node::Leaf(Leaf::Fuzzy {
                text: "quikc".into(),
                edits: Some(1)
            }))
        );
        assert_eq!(
            parse("(a | b) +c", false),
            Some(Node::Bool(vec![
                (
                    Occur::Must,
                    Node::Bool(vec![(Occur::Should, text("a")), (Occur::Should, text("b"))])
                ),
                (Occur::Must, text("c")),
            ]))
        );
    }

    #[test]
    fn malformed_input_never_fails() {
        for input in [
            "(((",
            "\"unterminated",
            ")))",
            "+",
            "-",
            "~~~",
            "a ~ b",
            "\\",
            "*",
            "( | )",
            "\"\"",
        ] {
            let _ = parse(input, false);
        }
        assert_eq!(parse("(a", false), Some(text("a")));
        assert_eq!(
            parse("\"a b", false),
            Some(Node::Leaf(Leaf::Phrase {
                text: "a b".into(),
                slop: None
            }))
        );
        assert_eq!(parse("", false), None);
    }
}
