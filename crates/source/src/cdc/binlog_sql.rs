//! What a statement of the binary log (a Query event) does to tables, read
//! as the server reads it: comments, quoting, case, schema-qualified names
//! and MySQL's executable comments (`/*!40000 … */`, whose text runs). Only
//! the part of a statement that names the tables it changes is looked at,
//! so a column or a table it merely reads is not taken for one it writes.

/// One token of a statement.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    /// An identifier or keyword; `quoted` when written in backticks or
    /// double quotes (never a keyword then).
    Word {
        text: String,
        quoted: bool,
    },
    Dot,
    Comma,
    Open,
    Close,
    /// A string literal or any other character.
    Other,
}

/// What a statement does, as far as a follower cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Statement {
    /// `BEGIN`: a transaction starts.
    Begin,
    /// `COMMIT`: it ends.
    Commit,
    /// A change of rows written as a statement (`binlog_format =
    /// STATEMENT`, or `MIXED`'s statements): `verb` (`INSERT`, `UPDATE`…)
    /// and the names it may change (dotted parts).
    Dml {
        verb: String,
        names: Vec<Vec<String>>,
    },
    /// `TRUNCATE` of the named table.
    Truncate { names: Vec<Vec<String>> },
    /// A change of the named tables' definition or existence (`ALTER
    /// TABLE`, `RENAME TABLE`, `DROP TABLE`, `CREATE OR REPLACE TABLE`).
    Ddl {
        verb: String,
        names: Vec<Vec<String>>,
    },
    /// `DROP DATABASE`: every table of the named schema.
    DropSchema { schema: String },
    /// Anything else (DDL of other objects, `SET`, a comment).
    Other,
}

/// Reads `sql`.
pub(super) fn classify(sql: &str) -> Statement {
    let tokens = tokenize(sql);
    classify_tokens(&tokens)
}

fn classify_tokens(tokens: &[Token]) -> Statement {
    let Some(first) = keyword(tokens, 0) else {
        return Statement::Other;
    };
    match first.as_str() {
        "BEGIN" => Statement::Begin,
        "COMMIT" => Statement::Commit,
        "INSERT" | "REPLACE" => {
            let mut i = skip(
                tokens,
                1,
                &["LOW_PRIORITY", "DELAYED", "HIGH_PRIORITY", "IGNORE"],
            );
            i = skip(tokens, i, &["INTO"]);
            Statement::Dml {
                verb: first,
                names: name_at(tokens, i).into_iter().collect(),
            }
        }
        "UPDATE" => Statement::Dml {
            verb: first,
            names: names_until(tokens, 1, &["SET"]),
        },
        "DELETE" => Statement::Dml {
            verb: first,
            names: names_until(tokens, 1, &["WHERE", "ORDER", "LIMIT", "RETURNING"]),
        },
        "LOAD" => {
            let names = (0..tokens.len())
                .find(|&i| is_kw(tokens, i, "INTO") && is_kw(tokens, i + 1, "TABLE"))
                .and_then(|i| name_at(tokens, i + 2));
            Statement::Dml {
                verb: "LOAD DATA".into(),
                names: names.into_iter().collect(),
            }
        }
        "WITH" => {
            // The statement after the common table expressions.
            let mut depth = 0i32;
            for (i, t) in tokens.iter().enumerate().skip(1) {
                match t {
                    Token::Open => depth += 1,
                    Token::Close => depth -= 1,
                    _ if depth == 0
                        && ["UPDATE", "DELETE", "INSERT", "REPLACE"]
                            .iter()
                            .any(|k| is_kw(tokens, i, k)) =>
                    {
                        return classify_tokens(&tokens[i..]);
                    }
                    _ => {}
                }
            }
            Statement::Other
        }
        "TRUNCATE" => Statement::Truncate {
            names: name_at(tokens, skip(tokens, 1, &["TABLE"]))
                .into_iter()
                .collect(),
        },
        "ALTER" => match (1..5).find(|&i| is_kw(tokens, i, "TABLE")) {
            Some(i) => {
                let at = skip(tokens, i + 1, &["IF", "EXISTS"]);
                let name = name_at(tokens, at);
                let after = at + name.as_ref().map_or(0, |n| 2 * n.len() - 1);
                match keeps_columns(&tokens[after.min(tokens.len())..]) {
                    true => Statement::Other,
                    false => Statement::Ddl {
                        verb: "ALTER TABLE".into(),
                        names: name.into_iter().collect(),
                    },
                }
            }
            None => Statement::Other,
        },
        "RENAME" if is_kw(tokens, 1, "TABLE") || is_kw(tokens, 1, "TABLES") => Statement::Ddl {
            verb: "RENAME TABLE".into(),
            names: names_until(tokens, 2, &[]),
        },
        "DROP" => {
            let i = skip(tokens, 1, &["TEMPORARY"]);
            if is_kw(tokens, i, "TABLE") || is_kw(tokens, i, "TABLES") {
                Statement::Ddl {
                    verb: "DROP TABLE".into(),
                    names: names_until(tokens, skip(tokens, i + 1, &["IF", "EXISTS"]), &[]),
                }
            } else if is_kw(tokens, i, "DATABASE") || is_kw(tokens, i, "SCHEMA") {
                match name_at(tokens, skip(tokens, i + 1, &["IF", "EXISTS"])) {
                    Some(mut n) if n.len() == 1 => Statement::DropSchema {
                        schema: n.remove(0),
                    },
                    _ => Statement::Other,
                }
            } else {
                Statement::Other
            }
        }
        "CREATE" if is_kw(tokens, 1, "OR") && is_kw(tokens, 2, "REPLACE") => {
            let i = skip(tokens, 3, &["TEMPORARY"]);
            match is_kw(tokens, i, "TABLE") {
                true => Statement::Ddl {
                    verb: "CREATE OR REPLACE TABLE".into(),
                    names: name_at(tokens, i + 1).into_iter().collect(),
                },
                false => Statement::Other,
            }
        }
        _ => Statement::Other,
    }
}

