//! Whether a text is one bracket-balanced JSON object, found 64 bytes at a
//! time: the quick path of [`crate::ItemJson::from_object_text`], the check a
//! worker makes of every item a queue message carries.
//!
//! Each block of 64 bytes becomes three bit masks (its `"`, its `\`, its
//! brackets); the bytes inside strings are the prefix XOR of the quotes, and
//! only the brackets outside them are visited, one by one. A text with a
//! backslash anywhere is left to the byte-by-byte check, which follows
//! escapes: items rarely hold one, and quotes are then all real quotes.

/// The deepest bracket nesting either check follows: more than DynamoDB's
/// 32 levels of documents take (two brackets a level).
pub(crate) const MAX_DEPTH: u32 = 128;

/// A block's bytes of interest, bit `i` for byte `i`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Masks {
    quote: u64,
    backslash: u64,
    /// `{`, `}`, `[` and `]`.
    bracket: u64,
}

/// `true` when `b` is one JSON object whose strings and brackets all close
/// where they should, nothing after it, and no backslash in it; `false`
/// when it is not, or holds a backslash (the caller then checks it byte by
/// byte). When this says `true`, the byte-by-byte check says the same.
pub(crate) fn is_one_object(b: &[u8]) -> bool {
    if b.first() != Some(&b'{') {
        return false;
    }
    // All ones when the bytes before the block end inside a string.
    let mut in_string = 0u64;
    // One bit per open bracket, innermost lowest: 1 for `{`, 0 for `[`.
    let mut open: u128 = 0;
    let mut depth = 0u32;
    for (n, chunk) in b.chunks(64).enumerate() {
        let masks = match <&[u8; 64]>::try_from(chunk) {
            Ok(block) => classify(block),
            Err(_) => {
                // The last block, padded with spaces: no byte of interest.
                let mut block = [b' '; 64];
                block[..chunk.len()].copy_from_slice(chunk);
                classify(&block)
            }
        };
        if masks.backslash != 0 {
            return false;
        }
        let inside = prefix_xor(masks.quote) ^ in_string;
        in_string = ((inside as i64) >> 63) as u64;
        let mut brackets = masks.bracket & !inside;
        while brackets != 0 {
            let at = n * 64 + brackets.trailing_zeros() as usize;
            brackets &= brackets - 1;
            let c = b[at];
            if c == b'{' || c == b'[' {
                if depth == MAX_DEPTH {
                    return false;
                }
                open = (open << 1) | u128::from(c == b'{');
                depth += 1;
            } else {
                if depth == 0 || (open & 1 == 1) != (c == b'}') {
                    return false;
                }
                open >>= 1;
                depth -= 1;
                if depth == 0 && at + 1 != b.len() {
                    return false;
                }
            }
        }
    }
    in_string == 0 && depth == 0
}

/// Bit `i` set when an odd number of bits at or below `i` are set in `x`:
/// for the quotes of a block, the bytes from an opening quote up to (not
/// including) its closing one.
fn prefix_xor(mut x: u64) -> u64 {
    x ^= x << 1;
    x ^= x << 2;
    x ^= x << 4;
    x ^= x << 8;
    x ^= x << 16;
    x ^= x << 32;
    x
}

#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
fn classify(block: &[u8; 64]) -> Masks {
    // SAFETY: the function needs SSE2, which this build was compiled to
    // require (the cfg above): every x86_64 CPU has it. It reads nothing
    // but `block` and touches no memory through pointers.
    unsafe { classify_sse2(block) }
}

#[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
fn classify(block: &[u8; 64]) -> Masks {
    classify_words(block)
}

