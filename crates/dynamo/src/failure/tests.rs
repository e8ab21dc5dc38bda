use super::*;

/// The rows of docs/operations.md's table of codes: (code, status, class).
fn documented_rows() -> Vec<(String, String, String)> {
    let doc = include_str!("../../../../docs/operations.md");
    let table = doc
        .split("| code | HTTP status | class |")
        .nth(1)
        .expect("docs/operations.md has the table of codes");
    table
        .lines()
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            let cells: Vec<String> = l
                .trim_matches('|')
                .split('|')
                .map(|c| c.trim().trim_matches('`').to_string())
                .collect();
            assert_eq!(cells.len(), 3, "a row of three cells: {l}");
            (cells[0].clone(), cells[1].clone(), cells[2].clone())
        })
        .collect()
}

/// The statuses a row's status cell stands for.
fn statuses(cell: &str) -> Vec<u16> {
    match cell {
        "5xx" => vec![500, 502, 503, 504, 599],
        "4xx" => vec![400, 401, 403, 404, 409, 413],
        n => vec![n.parse().expect("a status")],
    }
}

/// The codes a row's code cell stands for.
fn codes(cell: &str) -> Vec<&str> {
    match cell {
        "an unknown code, or none" | "any code, or none" => {
            vec!["", "SomeNewException", "com.example#Unheard"]
        }
        code => vec![code],
    }
}

#[test]
fn every_row_of_the_documented_table_classifies_as_it_says() {
    let rows = documented_rows();
    assert!(rows.len() >= 30, "the table has its rows: {}", rows.len());
    for (code, status, class) in &rows {
        for s in statuses(status) {
            for c in codes(code) {
                let got = Failure::of_service(c, s);
                assert_eq!(got.name(), class, "code `{c}`, HTTP {s}");
            }
        }
    }
}

#[test]
fn every_listed_code_has_its_row_in_the_table() {
    let rows = documented_rows();
    for list in [THROTTLING_CODES, TRANSIENT_CODES, TABLE_FAULTS, ITEM_CODES] {
        for code in list {
            assert!(
                rows.iter().any(|(c, _, _)| c == code),
                "{code} is classified in code but missing from docs/operations.md"
            );
        }
    }
}

#[test]
fn real_service_4_transient_codes_are_never_the_items_fault() {
    // The codes of issue case 4: each used to reject every row of its chunk.
    for (code, status) in [
        ("TooManyRequestsException", 429),
        ("", 429),
        ("RequestTimeout", 400),
        ("RequestTimeTooSkewed", 403),
        ("RequestExpired", 400),
        ("ExpiredTokenException", 400),
        ("SomethingNew", 500),
        ("SomethingNew", 400),
    ] {
        let f = Failure::of_service(code, status);
        assert_ne!(f, Failure::ItemRejected, "{code} {status}");
    }
    assert_eq!(
        Failure::of_service("ValidationException", 400),
        Failure::ItemRejected
    );
    assert!(Failure::Throttled.is_retryable() && Failure::Transient.is_retryable());
    assert!(!Failure::TableFault.is_retryable() && !Failure::ItemRejected.is_retryable());
}
