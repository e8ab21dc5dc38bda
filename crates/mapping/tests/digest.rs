//! [`Plan::item_digest`]: equal for mappings that make the same items,
//! different (and naming the part) for mappings that do not.

use std::path::Path;

use sql2ddb_mapping::{ItemDigest, Plan};

/// The example shop mapping: three entities, an index, an embed, a pointer.
fn shop() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../mappings/shop.toml");
    std::fs::read_to_string(path).unwrap()
}

fn digest_of(text: &str, file: &str) -> ItemDigest {
    Plan::parse(text, Path::new(file), &|_| None)
        .unwrap_or_else(|e| panic!("mapping should load: {e}\n{text}"))
        .item_digest()
}

fn digest(text: &str) -> ItemDigest {
    digest_of(text, "shop.toml")
}

/// `shop()` with `from` replaced by `to` (which must occur).
fn edited(from: &str, to: &str) -> String {
    let text = shop();
    assert!(text.contains(from), "{from:?} is not in the mapping");
    text.replacen(from, to, 1)
}

/// The parts named as changed between the shop mapping and `text`.
fn changes(text: &str) -> Vec<String> {
    digest(text).changes_since(&digest(&shop()))
}

#[test]
fn comments_layout_order_of_tables_and_file_name_do_not_change_the_digest() {
    let original = digest(&shop());
    let without_comments: String = shop()
        .lines()
        .map(|l| match l.find(" #") {
            Some(i) if !l.contains('"') || l.rfind('"').unwrap() < i => &l[..i],
            _ => l,
        })
        .filter(|l| !l.trim_start().starts_with('#'))
        .map(|l| format!("{}\n\n", l.trim_end()))
        .collect();
    assert_ne!(without_comments, shop());
    assert_eq!(digest(&without_comments), original);

    // Attributes listed in another order, and the [[pointer]] before the entities.
    let reordered = edited(
        "entity = \"customer\"\nsignup = { column = \"created_at\", format = \"epoch_seconds\" }",
        "signup = { format = \"epoch_seconds\", column = \"created_at\" }\nentity = \"customer\"",
    );
    assert_eq!(digest(&reordered), original);
    let text = shop();
    let at = text.find("[[pointer]]").unwrap();
    let first_entity = text.find("[[entity]]").unwrap();
    let pointer_first = format!(
        "{}{}\n{}",
        &text[..first_entity],
        &text[at..],
        &text[first_entity..at]
    );
    assert_eq!(digest(&pointer_first), original);

    assert_eq!(digest_of(&shop(), "/elsewhere/copy-of-shop.toml"), original);
    assert!(original.changes_since(&original).is_empty());
    assert_eq!(original.hash().len(), 32);
    assert_eq!(
        ItemDigest::from_parts(original.parts().clone()),
        original,
        "a digest read back from its parts is the same digest"
    );
}

#[test]
fn settings_that_do_not_change_items_do_not_change_the_digest() {
    let original = digest(&shop());
    let settings = edited(
        "[target]\n",
        "page_size = 10\nread_parallelism = 7\n\n[writer]\nconcurrency = 3\nmax_wcu = 50\nadaptive = false\n\n[target]\n",
    );
    // `page_size` and `read_parallelism` belong to [source]: the text above
    // puts them there, before [target]; [writer] is its own table.
    let settings = settings
        .replacen(
            "url = \"${SHOP_DATABASE_URL:-sqlite://examples/shop.db}\"",
            "url = \"postgres://other@db:5432/shop\"",
            1,
        )
        .replacen(
            "endpoint = \"local\"",
            "endpoint = \"http://127.0.0.1:8000\"\nregion = \"eu-west-1\"\nbilling = { read = 5, write = 5 }",
            1,
        )
        .replacen(
            "from = \"products\"",
            "from = \"products\"\npage_size = 99\nread_parallelism = 2",
            1,
        );
    let changed = digest(&settings);
    assert_eq!(changed, original, "{:?}", changed.changes_since(&original));
}