/// Whether the clauses of an `ALTER TABLE` (after its name) only change
/// indexes, keys and constraints, or how the table is rebuilt: the rows'
/// columns stay as they are, so the follower reads on (an index added to
/// a followed table must not stop it).
fn keeps_columns(clauses: &[Token]) -> bool {
    const ADDED: [&str; 9] = [
        "INDEX",
        "KEY",
        "UNIQUE",
        "FULLTEXT",
        "SPATIAL",
        "CONSTRAINT",
        "PRIMARY",
        "FOREIGN",
        "CHECK",
    ];
    const DROPPED: [&str; 6] = ["INDEX", "KEY", "PRIMARY", "FOREIGN", "CONSTRAINT", "CHECK"];
    let mut clause_start = true;
    let mut depth = 0i32;
    for (i, t) in clauses.iter().enumerate() {
        match t {
            Token::Open => depth += 1,
            Token::Close => depth -= 1,
            Token::Comma if depth == 0 => {
                clause_start = true;
                continue;
            }
            _ if clause_start => {
                let next_in = |words: &[&str]| words.iter().any(|w| is_kw(clauses, i + 1, w));
                let kept = (is_kw(clauses, i, "ADD") && next_in(&ADDED))
                    || (is_kw(clauses, i, "DROP") && next_in(&DROPPED))
                    || (is_kw(clauses, i, "RENAME") && next_in(&["INDEX", "KEY"]))
                    || (is_kw(clauses, i, "ALTER") && next_in(&["INDEX"]))
                    || [
                        "ALGORITHM",
                        "LOCK",
                        "FORCE",
                        "ENGINE",
                        "COMMENT",
                        "WAIT",
                        "NOWAIT",
                    ]
                    .iter()
                    .any(|k| is_kw(clauses, i, k));
                if !kept {
                    return false;
                }
            }
            _ => {}
        }
        clause_start = false;
    }
    !clauses.is_empty()
}

/// The unquoted word at `i`, upper-cased.
fn keyword(tokens: &[Token], i: usize) -> Option<String> {
    match tokens.get(i) {
        Some(Token::Word {
            text,
            quoted: false,
        }) => Some(text.to_ascii_uppercase()),
        _ => None,
    }
}

