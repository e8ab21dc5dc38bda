//! Whether an update expression applied a second time to an item can leave
//! it other than once: the expression's result depends on the item's
//! current value. Such an update is applied at most once per item per run,
//! by the run's marker ([`super::RUN_MARKER`]); the others (values set,
//! attributes removed, by name) give the same item however often they land.
//!
//! What depends on the current value, in order of precedence when an
//! expression has several (the first is the reason given):
//! - an `ADD` clause (a number grows, a set gains elements);
//! - a `DELETE` clause (elements taken from a set);
//! - `list_append(…)` and `if_not_exists(…)` in `SET`;
//! - `+` or `-` in `SET`;
//! - a list index in the path an action writes or removes (`REMOVE tags[0]`
//!   removes another element each time; `SET l[9] = :x` past the end appends);
//! - an attribute read on the right of `SET` (`SET a = b, b = a` swaps back).

use super::token::{Tok, CLAUSES};

/// One reason; the variants in order of precedence.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Reason {
    Add,
    Delete,
    ListAppend,
    IfNotExists,
    Arithmetic(String),
    Index(String),
    Reads(String),
}

impl Reason {
    /// The lower, the more it says.
    fn rank(&self) -> u8 {
        match self {
            Reason::Add => 0,
            Reason::Delete => 1,
            Reason::ListAppend => 2,
            Reason::IfNotExists => 3,
            Reason::Arithmetic(_) => 4,
            Reason::Index(_) => 5,
            Reason::Reads(_) => 6,
        }
    }

    fn text(self) -> String {
        match self {
            Reason::Add => "ADD".into(),
            Reason::Delete => "DELETE from a set".into(),
            Reason::ListAppend => "list_append".into(),
            Reason::IfNotExists => "if_not_exists".into(),
            Reason::Arithmetic(op) => format!("`{op}` in SET"),
            Reason::Index(path) => format!("a list index, {path}"),
            Reason::Reads(path) => format!("SET reads {path}"),
        }
    }
}

/// Which side of an action a token is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    /// The path the action writes, removes, adds to or deletes from.
    Target,
    /// What is written: SET's operand, ADD's and DELETE's value.
    Operand,
}