#[test]
fn a_changed_pk_template_is_named() {
    let text = edited("pk = \"PRODUCT#{sku}\"", "pk = \"P#{sku}\"");
    assert_eq!(changes(&text), ["entity product: pk template"]);
    assert_ne!(digest(&text).hash(), digest(&shop()).hash());
}

#[test]
fn a_changed_sk_template_is_named() {
    let text = edited(
        "sk = \"ORDER#{order_id:010}\"",
        "sk = \"ORDER#{order_id:012}\"",
    );
    assert_eq!(changes(&text), ["entity order: sk template"]);
}

#[test]
fn a_changed_attribute_its_format_or_its_type_is_named() {
    let format = edited("format = \"epoch_seconds\"", "format = \"epoch_millis\"");
    assert_eq!(changes(&format), ["entity customer: attributes"]);

    let added = edited(
        "entity = \"product\"",
        "entity = \"product\"\nprice = { column = \"price\", type = \"N\" }",
    );
    assert_eq!(changes(&added), ["entity product: attributes"]);
    let as_text = added.replacen("type = \"N\"", "type = \"S\"", 1);
    assert_eq!(
        digest(&as_text).changes_since(&digest(&added)),
        ["entity product: attributes"]
    );
}

#[test]
fn excluded_columns_nulls_and_invalid_are_named() {
    let exclude = edited(
        "exclude = [\"password_hash\"]",
        "exclude = [\"password_hash\", \"email\"]",
    );
    assert_eq!(changes(&exclude), ["entity customer: excluded columns"]);
    let same = digest(&exclude.replacen(
        "[\"password_hash\", \"email\"]",
        "[\"email\", \"password_hash\"]",
        1,
    ));
    assert_eq!(
        same,
        digest(&exclude),
        "the order of exclude changes nothing"
    );

    let nulls = edited(
        "from = \"customers\"",
        "from = \"customers\"\nnulls = \"null\"",
    );
    assert_eq!(changes(&nulls), ["entity customer: nulls"]);
    let invalid = edited(
        "from = \"customers\"",
        "from = \"customers\"\ninvalid = \"null\"",
    );
    assert_eq!(changes(&invalid), ["entity customer: invalid"]);
}

#[test]
fn source_key_columns_embeds_pointers_indexes_table_and_timezone_are_named() {
    let cases = [
        (
            edited("from = \"products\"", "from = \"products_v2\""),
            "entity product: source",
        ),
        (
            edited(
                "from = \"products\"",
                "from = \"products\"\nkey = [\"sku\"]",
            ),
            "entity product: key columns",
        ),
        (
            edited(
                "order_by = [\"line_no\"]",
                "order_by = [\"line_no\", \"sku\"]",
            ),
            "entity order: embeds",
        ),
        (
            edited(
                "max = { attribute = \"orderId\"",
                "max = { attribute = \"lastOrderId\"",
            ),
            "pointer LAST_ORDER",
        ),
        (
            edited("name = \"GSI1\"", "name = \"ByStatus\""),
            "target indexes",
        ),
        (
            edited("table = \"shop\"", "table = \"shop2\""),
            "target table",
        ),
        (
            edited("[target]\n", "timezone = \"Europe/Paris\"\n\n[target]\n"),
            "source timezone",
        ),
    ];
    for (text, part) in cases {
        assert_eq!(changes(&text), [part], "{part}");
    }
}

#[test]
fn an_entity_added_or_removed_is_named() {
    let text = shop();
    let start = text.find("[[entity]]\nname = \"product\"").unwrap();
    let end = text.find("[[entity]]\nname = \"order\"").unwrap();
    let without_product = format!("{}{}", &text[..start], &text[end..]);
    let removed = changes(&without_product);
    assert!(
        removed.contains(&"entities".to_string())
            && removed.contains(&"entity product: pk template (removed)".to_string()),
        "{removed:?}"
    );
    let added = digest(&shop()).changes_since(&digest(&without_product));
    assert!(
        added.contains(&"entity product: pk template (added)".to_string()),
        "{added:?}"
    );
}
