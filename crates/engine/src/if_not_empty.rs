//! What a fresh load may do with a destination that already holds data
//! ([`IfNotEmpty`]), and the refusal that names it ([`NotEmpty`]): plain
//! values the errors, the options and the jobs share, below all of them.

/// What a fresh load does when its destination already holds data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum IfNotEmpty {
    /// Write into it as it is: items (files) of the same key (name) are
    /// replaced, the others kept.
    Append,
    /// Remove what is there first (a table's items, keeping the table, its
    /// indexes and settings; an export's own files, never other files),
    /// then load.
    Truncate,
    /// Refuse, saying what is there and these choices (the default).
    #[default]
    Fail,
}

impl IfNotEmpty {
    /// Every choice, in the order they are offered.
    pub const ALL: [IfNotEmpty; 3] = [IfNotEmpty::Append, IfNotEmpty::Truncate, IfNotEmpty::Fail];

    /// The choice's name: `append`, `truncate` or `fail`.
    pub fn name(self) -> &'static str {
        match self {
            IfNotEmpty::Append => "append",
            IfNotEmpty::Truncate => "truncate",
            IfNotEmpty::Fail => "fail",
        }
    }

    /// The choice named `text` (`append`, `truncate` or `fail`).
    pub fn parse(text: &str) -> Option<IfNotEmpty> {
        IfNotEmpty::ALL
            .into_iter()
            .find(|c| c.name() == text.trim())
    }
}

/// A destination that already holds data, refused: where it is, what it
/// holds, and what each choice would do there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotEmpty {
    /// The destination as a person names it: `table shop`, `exports/data`.
    pub target: String,
    /// What it holds, counted: `3 items`, `at least 100,000 items`, `2 export files`.
    pub held: String,
    /// What `append` would do there.
    pub append: &'static str,
    /// What `truncate` would do there.
    pub truncate: &'static str,
}

impl NotEmpty {
    /// The refusal, each choice spelled by `choice` (a flag, an
    /// environment variable).
    pub fn message(&self, choice: impl Fn(IfNotEmpty) -> String) -> String {
        format!(
            "{} already holds {}; nothing was read or written. Say what to do with it: {} to {}; {} to {}; or {} (the default) to refuse",
            self.target,
            self.held,
            choice(IfNotEmpty::Append),
            self.append,
            choice(IfNotEmpty::Truncate),
            self.truncate,
            choice(IfNotEmpty::Fail),
        )
    }
}

/// The command line's spelling of a choice: `--if-not-empty append`.
pub fn flag(choice: IfNotEmpty) -> String {
    format!("--if-not-empty {}", choice.name())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_refusal_names_the_place_the_count_and_every_choice() {
        let refusal = NotEmpty {
            target: "table shop".into(),
            held: "at least 100,000 items".into(),
            append: "write into it",
            truncate: "empty it first",
        };
        let text = refusal.message(flag);
        for part in [
            "table shop already holds at least 100,000 items",
            "--if-not-empty append to write into it",
            "--if-not-empty truncate to empty it first",
            "--if-not-empty fail (the default)",
        ] {
            assert!(text.contains(part), "{part}: {text}");
        }
        let env = refusal.message(|c| format!("SQL2DDB_IF_NOT_EMPTY={}", c.name()));
        assert!(env.contains("SQL2DDB_IF_NOT_EMPTY=truncate"), "{env}");
    }

    #[test]
    fn choices_parse_by_name() {
        for c in IfNotEmpty::ALL {
            assert_eq!(IfNotEmpty::parse(c.name()), Some(c));
        }
        assert_eq!(IfNotEmpty::parse(" truncate "), Some(IfNotEmpty::Truncate));
        assert_eq!(IfNotEmpty::parse("overwrite"), None);
        assert_eq!(IfNotEmpty::default(), IfNotEmpty::Fail);
    }
}
