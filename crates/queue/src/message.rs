//! What a work queue carries: a page of a migration (items to write) or a
//! page of an update job (keys to change). Each kind has a body format of
//! its own ([`crate::codec`]); a receiver tells them apart by the message,
//! never by a field of the page.

use sql2ddb_core::{BatchPart, EncodedItem, RunId, UpdatePage, WorkBatch};

/// One message of a work queue.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// A page of a migration: items to write, pointers to move.
    Migration(WorkBatch),
    /// A page of an update job: keys of matching items, and the change to
    /// apply to each.
    Update(UpdatePage),
}

impl From<WorkBatch> for Message {
    fn from(batch: WorkBatch) -> Self {
        Message::Migration(batch)
    }
}

impl From<UpdatePage> for Message {
    fn from(page: UpdatePage) -> Self {
        Message::Update(page)
    }
}

impl Message {
    /// The run the page belongs to.
    pub fn run_id(&self) -> &RunId {
        match self {
            Message::Migration(b) => &b.run_id,
            Message::Update(p) => &p.run_id,
        }
    }

    /// The entity (a migration) or job (an update) of the page.
    pub fn entity(&self) -> &str {
        match self {
            Message::Migration(b) => &b.entity,
            Message::Update(p) => &p.entity,
        }
    }

    /// The page's segment.
    pub fn segment(&self) -> u32 {
        match self {
            Message::Migration(b) => b.segment,
            Message::Update(p) => p.segment,
        }
    }

    /// The page's number within its segment.
    pub fn page(&self) -> u64 {
        match self {
            Message::Migration(b) => b.page,
            Message::Update(p) => p.page,
        }
    }

    /// Which part of its page the message is.
    pub fn part(&self) -> BatchPart {
        match self {
            Message::Migration(b) => b.part,
            Message::Update(p) => p.part,
        }
    }

    /// Rows (a migration) or matching items (an update) the message accounts for.
    pub fn rows_read(&self) -> u64 {
        match self {
            Message::Migration(b) => b.rows_read,
            Message::Update(p) => p.rows_read,
        }
    }

    /// The items (a migration) or keys (an update) it carries.
    pub fn items(&self) -> &[EncodedItem] {
        match self {
            Message::Migration(b) => &b.items,
            Message::Update(p) => &p.keys,
        }
    }

    /// The same page with only `items[start..end]`, as part `part`
    /// accounting for `rows_read` rows.
    pub(crate) fn cut(&self, start: usize, end: usize, part: BatchPart, rows_read: u64) -> Message {
        match self {
            Message::Migration(b) => Message::Migration(WorkBatch {
                run_id: b.run_id.clone(),
                entity: b.entity.clone(),
                segment: b.segment,
                page: b.page,
                part,
                rows_read,
                items: b.items[start..end].to_vec(),
                pointers: b.pointers.clone(),
            }),
            Message::Update(p) => Message::Update(UpdatePage {
                run_id: p.run_id.clone(),
                entity: p.entity.clone(),
                segment: p.segment,
                page: p.page,
                part,
                rows_read,
                keys: p.keys[start..end].to_vec(),
                change: p.change.clone(),
            }),
        }
    }
}