fn is_kw(tokens: &[Token], i: usize, kw: &str) -> bool {
    keyword(tokens, i).is_some_and(|k| k == kw)
}

/// The index after any of `words` from `i` on.
fn skip(tokens: &[Token], mut i: usize, words: &[&str]) -> usize {
    while words.iter().any(|w| is_kw(tokens, i, w)) {
        i += 1;
    }
    i
}

/// The dotted name that starts at `i` (`t`, `db.t`, `` `my t` ``).
fn name_at(tokens: &[Token], mut i: usize) -> Option<Vec<String>> {
    let mut parts = Vec::new();
    while let Some(Token::Word { text, .. }) = tokens.get(i) {
        parts.push(text.clone());
        if tokens.get(i + 1) != Some(&Token::Dot) {
            break;
        }
        i += 2;
    }
    (!parts.is_empty()).then_some(parts)
}

/// Unquoted words that join the names of a multi-table statement.
const JOINING: [&str; 17] = [
    "FROM",
    "USING",
    "JOIN",
    "INNER",
    "LEFT",
    "RIGHT",
    "OUTER",
    "CROSS",
    "NATURAL",
    "STRAIGHT_JOIN",
    "ON",
    "AS",
    "TO",
    "LOW_PRIORITY",
    "QUICK",
    "IGNORE",
    "AND",
];