/// Why applying the update expression twice can differ from once, with the
/// offset of what says so; `None` for an idempotent expression. The tokens
/// are those of an expression [`super::expr::update_shape`] accepted.
pub(crate) fn why_not_idempotent(tokens: &[(Tok<'_>, usize)]) -> Option<(String, usize)> {
    let mut found: Option<(Reason, usize)> = None;
    let mut note = |reason: Reason, at: usize| {
        if found.as_ref().is_none_or(|(r, _)| reason.rank() < r.rank()) {
            found = Some((reason, at));
        }
    };
    let mut clause = "";
    let mut side = Side::Target;
    let mut action_start = 0;
    let mut depth = 0i32;
    for (i, &(tok, at)) in tokens.iter().enumerate() {
        let prev = i.checked_sub(1).map(|p| tokens[p].0);
        let next = tokens.get(i + 1).map(|(t, _)| *t);
        let clause_word = match tok {
            Tok::Word(w) if depth == 0 && prev != Some(Tok::Punct(".")) => {
                CLAUSES.iter().find(|c| c.eq_ignore_ascii_case(w)).copied()
            }
            _ => None,
        };
        if let Some(c) = clause_word {
            clause = c;
            (side, action_start) = (Side::Target, i + 1);
            match c {
                "ADD" => note(Reason::Add, at),
                "DELETE" => note(Reason::Delete, at),
                _ => {}
            }
            continue;
        }
        match tok {
            Tok::Punct(",") if depth == 0 => {
                (side, action_start) = (Side::Target, i + 1);
                continue;
            }
            Tok::Punct("[") => {
                if side == Side::Target {
                    note(Reason::Index(path_text(tokens, action_start, i)), at);
                }
                depth += 1;
                continue;
            }
            Tok::Punct("(") => {
                depth += 1;
                continue;
            }
            Tok::Punct("]" | ")") => {
                depth -= 1;
                continue;
            }
            _ => {}
        }
        match (tok, side) {
            // SET's `=`, or the value of ADD and DELETE, ends the path.
            (Tok::Punct("=") | Tok::Value(_), Side::Target) if depth == 0 => side = Side::Operand,
            (Tok::Punct(op @ ("+" | "-")), Side::Operand) if clause == "SET" => {
                note(Reason::Arithmetic(op.to_string()), at);
            }
            (Tok::Word(f), Side::Operand) if next == Some(Tok::Punct("(")) => {
                if f.eq_ignore_ascii_case("list_append") {
                    note(Reason::ListAppend, at);
                } else if f.eq_ignore_ascii_case("if_not_exists") {
                    note(Reason::IfNotExists, at);
                }
            }
            // A path's first name: what follows a `.` belongs to it.
            (Tok::Name(path) | Tok::Word(path), Side::Operand)
                if clause == "SET" && prev != Some(Tok::Punct(".")) =>
            {
                note(Reason::Reads(path.to_string()), at);
            }
            _ => {}
        }
    }
    found.map(|(reason, at)| (reason.text(), at))
}

/// The path of an action up to its list index opened at `bracket`, that
/// index included: `tags[0]`, `a.b[2]`.
fn path_text(tokens: &[(Tok<'_>, usize)], from: usize, bracket: usize) -> String {
    let mut out = String::new();
    for (i, (tok, _)) in tokens.iter().enumerate().skip(from) {
        let (Tok::Name(s) | Tok::Value(s) | Tok::Word(s) | Tok::Number(s) | Tok::Punct(s)) = tok;
        out.push_str(s);
        if i > bracket && *tok == Tok::Punct("]") {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::token::tokens;
    use super::*;

    /// The reason an expression is not idempotent (each one here is an
    /// update expression `expr.rs` accepts).
    fn why(text: &str) -> Option<(String, usize)> {
        let toks = tokens(text).unwrap();
        why_not_idempotent(&toks)
    }

    fn reason(text: &str) -> Option<String> {
        why(text).map(|(r, _)| r)
    }

    #[test]
    fn values_set_and_attributes_removed_by_name_are_idempotent() {
        for text in [
            "SET a = :x",
            "SET #st = :closed, closed_at = :now REMOVE retry_count",
            "SET a.b.c = :x, #m.#k = :y",
            "REMOVE a, b.c, #d",
            "remove x set y = :y",
            // A clause keyword used as a nested attribute name is a name.
            "SET a.add = :x",
        ] {
            assert_eq!(why(text), None, "{text}");
        }
    }

    #[test]
    fn each_construct_that_reads_the_item_is_named() {
        for (text, want) in [
            ("ADD visits :one", "ADD"),
            ("DELETE tags :gone", "DELETE from a set"),
            ("SET l = list_append(l, :x)", "list_append"),
            ("SET l = list_append(:x, :y)", "list_append"),
            ("SET a = if_not_exists(a, :zero)", "if_not_exists"),
            ("SET n = n + :one", "`+` in SET"),
            ("SET n = :max - n", "`-` in SET"),
            ("REMOVE tags[0]", "a list index, tags[0]"),
            ("REMOVE a.b[2].c", "a list index, a.b[2]"),
            ("SET l[9] = :x", "a list index, l[9]"),
            ("SET #l[0] = :x", "a list index, #l[0]"),
            ("SET a = b, b = a", "SET reads b"),
            ("SET a = #b", "SET reads #b"),
            ("SET copy = m.inner[1]", "SET reads m"),
        ] {
            assert_eq!(reason(text).as_deref(), Some(want), "{text}");
        }
    }

    #[test]
    fn the_reason_given_is_the_most_telling_with_its_offset() {
        assert_eq!(why("SET n = n + :x"), Some(("`+` in SET".into(), 10)));
        assert_eq!(
            why("SET a = if_not_exists(a, :z), b = list_append(b, :l)"),
            Some(("list_append".into(), 34))
        );
        assert_eq!(
            why("SET a = b REMOVE tags[0] ADD n :one"),
            Some(("ADD".into(), 25))
        );
        assert_eq!(
            why("REMOVE x[1], y[0] SET a = b").map(|(r, _)| r),
            Some("a list index, x[1]".into())
        );
        // The first of two of a kind.
        assert_eq!(why("SET a = b - :x, c = c + :y").unwrap().1, 10);
    }

    #[test]
    fn a_value_that_looks_like_a_name_is_no_read() {
        // Placeholders of values, and numbers inside a list index, read nothing.
        assert_eq!(why("SET a = :b, c = :d"), None);
        assert_eq!(
            reason("SET a = :b REMOVE l[3]").unwrap(),
            "a list index, l[3]"
        );
    }
}
