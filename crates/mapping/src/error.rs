//! Errors of loading and binding a mapping, each with the place in the file it comes from.

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use thiserror::Error;

/// A place in the mapping file: file name, 1-based line and 1-based column (in characters).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// The file name as given to [`crate::Plan::parse`].
    pub file: Arc<str>,
    /// Line, from 1.
    pub line: usize,
    /// Column in characters, from 1.
    pub col: usize,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file, self.line, self.col)
    }
}

/// What kind of mistake a [`MappingError`] reports, for callers that branch on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Not valid TOML, or a value of the wrong type.
    Syntax,
    /// A key the spec does not know (usually a typo).
    UnknownKey,
    /// A required key is missing.
    MissingKey,
    /// A value of the right type that is not allowed (range, choice, duplicate, conflict).
    InvalidValue,
    /// A template that does not parse.
    Template,
    /// An environment variable used with `${VAR}` is not set and has no default.
    Env,
    /// The mapping does not fit the columns the source returns (found at bind time).
    Bind,
}

/// A mistake in a mapping spec. Its `Display` is `FILE:LINE:COL: message`.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum MappingError {
    /// The file is not valid TOML, or a value has the wrong type.
    #[error("{at}: {message}")]
    Syntax {
        /// Where.
        at: Location,
        /// What the TOML parser said.
        message: String,
    },
    /// A key the spec does not know.
    #[error("{at}: {message}")]
    UnknownKey {
        /// Where the key is.
        at: Location,
        /// The key as written.
        key: String,
        /// The message, naming the keys allowed there.
        message: String,
    },
    /// A required key is missing.
    #[error("{at}: {message}")]
    MissingKey {
        /// The table that lacks the key.
        at: Location,
        /// The missing key.
        key: String,
        /// The message.
        message: String,
    },
    /// A value that is not allowed.
    #[error("{at}: {message}")]
    Invalid {
        /// Where the value is.
        at: Location,
        /// What is wrong with it.
        message: String,
    },
    /// A template that does not parse.
    #[error("{at}: bad template {template:?}: {message}")]
    Template {
        /// Where in the template the problem is.
        at: Location,
        /// The template as written.
        template: String,
        /// What is wrong.
        message: String,
    },
    /// `${VAR}` names a variable that is not set and has no `:-default`.
    #[error(
        "{at}: environment variable {var} is not set (write ${{{var}:-default}} to give a default)"
    )]
    Env {
        /// Where `${VAR}` is.
        at: Location,
        /// The variable.
        var: String,
    },
    /// The mapping does not fit the source's columns.
    #[error("{at}: entity {entity}: {message}; available columns: {}", available.join(", "))]
    Bind {
        /// The template or value in the mapping that does not fit.
        at: Location,
        /// Entity name.
        entity: String,
        /// The column at fault, when there is one.
        column: Option<String>,
        /// Columns the entity can use (the source's columns minus excluded ones).
        available: Box<[String]>,
        /// What is wrong.
        message: String,
    },
}

impl MappingError {
    /// The kind of mistake.
    pub fn kind(&self) -> ErrorKind {
        match self {
            MappingError::Syntax { .. } => ErrorKind::Syntax,
            MappingError::UnknownKey { .. } => ErrorKind::UnknownKey,
            MappingError::MissingKey { .. } => ErrorKind::MissingKey,
            MappingError::Invalid { .. } => ErrorKind::InvalidValue,
            MappingError::Template { .. } => ErrorKind::Template,
            MappingError::Env { .. } => ErrorKind::Env,
            MappingError::Bind { .. } => ErrorKind::Bind,
        }
    }

    /// Where in the mapping file the mistake is.
    pub fn location(&self) -> &Location {
        match self {
            MappingError::Syntax { at, .. }
            | MappingError::UnknownKey { at, .. }
            | MappingError::MissingKey { at, .. }
            | MappingError::Invalid { at, .. }
            | MappingError::Template { at, .. }
            | MappingError::Env { at, .. }
            | MappingError::Bind { at, .. } => at,
        }
    }
}

/// Turns byte offsets of the mapping text into [`Location`]s.
pub(crate) struct SourceMap<'a> {
    file: Arc<str>,
    text: &'a str,
    line_starts: Vec<usize>,
}

impl<'a> SourceMap<'a> {
    pub(crate) fn new(file: &str, text: &'a str) -> Self {
        let line_starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        SourceMap {
            file: file.into(),
            text,
            line_starts,
        }
    }

    pub(crate) fn file(&self) -> &str {
        &self.file
    }

    /// The location of a byte offset.
    pub(crate) fn at(&self, offset: usize) -> Location {
        let offset = offset.min(self.text.len());
        let line = self.line_starts.partition_point(|&s| s <= offset);
        let start = self.line_starts[line - 1];
        let col = self
            .text
            .get(start..offset)
            .map_or(offset - start, |s| s.chars().count())
            + 1;
        Location {
            file: self.file.clone(),
            line,
            col,
        }
    }

    /// The location of byte `inner` of a string value whose TOML text spans `span`.
    /// Exact when the string is written without escapes; otherwise the string's start.
    pub(crate) fn at_in_string(&self, span: &Range<usize>, value: &str, inner: usize) -> Location {
        let raw = self.text.get(span.clone()).unwrap_or("");
        let quote = raw.chars().next().filter(|c| *c == '"' || *c == '\'');
        match quote {
            Some(q)
                if raw.len() == value.len() + 2
                    && raw[1..].starts_with(value)
                    && raw.ends_with(q) =>
            {
                self.at(span.start + 1 + inner)
            }
            _ => self.at(span.start),
        }
    }

    /// Converts a TOML parse or deserialisation error.
    pub(crate) fn toml_error(&self, e: &toml::de::Error) -> MappingError {
        let at = self.at(e.span().map_or(0, |s| s.start));
        let message = e.message().to_string();
        let quoted = || message.split('`').nth(1).unwrap_or_default().to_string();
        if message.starts_with("unknown field") {
            MappingError::UnknownKey {
                at,
                key: quoted(),
                message,
            }
        } else if message.starts_with("missing field") {
            MappingError::MissingKey {
                at,
                key: quoted(),
                message,
            }
        } else {
            MappingError::Syntax { at, message }
        }
    }
}
