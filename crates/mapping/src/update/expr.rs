//! Just enough of DynamoDB's expression grammar to check an update job before
//! any call: the placeholders an expression uses, the top-level attributes an
//! update expression writes, and whether applying it twice differs from
//! applying it once. DynamoDB itself still parses every expression.

pub(crate) use super::token::{tokens, ExprError, Tok, CLAUSES};

/// The placeholders an expression uses, each with the offset of its first use.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Uses {
    /// `#name` placeholders.
    pub names: Vec<(String, usize)>,
    /// `:value` placeholders.
    pub values: Vec<(String, usize)>,
}

impl Uses {
    pub(crate) fn of(tokens: &[(Tok<'_>, usize)]) -> Uses {
        let mut uses = Uses::default();
        for (tok, at) in tokens {
            let (list, name) = match tok {
                Tok::Name(n) => (&mut uses.names, n),
                Tok::Value(v) => (&mut uses.values, v),
                _ => continue,
            };
            if !list.iter().any(|(seen, _)| seen == name) {
                list.push((name.to_string(), *at));
            }
        }
        uses
    }
}

/// Words of the expression grammar that are reserved words too.
const SYNTAX: [&str; 9] = [
    "AND", "OR", "NOT", "BETWEEN", "IN", "SET", "REMOVE", "ADD", "DELETE",
];

/// The first bare word used as an attribute name that DynamoDB reserves
/// (a word before `(` is a function, not a name), with its offset.
pub(crate) fn reserved_name<'a>(tokens: &[(Tok<'a>, usize)]) -> Option<(&'a str, usize)> {
    tokens.iter().enumerate().find_map(|(i, (tok, at))| {
        let Tok::Word(w) = tok else { return None };
        let call = matches!(tokens.get(i + 1), Some((Tok::Punct("("), _)));
        let syntax = SYNTAX.iter().any(|k| k.eq_ignore_ascii_case(w));
        (!call && !syntax && super::reserved::is_reserved(w)).then_some((*w, *at))
    })
}

/// One action of an update expression simple enough for sql2ddb to apply
/// itself (`mode = "batch-put"`): the attribute as written (`#st`, `note`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SimpleAction<'a> {
    /// `SET attr = :value`.
    Set(&'a str, &'a str),
    /// `REMOVE attr`.
    Remove(&'a str),
}

/// The actions of an update expression that only sets top-level attributes
/// to values and removes top-level attributes; anything else is an error at
/// its offset.
pub(crate) fn simple_actions<'a>(
    tokens: &[(Tok<'a>, usize)],
) -> Result<Vec<SimpleAction<'a>>, ExprError> {
    let mut out = Vec::new();
    let mut clause = "";
    let mut action: Vec<(Tok<'a>, usize)> = Vec::new();
    let flush = |clause: &str,
                 action: &mut Vec<(Tok<'a>, usize)>,
                 out: &mut Vec<SimpleAction<'a>>| {
        let name = |t: &Tok<'a>| match t {
            Tok::Name(n) | Tok::Word(n) => Some(*n),
            _ => None,
        };
        let found = match (clause, action.as_slice()) {
            ("SET", [(a, _), (Tok::Punct("="), _), (Tok::Value(v), _)]) => {
                name(a).map(|a| SimpleAction::Set(a, v))
            }
            ("REMOVE", [(a, _)]) => name(a).map(SimpleAction::Remove),
            _ => None,
        };
        let at = action.first().map_or(0, |(_, at)| *at);
        action.clear();
        match found {
            Some(a) => {
                out.push(a);
                Ok(())
            }
            None => Err((at, "with mode = \"batch-put\", set may only SET top-level attributes to :values and REMOVE top-level attributes".to_string())),
        }
    };
    for &(tok, at) in tokens {
        match tok {
            Tok::Word(w)
                if CLAUSES.iter().any(|c| c.eq_ignore_ascii_case(w)) && action.is_empty() =>
            {
                clause = CLAUSES
                    .iter()
                    .find(|c| c.eq_ignore_ascii_case(w))
                    .copied()
                    .unwrap_or("");
            }
            Tok::Word(w) if CLAUSES.iter().any(|c| c.eq_ignore_ascii_case(w)) => {
                flush(clause, &mut action, &mut out)?;
                clause = CLAUSES
                    .iter()
                    .find(|c| c.eq_ignore_ascii_case(w))
                    .copied()
                    .unwrap_or("");
            }
            Tok::Punct(",") => flush(clause, &mut action, &mut out)?,
            _ => action.push((tok, at)),
        }
    }
    if !action.is_empty() {
        flush(clause, &mut action, &mut out)?;
    }
    Ok(out)
}

/// What an update expression writes.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct UpdateShape {
    /// The top-level attribute of each action's path, as written (`#st`,
    /// `retry_count`), with its offset.
    pub targets: Vec<(String, usize)>,
    /// Why applying it twice can differ from once (it depends on the item's
    /// current value: see [`super::repeat`]), with the offset; `None` for
    /// an idempotent expression.
    pub not_idempotent: Option<(String, usize)>,
    /// Byte offset just after the `SET` keyword, when there is a SET clause.
    pub set_end: Option<usize>,
}

