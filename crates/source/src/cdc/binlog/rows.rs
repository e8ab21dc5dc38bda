//! Row events of the followed tables: checked to carry every column, as
//! bound, and decoded into changes (character values in other character
//! sets than UTF-8 converted by the server).

use mysql_async::binlog::events::RowsEventData;

use super::{table_id, BinlogReader, REMEDY_DDL, REMEDY_IMAGE};
use crate::cdc::binlog_tables::TableColumns;
use crate::cdc::{ChangeOp, RowChange, TupleValue};
use crate::{Source, SourceError};

impl BinlogReader {
    /// A rows event: its rows become changes of the transaction, once the
    /// event is known to carry every column, as bound.
    pub(super) async fn rows(
        &mut self,
        source: &Source,
        rows: &RowsEventData<'_>,
    ) -> Result<(), SourceError> {
        let Some(tme) = self.stream.get_tme(rows.table_id()) else {
            return Err(SourceError::config(format!(
                "a row event in {} came before its table map",
                self.file
            )));
        };
        let (schema, table) = (
            tme.database_name().to_string(),
            tme.table_name().to_string(),
        );
        let key = (schema.clone(), table.clone());
        if !self.tables.contains_key(&key) {
            return Ok(());
        }
        let qualified = format!("{schema}.{table}");
        let (op, kind) = match rows {
            RowsEventData::WriteRowsEventV1(_) | RowsEventData::WriteRowsEvent(_) => {
                (ChangeOp::Insert, "an INSERT")
            }
            RowsEventData::DeleteRowsEventV1(_) | RowsEventData::DeleteRowsEvent(_) => {
                (ChangeOp::Delete, "a DELETE")
            }
            _ => (ChangeOp::Update, "an UPDATE"),
        };
        self.full_images(rows, &qualified, kind)?;
        self.columns(source, &schema, &table).await?;
        let tme = self
            .stream
            .get_tme(rows.table_id())
            .expect("looked up above");
        let columns = self.tables[&key].as_ref().expect("read above");
        if let Some(diff) = columns.differs(tme) {
            return Err(self.unfollowable(
                &qualified,
                format!("{kind} row event"),
                format!("its columns are not those the follower decodes the table's events with: {diff} (the table was altered after the follow began)"),
                REMEDY_DDL,
            ));
        }
        if let Some(now) = self.altered.get(&key) {
            return Err(self.unfollowable(
                &qualified,
                format!("{kind} row event"),
                format!(
                    "the table's columns changed after the follow began ({} then, {now} now): the events written before the change cannot be mapped as the table is read now",
                    columns.names.join(", ")
                ),
                REMEDY_DDL,
            ));
        }
        let changes = self.decode_rows(source, rows, &qualified, op).await?;
        self.pending.extend(changes);
        Ok(())
    }

    /// Stops before `rows` when an image lacks a column (`kind` names the
    /// event for the message).
    fn full_images(
        &self,
        rows: &RowsEventData<'_>,
        qualified: &str,
        kind: &str,
    ) -> Result<(), SourceError> {
        let total = rows.num_columns();
        for image in [rows.columns_before_image(), rows.columns_after_image()]
            .into_iter()
            .flatten()
        {
            if !image.all() {
                return Err(self.unfollowable(
                    qualified,
                    format!("{kind} row event with a partial row image"),
                    format!(
                        "the event holds {} of the table's {total} columns (binlog_row_image = MINIMAL or NOBLOB in the session that made it), so the rows' other values are not known",
                        image.count_ones()
                    ),
                    REMEDY_IMAGE,
                ));
            }
        }
        Ok(())
    }

    /// The rows of `rows` (a followed table's, its columns bound) as
    /// changes; character values in other character sets than UTF-8 are
    /// converted by the server.
    async fn decode_rows(
        &self,
        source: &Source,
        rows: &RowsEventData<'_>,
        qualified: &str,
        op: ChangeOp,
    ) -> Result<Vec<RowChange>, SourceError> {
        let tme = self
            .stream
            .get_tme(rows.table_id())
            .expect("looked up before");
        let key = (
            tme.database_name().to_string(),
            tme.table_name().to_string(),
        );
        let columns = self.tables[&key].as_ref().expect("bound before");
        // The library's decoding may panic on a value it gets wrong (an
        // arithmetic overflow): an error naming the table, not a crash.
        let decoded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            rows.rows(tme).collect::<Vec<_>>()
        }))
        .map_err(|_| {
            SourceError::config(format!(
                "a row of {qualified} at {} cannot be decoded (the binary log library failed on one of its values)",
                self.at_event()
            ))
        })?;
        let mut foreign = Vec::new();
        let mut changes = Vec::with_capacity(decoded.len());
        for row in decoded {
            let (before, after) = row.map_err(|e| {
                SourceError::config(format!(
                    "decode a row of {qualified} at {}: {e}",
                    self.at_event()
                ))
            })?;
            let n = changes.len();
            changes.push(RowChange {
                oid: table_id(&key.0, &key.1),
                table: qualified.to_string(),
                columns: columns.names.clone(),
                op,
                old: before.map(|r| image(columns, &r, (n, true), &mut foreign)),
                new: after.map(|r| image(columns, &r, (n, false), &mut foreign)),
                commit_end: 0,
            });
        }
        if !foreign.is_empty() {
            let values: Vec<(&str, &[u8])> = foreign
                .iter()
                .map(|f: &Foreign| (f.charset.as_str(), f.bytes.as_slice()))
                .collect();
            let texts = source.utf8_of(&values).await?;
            for (f, text) in foreign.iter().zip(texts) {
                let change = &mut changes[f.change];
                let tuple = if f.old {
                    &mut change.old
                } else {
                    &mut change.new
                };
                if let Some(t) = tuple {
                    t[f.column] = columns.decoders[f.column].text_value(text);
                }
            }
        }
        Ok(changes)
    }
}

/// A character value only the server can turn into text: where it goes.
struct Foreign {
    change: usize,
    old: bool,
    column: usize,
    charset: String,
    bytes: Vec<u8>,
}

/// A row image decoded with `columns`; its values in other character sets
/// than UTF-8 are noted in `foreign` (for the change `at`: its index, and
/// whether the image is the old one) to be converted.
fn image(
    columns: &TableColumns,
    row: &mysql_async::binlog::row::BinlogRow,
    at: (usize, bool),
    foreign: &mut Vec<Foreign>,
) -> Vec<TupleValue> {
    columns
        .decoders
        .iter()
        .enumerate()
        .map(|(i, d)| {
            if let Some((charset, bytes)) = d.foreign_charset(row.as_ref(i)) {
                foreign.push(Foreign {
                    change: at.0,
                    old: at.1,
                    column: i,
                    charset: charset.to_string(),
                    bytes: bytes.to_vec(),
                });
            }
            d.decode(row.as_ref(i))
        })
        .collect()
}
