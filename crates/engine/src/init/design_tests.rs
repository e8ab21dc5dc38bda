//! Unit tests of the design rule, on Chinook's and the shop's shapes.

use sql2ddb_source::{ForeignKey, SchemaColumn};

use super::*;

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// A table: its key, its other columns (`?` suffix: nullable), and its
/// foreign keys (columns, table, referenced columns, cascade).
fn table(
    name: &str,
    pk: &[&str],
    other: &[&str],
    fks: &[(&[&str], &str, &[&str], bool)],
) -> SchemaTable {
    let column = |c: &str| SchemaColumn {
        name: c.trim_end_matches('?').into(),
        sql_type: "integer".into(),
        nullable: c.ends_with('?'),
        precision: None,
        max_length: None,
    };
    SchemaTable {
        name: name.into(),
        columns: pk.iter().chain(other).map(|c| column(c)).collect(),
        primary_key: strings(pk),
        foreign_keys: fks
            .iter()
            .map(|(cols, t, refs, cascade)| ForeignKey {
                columns: strings(cols),
                ref_table: t.to_string(),
                ref_columns: strings(refs),
                on_delete_cascade: *cascade,
            })
            .collect(),
        unique: Vec::new(),
        kind: Default::default(),
        children: 0,
    }
}

/// Measurements: rows per table, largest group per (table, fk index).
fn measured(rows: &[u64], largest: &[((usize, usize), u64)]) -> Measured {
    Measured {
        rows: rows.to_vec(),
        largest: largest.iter().copied().collect(),
    }
}

/// Chinook's shape: tracks of albums, typed by a 5-row media type;
/// invoice lines of invoices and of tracks; playlists of tracks; a
/// customer's nullable support representative.
fn chinook() -> (Vec<SchemaTable>, Measured) {
    let tables = vec![
        table("album", &["album_id"], &[], &[]),
        table("media_type", &["media_type_id"], &[], &[]),
        table(
            "track",
            &["track_id"],
            &["album_id", "media_type_id"],
            &[
                (&["media_type_id"], "media_type", &["media_type_id"], false),
                (&["album_id"], "album", &["album_id"], false),
            ],
        ),
        table("employee", &["employee_id"], &[], &[]),
        table(
            "customer",
            &["customer_id"],
            &["support_rep_id?"],
            &[(&["support_rep_id"], "employee", &["employee_id"], false)],
        ),
        table(
            "invoice",
            &["invoice_id"],
            &["customer_id"],
            &[(&["customer_id"], "customer", &["customer_id"], false)],
        ),
        table(
            "invoice_line",
            &["invoice_line_id"],
            &["track_id", "invoice_id"],
            &[
                (&["track_id"], "track", &["track_id"], false),
                (&["invoice_id"], "invoice", &["invoice_id"], false),
            ],
        ),
        table("playlist", &["playlist_id"], &[], &[]),
        table(
            "playlist_track",
            &["playlist_id", "track_id"],
            &[],
            &[
                (&["track_id"], "track", &["track_id"], false),
                (&["playlist_id"], "playlist", &["playlist_id"], false),
            ],
        ),
    ];
    let m = measured(
        &[347, 5, 3503, 8, 59, 412, 2240, 18, 8715],
        &[
            ((2, 0), 3034),
            ((2, 1), 57),
            ((4, 0), 21),
            ((5, 0), 7),
            ((6, 0), 2),
            ((6, 1), 14),
            ((8, 0), 5),
            ((8, 1), 3290),
        ],
    );
    (tables, m)
}

