//! SQL text building shared by the dialects: identifier quoting, the entity's
//! relation, and the keyset page statements.

use crate::{Dialect, Relation, SourceError};

/// Alias of the entity's relation in every generated statement. Columns are
/// always referred to as `t."col"`, so an `ORDER BY` can never resolve to a
/// select-list expression of the same name (PostgreSQL and MySQL prefer output
/// names for bare identifiers in `ORDER BY`).
pub(crate) const ALIAS: &str = "t";

/// Quotes one identifier for the dialect.
pub(crate) fn quote_ident(dialect: Dialect, name: &str) -> String {
    match dialect {
        Dialect::MySql => format!("`{}`", name.replace('`', "``")),
        Dialect::Postgres | Dialect::Sqlite => format!("\"{}\"", name.replace('"', "\"\"")),
    }
}

/// `schema.table` → (Some(schema), table); `table` → (None, table).
pub(crate) fn split_table(name: &str) -> (Option<&str>, &str) {
    match name.split_once('.') {
        Some((schema, table)) => (Some(schema), table),
        None => (None, name),
    }
}

/// A table name (`table` or `schema.table`), quoted part by part for the
/// dialect.
pub fn quote_table(dialect: Dialect, name: &str) -> String {
    match split_table(name) {
        (Some(schema), table) => format!(
            "{}.{}",
            quote_ident(dialect, schema),
            quote_ident(dialect, table)
        ),
        (None, table) => quote_ident(dialect, table),
    }
}

/// The query text of a query entity, without trailing `;` so it can be wrapped.
pub(crate) fn query_body(query: &str) -> Result<&str, SourceError> {
    let body = query
        .trim()
        .trim_end_matches(|c: char| c == ';' || c.is_whitespace());
    if body.is_empty() {
        return Err(SourceError::config("query entity has an empty query"));
    }
    Ok(body)
}

/// The `FROM` item of an entity: `"s"."t" AS t` or `(<query>) AS t`.
pub(crate) fn relation(dialect: Dialect, from: &Relation<'_>) -> Result<String, SourceError> {
    Ok(match from {
        Relation::Table(name) => {
            if name.trim().is_empty() {
                return Err(SourceError::config("empty table name"));
            }
            format!("{} AS {ALIAS}", quote_table(dialect, name))
        }
        Relation::Query(q) => format!("({}) AS {ALIAS}", query_body(q)?),
    })
}

/// `t."col"` for the dialect.
pub(crate) fn column_ref(dialect: Dialect, name: &str) -> String {
    format!("{ALIAS}.{}", quote_ident(dialect, name))
}

/// A statement that returns the entity's columns and no rows, for describing.
pub(crate) fn describe_sql(dialect: Dialect, from: &Relation<'_>) -> Result<String, SourceError> {
    Ok(format!(
        "SELECT * FROM {} LIMIT 0",
        relation(dialect, from)?
    ))
}

/// `SELECT count(*)` of the entity.
pub(crate) fn count_sql(dialect: Dialect, from: &Relation<'_>) -> Result<String, SourceError> {
    Ok(format!("SELECT count(*) FROM {}", relation(dialect, from)?))
}

/// `k IN (…)` or `(k1, k2) IN ((…), …)` for `n` keys: `key_refs` are the key
/// column references, `params` per key column the text before and after its
/// placeholder (a cast). SQLite takes a row value `IN` only from a subquery:
/// `(k1, k2) IN (VALUES (…), …)`.
pub(crate) fn in_condition(
    dialect: Dialect,
    key_refs: &[String],
    params: &[(String, String)],
    n: usize,
) -> String {
    let mut count = 0;
    let mut param = |i: usize| {
        count += 1;
        let p = match dialect {
            Dialect::Postgres => format!("${count}"),
            Dialect::MySql | Dialect::Sqlite => "?".to_string(),
        };
        format!("{}{p}{}", params[i].0, params[i].1)
    };
    if key_refs.len() == 1 {
        let list: Vec<String> = (0..n).map(|_| param(0)).collect();
        return format!("{} IN ({})", key_refs[0], list.join(", "));
    }
    let tuples: Vec<String> = (0..n)
        .map(|_| {
            let values: Vec<String> = (0..key_refs.len()).map(&mut param).collect();
            format!("({})", values.join(", "))
        })
        .collect();
    let list = match dialect {
        Dialect::Sqlite => format!("VALUES {}", tuples.join(", ")),
        Dialect::Postgres | Dialect::MySql => tuples.join(", "),
    };
    format!("({}) IN ({list})", key_refs.join(", "))
}

