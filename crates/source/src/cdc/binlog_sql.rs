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

/// Classifies a tokenized statement by its first keyword.
fn classify_tokens(tokens: &[Token]) -> Statement {
    let Some(first) = keyword(tokens, 0) else {
        return Statement::Other;
    };
    match first.as_str() {
        "BEGIN" => Statement::Begin,
        "COMMIT" => Statement::Commit,
        "INSERT" | "REPLACE" => classify_insert(tokens, first),
        "UPDATE" => Statement::Dml {
            verb: first,
            names: names_until(tokens, 1, &["SET"]),
        },
        "DELETE" => Statement::Dml {
            verb: first,
            names: names_until(tokens, 1, &["WHERE", "ORDER", "LIMIT", "RETURNING"]),
        },
        "LOAD" => classify_load_data(tokens),
        "WITH" => classify_after_ctes(tokens),
        "TRUNCATE" => Statement::Truncate {
            names: name_at(tokens, skip(tokens, 1, &["TABLE"]))
                .into_iter()
                .collect(),
        },
        "ALTER" => classify_alter(tokens),
        "RENAME" if is_kw(tokens, 1, "TABLE") || is_kw(tokens, 1, "TABLES") => Statement::Ddl {
            verb: "RENAME TABLE".into(),
            names: names_until(tokens, 2, &[]),
        },
        "DROP" => classify_drop(tokens),
        "CREATE" if is_kw(tokens, 1, "OR") && is_kw(tokens, 2, "REPLACE") => {
            classify_create_or_replace(tokens)
        }
        _ => Statement::Other,
    }
}

/// `INSERT`/`REPLACE` (`verb`): the one table named after its modifiers
/// and `INTO`.
fn classify_insert(tokens: &[Token], verb: String) -> Statement {
    let mut i = skip(
        tokens,
        1,
        &["LOW_PRIORITY", "DELAYED", "HIGH_PRIORITY", "IGNORE"],
    );
    i = skip(tokens, i, &["INTO"]);
    Statement::Dml {
        verb,
        names: name_at(tokens, i).into_iter().collect(),
    }
}

/// `LOAD DATA … INTO TABLE t`: the table after `INTO TABLE`, wherever the
/// file's options put it.
fn classify_load_data(tokens: &[Token]) -> Statement {
    let names = (0..tokens.len())
        .find(|&i| is_kw(tokens, i, "INTO") && is_kw(tokens, i + 1, "TABLE"))
        .and_then(|i| name_at(tokens, i + 2));
    Statement::Dml {
        verb: "LOAD DATA".into(),
        names: names.into_iter().collect(),
    }
}

/// `WITH …`: classified as the statement after the common table
/// expressions (the first change outside their parentheses).
fn classify_after_ctes(tokens: &[Token]) -> Statement {
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

/// `ALTER [ONLINE|IGNORE…] TABLE t …`: a change of the table's definition,
/// unless its clauses keep the rows' columns as they are.
fn classify_alter(tokens: &[Token]) -> Statement {
    let Some(i) = (1..5).find(|&i| is_kw(tokens, i, "TABLE")) else {
        return Statement::Other;
    };
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

/// `DROP [TEMPORARY] TABLE(S)` of the named tables, or `DROP DATABASE`/
/// `SCHEMA` of one schema; any other `DROP` is of no table.
fn classify_drop(tokens: &[Token]) -> Statement {
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

/// `CREATE OR REPLACE [TEMPORARY] TABLE t`: replaces the table (MariaDB),
/// so its rows and definition may change; other objects do not matter.
fn classify_create_or_replace(tokens: &[Token]) -> Statement {
    let i = skip(tokens, 3, &["TEMPORARY"]);
    match is_kw(tokens, i, "TABLE") {
        true => Statement::Ddl {
            verb: "CREATE OR REPLACE TABLE".into(),
            names: name_at(tokens, i + 1).into_iter().collect(),
        },
        false => Statement::Other,
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
    while i < chars.len() {
        if let Some(next) = skip_unread(&chars, i) {
            i = next;
            continue;
        }
        let (token, next) = token_at(&chars, i);
        out.push(token);
        i = next;
    }
    out
}

/// The index after the whitespace or comment at `i` (or the marks that
/// open and close an executable comment, whose text is read), if one is
/// there.
fn skip_unread(chars: &[char], mut i: usize) -> Option<usize> {
    let at = |i: usize| chars.get(i).copied().unwrap_or('\0');
    match chars[i] {
        c if c.is_whitespace() => i += 1,
        '/' if at(i + 1) == '*' && (at(i + 2) == '!' || (at(i + 2) == 'M' && at(i + 3) == '!')) => {
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
        '#' => i = line_end(chars, i),
        '-' if at(i + 1) == '-' && (at(i + 2).is_whitespace() || i + 2 >= chars.len()) => {
            i = line_end(chars, i)
        }
        _ => return None,
    }
    Some(i)
}

/// The index of the newline that ends the line comment at `i` (or the end).
fn line_end(chars: &[char], mut i: usize) -> usize {
    while i < chars.len() && chars[i] != '\n' {
        i += 1;
    }
    i
}

/// The token at `i` (not whitespace nor a comment) and the index after it.
fn token_at(chars: &[char], i: usize) -> (Token, usize) {
    let c = chars[i];
    match c {
        '\'' | '"' | '`' => {
            let (text, next) = quoted(chars, i);
            let token = match c {
                '\'' => Token::Other,
                // `"…"` is an identifier under ANSI_QUOTES: taken as one,
                // so a table so named is never missed.
                _ => Token::Word { text, quoted: true },
            };
            (token, next)
        }
        '.' => (Token::Dot, i + 1),
        ',' => (Token::Comma, i + 1),
        '(' => (Token::Open, i + 1),
        ')' => (Token::Close, i + 1),
        c if is_word_char(c) => {
            let end = (i..chars.len())
                .find(|&j| !is_word_char(chars[j]))
                .unwrap_or(chars.len());
            let text = chars[i..end].iter().collect();
            (
                Token::Word {
                    text,
                    quoted: false,
                },
                end,
            )
        }
        _ => (Token::Other, i + 1),
    }
}

/// Whether `c` may be part of an unquoted identifier or keyword.
fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == '$'
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
mod tests;