#[test]
fn owners_before_lookups_and_links_with_their_quieter_side() {
    let (tables, m) = chinook();
    let d = design(&tables, &m, true);
    // A track goes under its album, never under its 5-row media type.
    assert_eq!(
        d.roles[2],
        Role::Collection {
            parent: 0,
            columns: strings(&["album_id"])
        }
    );
    assert!(d.notes[2][0].starts_with("not under media_type (media_type_id): a lookup"));
    assert_eq!(d.roles[1], Role::Root);
    // A nullable foreign key is never a key, and says why.
    assert_eq!(d.roles[4], Role::Root);
    assert!(d.notes[4][0].contains("nullable"), "{:?}", d.notes[4]);
    // An invoice in its customer's collection; its lines embedded in
    // it (the invoice is referenced by one table, the track by two).
    assert!(matches!(d.roles[5], Role::Collection { parent: 4, .. }));
    assert_eq!(
        d.roles[6],
        Role::Embedded {
            parent: 5,
            columns: strings(&["invoice_id"])
        }
    );
    // The link lives with its track (at most 5 playlists per track),
    // not with playlist 1 and its 3,290 tracks.
    assert_eq!(
        d.roles[8],
        Role::Link {
            side: 2,
            side_columns: strings(&["track_id"]),
            other: 7,
            other_columns: strings(&["playlist_id"])
        }
    );
    assert!(d.has_links());
    // Nothing nested without --single-table.
    let flat = design(&tables, &m, false);
    assert!(flat.roles.iter().all(|r| *r == Role::Root));
}

#[test]
fn identifying_then_cascading_key_wins_whatever_the_catalog_order() {
    let fks: [(&[&str], &str, &[&str], bool); 2] = [
        (&["sku"], "products", &["sku"], false),
        (&["order_id"], "orders", &["order_id"], false),
    ];
    let mut reversed = fks;
    reversed.reverse();
    for fks in [fks, reversed] {
        let tables = vec![
            table("customers", &["customer_id"], &[], &[]),
            table(
                "orders",
                &["order_id"],
                &["customer_id"],
                &[(&["customer_id"], "customers", &["customer_id"], false)],
            ),
            table("order_lines", &["order_id", "line_no"], &["sku"], &fks),
            table("products", &["sku"], &[], &[]),
        ];
        let sku = match fks[0].1 {
            "products" => 0,
            _ => 1,
        };
        let m = measured(
            &[500, 2000, 6000, 50],
            &[((1, 0), 4), ((2, sku), 150), ((2, 1 - sku), 3)],
        );
        let d = design(&tables, &m, true);
        assert_eq!(d.roles[0], Role::Root);
        assert!(matches!(&d.roles[1], Role::Collection { parent: 0, .. }));
        assert!(
            matches!(&d.roles[2], Role::Embedded { parent: 1, columns } if columns == &["order_id"])
        );
        assert_eq!(d.roles[3], Role::Root);
    }
    // ON DELETE CASCADE names the owner among foreign keys outside the key.
    let tables = vec![
        table("a", &["a_id"], &[], &[]),
        table("b", &["b_id"], &[], &[]),
        table(
            "c",
            &["c_id"],
            &["a_id", "b_id"],
            &[
                (&["a_id"], "a", &["a_id"], false),
                (&["b_id"], "b", &["b_id"], true),
            ],
        ),
    ];
    let m = measured(&[100, 100, 1000], &[((2, 0), 10), ((2, 1), 10)]);
    let d = design(&tables, &m, true);
    assert!(matches!(&d.roles[2], Role::Collection { parent: 1, .. }));
    assert!(
        d.notes[2][0].contains("ON DELETE CASCADE"),
        "{:?}",
        d.notes[2]
    );
}

#[test]
fn small_databases_have_no_hot_partition() {
    // 3 orders of one customer in 7 rows: far over 5%, but 4 items.
    let tables = vec![
        table("customers", &["customer_id"], &[], &[]),
        table(
            "orders",
            &["order_id"],
            &["customer_id"],
            &[(&["customer_id"], "customers", &["customer_id"], false)],
        ),
    ];
    let d = design(&tables, &measured(&[4, 3], &[((1, 0), 3)]), true);
    assert!(matches!(&d.roles[1], Role::Collection { parent: 0, .. }));
}