/// Which cursor a placeholder takes its value from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Bind {
    /// Key value `i` of the lower bound (exclusive): the last key read.
    After(usize),
    /// Key value `i` of the upper bound (inclusive): the segment's end.
    Until(usize),
}

/// One statement and, for each of its placeholders in order, the value it takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Statement {
    pub sql: String,
    pub binds: Vec<Bind>,
}

/// The four statements of one read over a key range (a keyset page, or the
/// count of the rows a range holds): with or without a lower bound (the
/// cursor) and with or without an upper bound (a segment's end).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RangeSql {
    /// No bound: the whole entity (its first page).
    pub first: Statement,
    /// Rows strictly after the cursor.
    pub after: Statement,
    /// Rows up to and including the upper bound.
    pub until: Statement,
    /// Rows after the cursor, up to and including the upper bound.
    pub between: Statement,
}

/// `>` or `<=` between the key tuple and a cursor.
#[derive(Clone, Copy)]
enum Cmp {
    /// After the lower bound: `(keys) > (after)`.
    Greater,
    /// Up to the upper bound: `(keys) <= (until)`.
    AtMost,
}

/// The condition `(keys) > (cursor)` or `(keys) <= (cursor)`; `next(i)` yields
/// the parameter expression for key `i` and records its placeholder.
fn compare(
    dialect: Dialect,
    keys: &[String],
    cmp: Cmp,
    next: &mut dyn FnMut(usize) -> String,
) -> String {
    let (op, last_op) = match cmp {
        Cmp::Greater => (">", ">"),
        Cmp::AtMost => ("<", "<="),
    };
    match dialect {
        Dialect::Postgres | Dialect::Sqlite => {
            if keys.len() == 1 {
                format!("{} {last_op} {}", keys[0], next(0))
            } else {
                let params: Vec<String> = (0..keys.len()).map(&mut *next).collect();
                format!("({}) {last_op} ({})", keys.join(", "), params.join(", "))
            }
        }
        // MySQL does not use an index well for row-value comparisons; expand
        // (a, b) > (x, y) into a > x OR (a = x AND b > y), and
        // (a, b) <= (x, y) into a < x OR (a = x AND b <= y).
        Dialect::MySql => {
            let mut alternatives = Vec::with_capacity(keys.len());
            for last in 0..keys.len() {
                let mut terms = Vec::with_capacity(last + 1);
                for (i, key) in keys.iter().enumerate().take(last) {
                    terms.push(format!("{key} = {}", next(i)));
                }
                let op = if last + 1 == keys.len() { last_op } else { op };
                terms.push(format!("{} {op} {}", keys[last], next(last)));
                alternatives.push(format!("({})", terms.join(" AND ")));
            }
            alternatives.join(" OR ")
        }
    }
}

/// Builds the keyset page statements.
///
/// `select` are the select-list expressions, `keys` the key column references
/// and `param(i, placeholder)` the expression for the cursor value of key `i`
/// (a cast around the placeholder where the dialect needs one).
pub(crate) fn page_sql(
    dialect: Dialect,
    relation: &str,
    select: &[String],
    keys: &[String],
    param: impl Fn(usize, &str) -> String,
    page_size: usize,
) -> RangeSql {
    let head = format!("SELECT {} FROM {relation}", select.join(", "));
    let tail = format!(" ORDER BY {} LIMIT {page_size}", keys.join(", "));
    range_sql(dialect, &head, &tail, keys, param)
}

