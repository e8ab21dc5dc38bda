//! The tokens of DynamoDB's expression grammar, shared by the checks of an
//! update job's expressions (`expr.rs`) and of its idempotency (`repeat.rs`).

/// A token of a DynamoDB expression, with its byte offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tok<'a> {
    /// `#name`: an attribute-name placeholder.
    Name(&'a str),
    /// `:value`: an attribute-value placeholder.
    Value(&'a str),
    /// A bare word: an attribute name, a function, a keyword.
    Word(&'a str),
    /// Digits (a list index).
    Number(&'a str),
    /// Punctuation and operators: `( ) , . [ ] = <> < <= > >= + -`.
    Punct(&'a str),
}

/// A mistake at a byte offset of the expression.
pub(crate) type ExprError = (usize, String);

fn is_word_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Splits an expression into tokens.
pub(crate) fn tokens(text: &str) -> Result<Vec<(Tok<'_>, usize)>, ExprError> {
    let mut out = Vec::new();
    let mut chars = text.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        let word_end = |from: usize| {
            text[from..]
                .find(|c: char| !is_word_char(c))
                .map_or(text.len(), |n| from + n)
        };
        let tok = match c {
            c if c.is_whitespace() => continue,
            '#' | ':' => {
                let end = word_end(at + 1);
                if end == at + 1 {
                    return Err((
                        at,
                        format!(
                            "`{c}` must be followed by a placeholder name (letters, digits, _)"
                        ),
                    ));
                }
                let word = &text[at..end];
                if c == '#' {
                    Tok::Name(word)
                } else {
                    Tok::Value(word)
                }
            }
            c if c.is_ascii_digit() => Tok::Number(&text[at..word_end(at)]),
            c if is_word_char(c) => Tok::Word(&text[at..word_end(at)]),
            '<' | '>' => {
                let two = text.get(at..at + 2).unwrap_or("");
                match two {
                    "<>" | "<=" | ">=" => Tok::Punct(two),
                    _ => Tok::Punct(&text[at..at + 1]),
                }
            }
            '(' | ')' | ',' | '.' | '[' | ']' | '=' | '+' | '-' => Tok::Punct(&text[at..at + 1]),
            other => return Err((at, format!("unexpected character {other:?}"))),
        };
        let len = match tok {
            Tok::Name(s) | Tok::Value(s) | Tok::Word(s) | Tok::Number(s) | Tok::Punct(s) => s.len(),
        };
        while chars.peek().is_some_and(|(i, _)| *i < at + len) {
            chars.next();
        }
        out.push((tok, at));
    }
    Ok(out)
}

/// The clauses of an update expression.
pub(crate) const CLAUSES: [&str; 4] = ["SET", "REMOVE", "ADD", "DELETE"];
