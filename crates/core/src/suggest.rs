//! "Did you mean": the name closest to a mistyped one among those that
//! exist, for the errors that name a column or a table.

/// The candidate `name` most likely stands for: the same name in another
/// case, else the closest by edit distance when that distance is small for
/// the name's length (one edit up to four characters, then one more per
/// four); `None` when nothing is close.
pub fn closest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let lower = name.to_lowercase();
    let most = 1 + name.chars().count().saturating_sub(1) / 4;
    let mut best: Option<(usize, &str)> = None;
    for c in candidates {
        let distance = match c.to_lowercase() == lower {
            true => 0,
            false => edits(&lower, &c.to_lowercase()),
        };
        if distance <= most && best.is_none_or(|(d, _)| distance < d) {
            best = Some((distance, c));
        }
    }
    best.map(|(_, c)| c).filter(|c| *c != name)
}

/// Levenshtein distance, counting a swap of two neighbours as one edit.
fn edits(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let width = b.len() + 1;
    let mut d = vec![0usize; (a.len() + 1) * width];
    for (i, row) in d.chunks_mut(width).enumerate() {
        row[0] = i;
    }
    for (j, cell) in d.iter_mut().take(width).enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (d[(i - 1) * width + j] + 1)
                .min(d[i * width + j - 1] + 1)
                .min(d[(i - 1) * width + j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[(i - 2) * width + j - 2] + 1);
            }
            d[i * width + j] = v;
        }
    }
    d[a.len() * width + b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_typo_finds_its_column_and_a_stranger_finds_nothing() {
        let columns = ["order_id", "customer_id", "total", "created_at"];
        assert_eq!(closest("custmer_id", columns), Some("customer_id"));
        assert_eq!(closest("cusotmer_id", columns), Some("customer_id"));
        assert_eq!(closest("Total", columns), Some("total"));
        assert_eq!(closest("totl", columns), Some("total"));
        assert_eq!(closest("order_idd", columns), Some("order_id"));
        assert_eq!(closest("shipping_address", columns), None);
        assert_eq!(closest("id", columns), None);
        // The name itself is no suggestion.
        assert_eq!(closest("total", columns), None);
    }

    #[test]
    fn distances_count_inserts_deletes_changes_and_swaps() {
        assert_eq!(edits("", "abc"), 3);
        assert_eq!(edits("abc", "abc"), 0);
        assert_eq!(edits("abc", "acb"), 1);
        assert_eq!(edits("kitten", "sitting"), 3);
    }
}