/// [`classify`] sixteen bytes at a time with SSE2, which every x86_64 CPU
/// has. `[` and `]` are `{` and `}` with bit 5 clear, and no other byte
/// becomes either when bit 5 is set: two compares find all four.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[target_feature(enable = "sse2")]
fn classify_sse2(block: &[u8; 64]) -> Masks {
    use std::arch::x86_64::{
        _mm_cmpeq_epi8, _mm_movemask_epi8, _mm_or_si128, _mm_set1_epi8, _mm_set_epi64x,
    };
    let word = |at: usize| i64::from_le_bytes(block[at..at + 8].try_into().expect("eight bytes"));
    let mut masks = Masks {
        quote: 0,
        backslash: 0,
        bracket: 0,
    };
    for k in 0..4 {
        let v = _mm_set_epi64x(word(16 * k + 8), word(16 * k));
        let bits = |m| u64::from(_mm_movemask_epi8(m) as u16) << (16 * k);
        masks.quote |= bits(_mm_cmpeq_epi8(v, _mm_set1_epi8(b'"' as i8)));
        masks.backslash |= bits(_mm_cmpeq_epi8(v, _mm_set1_epi8(b'\\' as i8)));
        let folded = _mm_or_si128(v, _mm_set1_epi8(0x20));
        masks.bracket |= bits(_mm_or_si128(
            _mm_cmpeq_epi8(folded, _mm_set1_epi8(b'{' as i8)),
            _mm_cmpeq_epi8(folded, _mm_set1_epi8(b'}' as i8)),
        ));
    }
    masks
}

/// [`classify`] eight bytes at a time in plain integer arithmetic, for
/// CPUs without the SSE2 path (and to test that path against).
#[cfg_attr(all(target_arch = "x86_64", target_feature = "sse2"), allow(dead_code))]
fn classify_words(block: &[u8; 64]) -> Masks {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    // 0x80 in each byte of `w` equal to `c`, and nothing else.
    let equal = |w: u64, c: u8| {
        let x = w ^ (ONES * u64::from(c));
        !(((x & LOW7) + LOW7) | x | LOW7)
    };
    // The high bit of each byte gathered into eight bits, byte 0 lowest.
    let gather = |high: u64| ((high >> 7).wrapping_mul(0x0102_0408_1020_4080)) >> 56;
    let mut masks = Masks {
        quote: 0,
        backslash: 0,
        bracket: 0,
    };
    for k in 0..8 {
        let w = u64::from_le_bytes(block[8 * k..8 * k + 8].try_into().expect("eight bytes"));
        let folded = w | (ONES * 0x20);
        masks.quote |= gather(equal(w, b'"')) << (8 * k);
        masks.backslash |= gather(equal(w, b'\\')) << (8 * k);
        masks.bracket |= gather(equal(folded, b'{') | equal(folded, b'}')) << (8 * k);
    }
    masks
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each byte's masks the slow way.
    fn classify_bytes(block: &[u8; 64]) -> Masks {
        let mask =
            |f: &dyn Fn(u8) -> bool| (0..64).fold(0u64, |m, i| m | (u64::from(f(block[i])) << i));
        Masks {
            quote: mask(&|c| c == b'"'),
            backslash: mask(&|c| c == b'\\'),
            bracket: mask(&|c| matches!(c, b'{' | b'}' | b'[' | b']')),
        }
    }

    /// A small deterministic generator (xorshift), so failures repeat.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
    }

    #[test]
    fn every_byte_value_is_classified_at_every_position() {
        for value in 0..=255u8 {
            for at in 0..64 {
                let mut block = [b'a'; 64];
                block[at] = value;
                let want = classify_bytes(&block);
                assert_eq!(classify_words(&block), want, "byte {value:#x} at {at}");
                assert_eq!(classify(&block), want, "byte {value:#x} at {at}");
            }
        }
    }

    #[test]
    fn random_blocks_are_classified_as_byte_by_byte() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        // Bytes of interest and their neighbours, often.
        let alphabet = b"\"\\{}[]z;=]_}Z[{|\x00\x1f\x7f\x80\xff ";
        for _ in 0..20_000 {
            let mut block = [0u8; 64];
            for b in block.iter_mut() {
                let r = rng.next();
                *b = if r.is_multiple_of(3) {
                    (r >> 8) as u8
                } else {
                    alphabet[(r >> 8) as usize % alphabet.len()]
                };
            }
            let want = classify_bytes(&block);
            assert_eq!(classify_words(&block), want, "{block:?}");
            assert_eq!(classify(&block), want, "{block:?}");
        }
    }

    #[test]
    fn prefix_xor_marks_the_bytes_inside_quotes() {
        // Quotes at 2 and 5, then one at 60 left open.
        let quotes = (1u64 << 2) | (1 << 5) | (1 << 60);
        let want = (0b111u64 << 2) | (0b1111 << 60);
        assert_eq!(prefix_xor(quotes), want);
        assert_eq!(prefix_xor(0), 0);
        assert_eq!(prefix_xor(1), u64::MAX);
    }
}