/// Builds the statements that count the rows of a key range: the same
/// conditions and placeholders as [`page_sql`]'s, so a count binds its bounds
/// exactly as the pages over that range bind theirs.
pub(crate) fn count_range_sql(
    dialect: Dialect,
    relation: &str,
    keys: &[String],
    param: impl Fn(usize, &str) -> String,
) -> RangeSql {
    let head = format!("SELECT count(*) FROM {relation}");
    range_sql(dialect, &head, "", keys, param)
}

/// `head`, the range conditions, then `tail`, for each of the four ranges.
fn range_sql(
    dialect: Dialect,
    head: &str,
    tail: &str,
    keys: &[String],
    param: impl Fn(usize, &str) -> String,
) -> RangeSql {
    let build = |bounds: &[Cmp]| {
        let mut binds = Vec::new();
        let mut conditions = Vec::with_capacity(bounds.len());
        for cmp in bounds {
            let mut next = |i: usize| {
                binds.push(match cmp {
                    Cmp::Greater => Bind::After(i),
                    Cmp::AtMost => Bind::Until(i),
                });
                let placeholder = match dialect {
                    Dialect::Postgres => format!("${}", binds.len()),
                    Dialect::MySql | Dialect::Sqlite => "?".to_string(),
                };
                param(i, &placeholder)
            };
            conditions.push(compare(dialect, keys, *cmp, &mut next));
        }
        let sql = match conditions.as_slice() {
            [] => format!("{head}{tail}"),
            [one] => format!("{head} WHERE {one}{tail}"),
            many => format!("{head} WHERE ({}){tail}", many.join(") AND (")),
        };
        Statement { sql, binds }
    };
    RangeSql {
        first: build(&[]),
        after: build(&[Cmp::Greater]),
        until: build(&[Cmp::AtMost]),
        between: build(&[Cmp::Greater, Cmp::AtMost]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_identifiers() {
        assert_eq!(quote_ident(Dialect::Postgres, "a\"b"), "\"a\"\"b\"");
        assert_eq!(quote_ident(Dialect::MySql, "a`b"), "`a``b`");
        assert_eq!(quote_table(Dialect::Postgres, "s.t"), "\"s\".\"t\"");
        assert_eq!(quote_table(Dialect::MySql, "orders"), "`orders`");
    }

    #[test]
    fn wraps_queries() {
        let q = Relation::Query("select 1 as x;\n");
        assert_eq!(
            relation(Dialect::Postgres, &q).unwrap(),
            "(select 1 as x) AS t"
        );
        assert!(relation(Dialect::Postgres, &Relation::Query(" ; ")).is_err());
    }

    #[test]
    fn in_conditions() {
        let one = vec!["t.\"a\"".to_string()];
        let cast = vec![("CAST(".to_string(), " AS int)".to_string())];
        assert_eq!(
            in_condition(Dialect::Postgres, &one, &cast, 2),
            "t.\"a\" IN (CAST($1 AS int), CAST($2 AS int))"
        );
        let two = vec!["t.`a`".to_string(), "t.`b`".to_string()];
        let plain = vec![(String::new(), String::new()); 2];
        assert_eq!(
            in_condition(Dialect::MySql, &two, &plain, 2),
            "(t.`a`, t.`b`) IN ((?, ?), (?, ?))"
        );
        assert_eq!(
            in_condition(Dialect::Sqlite, &two, &plain, 1),
            "(t.`a`, t.`b`) IN (VALUES (?, ?))"
        );
    }

    #[test]
    fn row_value_keyset() {
        let keys = vec!["t.\"a\"".to_string(), "t.\"b\"".to_string()];
        let sql = page_sql(
            Dialect::Postgres,
            "\"x\" AS t",
            &["t.\"a\"".into(), "t.\"b\"::text".into()],
            &keys,
            |i, p| {
                if i == 1 {
                    format!("CAST({p} AS numeric)")
                } else {
                    p.to_string()
                }
            },
            10,
        );
        assert_eq!(
            sql.first.sql,
            "SELECT t.\"a\", t.\"b\"::text FROM \"x\" AS t ORDER BY t.\"a\", t.\"b\" LIMIT 10"
        );
        assert_eq!(
            sql.after.sql,
            "SELECT t.\"a\", t.\"b\"::text FROM \"x\" AS t WHERE (t.\"a\", t.\"b\") > ($1, CAST($2 AS numeric)) ORDER BY t.\"a\", t.\"b\" LIMIT 10"
        );
        assert_eq!(sql.after.binds, vec![Bind::After(0), Bind::After(1)]);
        assert_eq!(
            sql.between.sql,
            "SELECT t.\"a\", t.\"b\"::text FROM \"x\" AS t WHERE ((t.\"a\", t.\"b\") > ($1, CAST($2 AS numeric))) AND ((t.\"a\", t.\"b\") <= ($3, CAST($4 AS numeric))) ORDER BY t.\"a\", t.\"b\" LIMIT 10"
        );
        assert_eq!(
            sql.between.binds,
            vec![
                Bind::After(0),
                Bind::After(1),
                Bind::Until(0),
                Bind::Until(1)
            ]
        );
        assert_eq!(sql.until.binds, vec![Bind::Until(0), Bind::Until(1)]);
    }

    #[test]
    fn range_counts_bind_as_pages_do() {
        let keys = vec!["t.`a`".to_string(), "t.`b`".to_string()];
        let cast = |i: usize, p: &str| {
            if i == 1 {
                format!("CAST({p} AS DATE)")
            } else {
                p.to_string()
            }
        };
        let pages = page_sql(
            Dialect::MySql,
            "`x` AS t",
            &["t.`a`".into()],
            &keys,
            cast,
            5,
        );
        let counts = count_range_sql(Dialect::MySql, "`x` AS t", &keys, cast);
        assert_eq!(counts.first.sql, "SELECT count(*) FROM `x` AS t");
        assert_eq!(
            counts.between.sql,
            "SELECT count(*) FROM `x` AS t WHERE ((t.`a` > ?) OR (t.`a` = ? AND t.`b` > CAST(? AS DATE))) AND ((t.`a` < ?) OR (t.`a` = ? AND t.`b` <= CAST(? AS DATE)))"
        );
        for (count, page) in [
            (&counts.first, &pages.first),
            (&counts.after, &pages.after),
            (&counts.until, &pages.until),
            (&counts.between, &pages.between),
        ] {
            assert_eq!(count.binds, page.binds);
        }
    }

    #[test]
    fn mysql_expands_composite_keys() {
        let keys = vec![
            "t.`a`".to_string(),
            "t.`b`".to_string(),
            "t.`c`".to_string(),
        ];
        let sql = page_sql(
            Dialect::MySql,
            "`x` AS t",
            &["t.`a`".into()],
            &keys,
            |_, p| p.to_string(),
            5,
        );
        assert_eq!(
            sql.after.sql,
            "SELECT t.`a` FROM `x` AS t WHERE (t.`a` > ?) OR (t.`a` = ? AND t.`b` > ?) OR (t.`a` = ? AND t.`b` = ? AND t.`c` > ?) ORDER BY t.`a`, t.`b`, t.`c` LIMIT 5"
        );
        let after: Vec<Bind> = [0, 0, 1, 0, 1, 2].map(Bind::After).to_vec();
        assert_eq!(sql.after.binds, after);
        assert_eq!(
            sql.until.sql,
            "SELECT t.`a` FROM `x` AS t WHERE (t.`a` < ?) OR (t.`a` = ? AND t.`b` < ?) OR (t.`a` = ? AND t.`b` = ? AND t.`c` <= ?) ORDER BY t.`a`, t.`b`, t.`c` LIMIT 5"
        );
    }
}