/// Every dotted name from `i` up to the first of `ends` outside
/// parentheses (or the end): the tables a multi-table `UPDATE`/`DELETE`
/// may change are among them.
fn names_until(tokens: &[Token], from: usize, ends: &[&str]) -> Vec<Vec<String>> {
    let mut names = Vec::new();
    let mut depth = 0i32;
    let mut i = from;
    while i < tokens.len() {
        match &tokens[i] {
            Token::Open => depth += 1,
            Token::Close => depth -= 1,
            Token::Word { .. } => {
                if depth == 0 && ends.iter().any(|e| is_kw(tokens, i, e)) {
                    break;
                }
                let name = name_at(tokens, i).expect("a word starts a name");
                let joining = name.len() == 1 && JOINING.iter().any(|k| is_kw(tokens, i, k));
                i += 2 * name.len() - 1;
                if !joining {
                    names.push(name);
                }
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    names
}

/// Splits `sql` into tokens; comments go, the text of executable comments
/// (`/*!NNNNN …*/`, `/*M!NNNNNN …*/`) stays.
fn tokenize(sql: &str) -> Vec<Token> {
    let chars: Vec<char> = sql.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let at = |i: usize| chars.get(i).copied().unwrap_or('\0');
    while i < chars.len() {
        let c = chars[i];
        match c {
            c if c.is_whitespace() => i += 1,
            '/' if at(i + 1) == '*'
                && (at(i + 2) == '!' || (at(i + 2) == 'M' && at(i + 3) == '!')) =>
            {
                i += if at(i + 2) == '!' { 3 } else { 4 };
                while at(i).is_ascii_digit() {
                    i += 1;
                }
            }
            '/' if at(i + 1) == '*' => {
                i += 2;
                while i < chars.len() && !(chars[i] == '*' && at(i + 1) == '/') {
                    i += 1;
                }
                i += 2;
            }
            // The end of an executable comment.
            '*' if at(i + 1) == '/' => i += 2,
            '#' => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            '-' if at(i + 1) == '-' && (at(i + 2).is_whitespace() || i + 2 >= chars.len()) => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            '\'' | '"' | '`' => {
                let (text, next) = quoted(&chars, i);
                i = next;
                out.push(match c {
                    '\'' => Token::Other,
                    // `"…"` is an identifier under ANSI_QUOTES: taken as one,
                    // so a table so named is never missed.
                    _ => Token::Word { text, quoted: true },
                });
            }
            '.' => {
                out.push(Token::Dot);
                i += 1;
            }
            ',' => {
                out.push(Token::Comma);
                i += 1;
            }
            '(' => {
                out.push(Token::Open);
                i += 1;
            }
            ')' => {
                out.push(Token::Close);
                i += 1;
            }
            c if c.is_alphanumeric() || c == '_' || c == '$' => {
                let start = i;
                while i < chars.len()
                    && (chars[i].is_alphanumeric() || chars[i] == '_' || chars[i] == '$')
                {
                    i += 1;
                }
                out.push(Token::Word {
                    text: chars[start..i].iter().collect(),
                    quoted: false,
                });
            }
            _ => {
                out.push(Token::Other);
                i += 1;
            }
        }
    }
    out
}

/// The text of the quoted token at `start` (doubled quotes and, in
/// strings, backslash escapes undone) and the index after it.
fn quoted(chars: &[char], start: usize) -> (String, usize) {
    let q = chars[start];
    let mut text = String::new();
    let mut i = start + 1;
    while i < chars.len() {
        let c = chars[i];
        if c == q {
            if chars.get(i + 1) == Some(&q) {
                text.push(q);
                i += 2;
                continue;
            }
            return (text, i + 1);
        }
        if c == '\\' && q != '`' {
            if let Some(&n) = chars.get(i + 1) {
                text.push(n);
            }
            i += 2;
            continue;
        }
        text.push(c);
        i += 1;
    }
    (text, i)
}

/// Whether dotted `name`, written in a statement run in `schema`, may be
/// table `table` of `table_schema` (names compared without case: a server
/// with `lower_case_table_names` takes them so, and stopping for nothing
/// is better than missing a change).
pub(super) fn may_name(name: &[String], schema: &str, table_schema: &str, table: &str) -> bool {
    let eq = |a: &str, b: &str| a.eq_ignore_ascii_case(b);
    match name {
        [t] => eq(schema, table_schema) && eq(t, table),
        // `db.t`, or a column `t.c` of a table in the statement's schema.
        [a, b] => {
            (eq(a, table_schema) && eq(b, table)) || (eq(schema, table_schema) && eq(a, table))
        }
        [a, b, ..] => eq(a, table_schema) && eq(b, table),
        [] => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(s: Statement) -> Vec<Vec<String>> {
        match s {
            Statement::Dml { names, .. }
            | Statement::Truncate { names }
            | Statement::Ddl { names, .. } => names,
            other => panic!("{other:?}"),
        }
    }

    fn flat(names: Vec<Vec<String>>) -> Vec<String> {
        names.into_iter().map(|n| n.join(".")).collect()
    }

    #[test]
    fn truncate_in_any_spelling_names_its_table() {
        for (sql, want) in [
            ("/* c */ TRUNCATE TABLE t", "t"),
            ("TRUNCATE TABLE `my t`", "my t"),
            ("truncate t", "t"),
            ("TRUNCATE db.t;", "db.t"),
            ("TRUNCATE `db`.`t`", "db.t"),
            ("-- x\nTRUNCATE /*!40000 TABLE */ t", "t"),
            ("# x\n  Truncate\tTable \"t\"", "t"),
        ] {
            let s = classify(sql);
            assert!(matches!(s, Statement::Truncate { .. }), "{sql}: {s:?}");
            assert_eq!(flat(names(s)), [want], "{sql}");
        }
    }

    #[test]
    fn dml_names_the_tables_it_may_change_not_those_it_reads() {
        assert_eq!(
            flat(names(classify(
                "INSERT IGNORE INTO `s`.t (a, b) SELECT x, y FROM other"
            ))),
            ["s.t"]
        );
        assert_eq!(
            flat(names(classify(
                "update t1 join t2 on t1.id = t2.id set t1.a = 'x' where t2.b in (select c from u)"
            ))),
            ["t1", "t2", "t1.id", "t2.id"]
        );
        assert_eq!(
            flat(names(classify(
                "DELETE FROM t WHERE id IN (SELECT id FROM u)"
            ))),
            ["t"]
        );
        assert_eq!(
            flat(names(classify("WITH c AS (SELECT 1) UPDATE t SET a = 1"))),
            ["t"]
        );
        assert_eq!(
            flat(names(classify("LOAD DATA INFILE 'f' INTO TABLE t"))),
            ["t"]
        );
        assert!(matches!(classify("/*!*/ BEGIN"), Statement::Begin));
        assert!(matches!(
            classify("COMMIT /* implicit */"),
            Statement::Commit
        ));
        assert!(matches!(classify("# Dummy event"), Statement::Other));
        assert!(matches!(classify("SELECT 'TRUNCATE t'"), Statement::Other));
    }

    #[test]
    fn ddl_on_tables_is_told_from_ddl_on_other_things() {
        assert_eq!(
            classify("ALTER ONLINE TABLE db.t ADD c int"),
            Statement::Ddl {
                verb: "ALTER TABLE".into(),
                names: vec![vec!["db".into(), "t".into()]]
            }
        );
        assert_eq!(
            flat(names(classify("RENAME TABLE a TO b, c TO d"))),
            ["a", "b", "c", "d"]
        );
        assert_eq!(
            flat(names(classify(
                "DROP TABLE IF EXISTS `t` /* generated by server */"
            ))),
            ["t"]
        );
        assert_eq!(
            classify("DROP DATABASE IF EXISTS `d`"),
            Statement::DropSchema { schema: "d".into() }
        );
        assert!(matches!(
            classify("CREATE OR REPLACE TABLE t (id int)"),
            Statement::Ddl { .. }
        ));
        assert!(matches!(
            classify("ALTER TABLE t ADD INDEX i (a), DROP KEY k"),
            Statement::Other
        ));
        assert!(matches!(
            classify("ALTER TABLE t ADD UNIQUE (a, b), ALGORITHM = INPLACE, LOCK = NONE"),
            Statement::Other
        ));
        for changes in [
            "ALTER TABLE t ADD INDEX i (a), ADD COLUMN c int",
            "ALTER TABLE t ADD c int",
            "ALTER TABLE t CONVERT TO CHARACTER SET utf8mb4",
            "ALTER TABLE t DROP COLUMN c",
            "ALTER TABLE t",
        ] {
            assert!(
                matches!(classify(changes), Statement::Ddl { .. }),
                "{changes}"
            );
        }
        for other in [
            "CREATE TABLE t (id int)",
            "ALTER DATABASE d CHARACTER SET utf8mb4",
            "CREATE INDEX i ON t (a)",
            "SET @x = 1",
        ] {
            assert_eq!(classify(other), Statement::Other, "{other}");
        }
    }

    #[test]
    fn names_match_in_the_statement_schema_or_qualified() {
        let n = |s: &str| s.split('.').map(String::from).collect::<Vec<_>>();
        assert!(may_name(&n("t"), "db", "db", "t"));
        assert!(may_name(&n("T"), "db", "db", "t"));
        assert!(!may_name(&n("t"), "other", "db", "t"));
        assert!(may_name(&n("db.t"), "other", "db", "t"));
        assert!(may_name(&n("t.id"), "db", "db", "t"));
        assert!(may_name(&n("db.t.id"), "x", "db", "t"));
        assert!(!may_name(&n("x.t"), "x", "db", "t"));
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            /// Any text reads without a panic.
            #[test]
            fn any_statement_classifies_without_a_panic(sql in "\\PC{0,80}") {
                let _ = classify(&sql);
            }

            /// A TRUNCATE is recognised whatever comments, spaces and case
            /// surround it.
            #[test]
            fn truncate_is_recognised_in_any_spelling(
                comment in "[a-z ]{0,10}",
                upper in any::<bool>(),
                table_kw in any::<bool>(),
                quoted in any::<bool>(),
                schema in proptest::option::of("s[a-z0-9_]{0,8}"),
                name in "n[a-z0-9_ ]{0,8}",
            ) {
                let kw = if upper { "TRUNCATE" } else { "truncate" };
                let tbl = if table_kw { " Table" } else { "" };
                let q = |n: &str| if quoted || n.contains(' ') { format!("`{n}`") } else { n.to_string() };
                let target = match &schema {
                    Some(s) => format!("{}.{}", q(s), q(&name)),
                    None => q(&name),
                };
                let sql = format!("/* {comment} */ {kw}{tbl}\n {target};");
                let s = classify(&sql);
                let mut want = schema.clone().into_iter().collect::<Vec<_>>();
                want.push(name.clone());
                prop_assert_eq!(s, Statement::Truncate { names: vec![want] }, "{}", sql);
            }
        }
    }
}
