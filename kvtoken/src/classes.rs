//! Character classes the pre-tokenizer regexes use (`\p{L}`, `\p{N}`, `\s`), looked up in
//! tables generated from Oniguruma (see `tables.rs`).

use crate::tables::{ASCII, RANGES};

/// Neither a letter, a number nor white space (`[^\s\p{L}\p{N}]`).
pub(crate) const OTHER: u8 = 0;
/// `\p{L}`.
pub(crate) const LETTER: u8 = 1;
/// `\p{N}`.
pub(crate) const NUMBER: u8 = 2;
/// `\s` (including `\r` and `\n`).
pub(crate) const SPACE: u8 = 3;

/// The class of `c` as Oniguruma sees it.
#[inline]
pub(crate) fn class_of(c: char) -> u8 {
    let cp = c as u32;
    if cp < 0x80 {
        return ASCII.get(cp as usize).copied().unwrap_or(OTHER);
    }
    let i = RANGES.partition_point(|&(_, last, _)| last < cp);
    match RANGES.get(i) {
        Some(&(first, _, cls)) if first <= cp => cls,
        _ => OTHER,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokenizers::utils::SysRegex;

    #[test]
    fn classes_match_oniguruma_for_every_scalar() {
        let re = |p: &str| match SysRegex::new(p) {
            Ok(r) => r,
            Err(e) => panic!("{p}: {e}"),
        };
        let (l, n, s) = (re(r"\p{L}"), re(r"\p{N}"), re(r"\s"));
        let mut buf = [0u8; 4];
        for c in (0u32..=0x10FFFF).filter_map(char::from_u32) {
            let one: &str = c.encode_utf8(&mut buf);
            let is = |r: &SysRegex| r.find_iter(one).next().is_some();
            let expected = match (is(&l), is(&n), is(&s)) {
                (true, false, false) => LETTER,
                (false, true, false) => NUMBER,
                (false, false, true) => SPACE,
                (false, false, false) => OTHER,
                other => panic!("U+{:04X} in several classes: {other:?}", c as u32),
            };
            assert_eq!(class_of(c), expected, "U+{:04X}", c as u32);
        }
    }
}