/// Reads the clauses and actions of an update expression
/// (`SET a = :x, b = b + :y REMOVE c ADD d :n DELETE e :s`).
pub(crate) fn update_shape(tokens: &[(Tok<'_>, usize)]) -> Result<UpdateShape, ExprError> {
    let mut shape = UpdateShape::default();
    let mut clause: Option<&str> = None;
    let mut seen: Vec<&str> = Vec::new();
    let mut depth = 0i32;
    let mut expect_path = false;
    let mut prev: Option<Tok<'_>> = None;
    for &(tok, at) in tokens {
        let clause_word = match tok {
            Tok::Word(w) if depth == 0 && prev != Some(Tok::Punct(".")) => {
                CLAUSES.iter().find(|c| c.eq_ignore_ascii_case(w)).copied()
            }
            _ => None,
        };
        if let Some(c) = clause_word {
            if expect_path {
                return Err((at, format!("expected an attribute name before {c}")));
            }
            if seen.contains(&c) {
                return Err((at, format!("the {c} clause may appear only once")));
            }
            seen.push(c);
            clause = Some(c);
            expect_path = true;
            if c == "SET" {
                shape.set_end = Some(at + 3);
            }
        } else if clause.is_none() {
            return Err((
                at,
                "an update expression starts with SET, REMOVE, ADD or DELETE".into(),
            ));
        } else if expect_path {
            match tok {
                Tok::Name(n) | Tok::Word(n) => shape.targets.push((n.to_string(), at)),
                _ => return Err((at, "expected an attribute name or #placeholder".into())),
            }
            expect_path = false;
        } else {
            match tok {
                Tok::Punct("(") | Tok::Punct("[") => depth += 1,
                Tok::Punct(")") | Tok::Punct("]") => depth -= 1,
                Tok::Punct(",") if depth == 0 => expect_path = true,
                _ => {}
            }
        }
        prev = Some(tok);
    }
    if expect_path {
        let end = tokens.last().map_or(0, |(_, at)| *at);
        return Err((
            end,
            "the expression ends where an attribute name was expected".into(),
        ));
    }
    if clause.is_none() {
        return Err((0, "the update expression is empty".into()));
    }
    shape.not_idempotent = super::repeat::why_not_idempotent(tokens);
    Ok(shape)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(text: &str) -> Result<UpdateShape, ExprError> {
        update_shape(&tokens(text)?)
    }

    #[test]
    fn tokens_and_placeholders() {
        let t = tokens("begins_with(SK, :o) AND #st <> :new AND a.b[2] >= :n").unwrap();
        let uses = Uses::of(&t);
        assert_eq!(uses.names, vec![("#st".to_string(), 24)]);
        let values: Vec<&str> = uses.values.iter().map(|(v, _)| v.as_str()).collect();
        assert_eq!(values, [":o", ":new", ":n"]);
        assert!(t.contains(&(Tok::Punct("<>"), 28)));
        assert_eq!(tokens("a = ;").unwrap_err().0, 4);
        assert!(tokens("a = :").unwrap_err().1.contains("placeholder name"));
    }

    #[test]
    fn targets_of_each_clause() {
        let s = shape("SET #st = :closed, closed_at = :now REMOVE retry_count, x.y DELETE tags :t")
            .unwrap();
        let targets: Vec<&str> = s.targets.iter().map(|(t, _)| t.as_str()).collect();
        assert_eq!(targets, ["#st", "closed_at", "retry_count", "x", "tags"]);
        assert_eq!(s.not_idempotent.unwrap().0, "DELETE from a set");
        let s = shape("SET #st = :closed, closed_at = :now REMOVE retry_count, x.y").unwrap();
        assert_eq!(s.not_idempotent, None);
        let s = shape("set a = if_not_exists(a, :z), b = list_append(b, :l)").unwrap();
        assert_eq!(s.not_idempotent.unwrap().0, "list_append");
    }

    #[test]
    fn what_is_not_idempotent() {
        assert_eq!(
            shape("ADD visits :one").unwrap().not_idempotent.unwrap().0,
            "ADD"
        );
        assert_eq!(
            shape("SET n = n + :x").unwrap().not_idempotent.unwrap(),
            ("`+` in SET".to_string(), 10)
        );
        assert!(shape("SET a = :x REMOVE b")
            .unwrap()
            .not_idempotent
            .is_none());
    }

    #[test]
    fn reserved_words_as_names() {
        let first = |text| reserved_name(&tokens(text).unwrap());
        assert_eq!(
            first("size(tags) > :n AND Status = :s"),
            Some(("Status", 20))
        );
        assert_eq!(first("SET #s = :s REMOVE a.b"), None);
        assert_eq!(first("a BETWEEN :x AND :y OR NOT contains(b, :c)"), None);
    }

    #[test]
    fn simple_actions_for_batch_put() {
        let simple = |text| simple_actions(&tokens(text).unwrap());
        assert_eq!(
            simple("SET #st = :c, note = :n REMOVE a, b").unwrap(),
            vec![
                SimpleAction::Set("#st", ":c"),
                SimpleAction::Set("note", ":n"),
                SimpleAction::Remove("a"),
                SimpleAction::Remove("b"),
            ]
        );
        for bad in [
            "SET a = a + :x",
            "SET a.b = :x",
            "ADD n :one",
            "REMOVE a[0]",
            "SET a = b",
        ] {
            assert!(simple(bad).unwrap_err().1.contains("batch-put"), "{bad}");
        }
    }

    #[test]
    fn malformed_update_expressions() {
        assert!(shape("a = :x").unwrap_err().1.contains("starts with SET"));
        assert!(shape("SET a = :x SET b = :y")
            .unwrap_err()
            .1
            .contains("only once"));
        assert!(shape("SET").unwrap_err().1.contains("attribute name"));
        assert!(shape("SET a = :x,")
            .unwrap_err()
            .1
            .contains("attribute name"));
        assert!(shape("").unwrap_err().1.contains("empty"));
    }
}
