//! What a dialect contributes to reading an entity's columns: the select
//! list, the casts around cursor values and a decoder per column. Each
//! dialect module builds one with its own decoder type; `page.rs` gathers
//! them, so the dialects never import the pages that use them.

/// A dialect's plan for reading columns, with decoders of type `D`.
pub(crate) struct ColumnPlan<D> {
    /// Select-list expressions, one per column.
    pub(crate) select: Vec<String>,
    /// Per key column: text before and after the placeholder (a cast).
    pub(crate) params: Vec<(String, String)>,
    /// How to decode each column.
    pub(crate) decoders: Vec<D>,
}
