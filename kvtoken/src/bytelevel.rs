//! The GPT-2 byte-level alphabet: each byte maps to one printable char.

/// Whether byte `b` maps to the char of the same value.
fn printable(b: u8) -> bool {
    matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF)
}

/// Both directions of the byte-level mapping.
pub(crate) struct ByteLevel {
    to_char: [char; 256],
    /// Indexed by code point; every byte-level char is below U+0144.
    to_byte: [Option<u8>; 0x144],
}

impl ByteLevel {
    /// Builds the GPT-2 `bytes_to_unicode` tables: printable bytes map to themselves, the
    /// others, in byte order, to U+0100, U+0101, ...
    pub(crate) fn new() -> Self {
        let mut to_char = ['\0'; 256];
        let mut to_byte = [None; 0x144];
        let mut next = 256u32;
        for b in 0..=255u8 {
            let cp = if printable(b) {
                u32::from(b)
            } else {
                next += 1;
                next - 1
            };
            let c = char::from_u32(cp).unwrap_or('\u{FFFD}');
            if let Some(slot) = to_char.get_mut(usize::from(b)) {
                *slot = c;
            }
            if let Some(slot) = to_byte.get_mut(cp as usize) {
                *slot = Some(b);
            }
        }
        Self { to_char, to_byte }
    }

    /// The char byte `b` maps to.
    pub(crate) fn char_of(&self, b: u8) -> char {
        self.to_char[usize::from(b)]
    }

    /// The bytes a byte-level string stands for, or `None` if a char is outside the alphabet.
    pub(crate) fn decode(&self, s: &str) -> Option<Vec<u8>> {
        s.chars()
            .map(|c| self.to_byte.get(c as usize).copied().flatten())
            .collect()
    }

    /// [`ByteLevel::decode`] appended to `out`: false (and `out` as it was) when a char of
    /// `s` is not byte-level.
    pub(crate) fn decode_into(&self, s: &str, out: &mut Vec<u8>) -> bool {
        let start = out.len();
        for c in s.chars() {
            match self.to_byte.get(c as usize).copied().flatten() {
                Some(b) => out.push(b),
                None => {
                    out.truncate(start);
                    return false;
                }
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alphabet_is_a_bijection() {
        let bl = ByteLevel::new();
        let mut seen = std::collections::HashSet::new();
        for b in 0..=255u8 {
            let c = bl.char_of(b);
            assert!(seen.insert(c));
            assert_eq!(bl.decode(&c.to_string()), Some(vec![b]));
        }
        assert_eq!(bl.char_of(b' '), '\u{120}');
        assert_eq!(bl.char_of(b'\n'), '\u{10A}');
        assert_eq!(bl.char_of(0xAD), '\u{143}');
        assert_eq!(bl.decode("\u{144}"), None);
        assert_eq!(bl.decode("a\u{120}b"), Some(b"a b".to_vec()));
    }

    #[test]
    fn decode_into_appends_what_decode_returns_or_nothing() {
        let bl = ByteLevel::new();
        for s in [
            "a\u{120}b",
            "\u{10A}\u{10A}",
            "",
            "ab\u{144}",
            "\u{144}",
            "x\u{3042}y",
        ] {
            let mut out = b"prior".to_vec();
            let ok = bl.decode_into(s, &mut out);
            match bl.decode(s) {
                Some(bytes) => {
                    assert!(ok, "{s:?}");
                    assert_eq!(out, [b"prior".as_slice(), &bytes].concat(), "{s:?}");
                }
                None => {
                    assert!(!ok, "{s:?}");
                    assert_eq!(out, b"prior", "{s:?}");
                }
            }
        }
    }
}
