//! A duplicate-key check for JSON bodies: one serde pass over the document that refuses any
//! object naming a key twice, with the JSON path of the second occurrence.
//!
//! `serde_json::Value` (the checked TensorRT-LLM decoder) keeps the last of duplicate keys and
//! serde's derived structs (the fast path) ignore duplicates of unknown keys; both decoders run
//! this check first, so a duplicate is refused alike ([`Error::EventDuplicateField`]), as the
//! msgpack decoders refuse it. Keys of one object are compared in a fixed stack array (no
//! allocation for objects of up to [`INLINE_KEYS`] keys, which every engine object is), and the
//! path is only written out on error.

use super::{Limits, Location};
use crate::Error;
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use std::borrow::Cow;
use std::fmt;

/// Keys compared without allocating; larger objects spill into a `Vec`.
pub(crate) const INLINE_KEYS: usize = 16;

/// One step of the path to the value being scanned.
enum Seg<'de> {
    Index(usize),
    Key(Cow<'de, str>),
}

/// What the scan found.
struct Dup {
    path: String,
    key: String,
}

struct Scan<'p, 'de> {
    path: &'p mut Vec<Seg<'de>>,
    depth: usize,
    max_depth: usize,
    found: &'p mut Option<Dup>,
}

fn render(path: &[Seg<'_>]) -> String {
    let mut s = String::from("$");
    for seg in path {
        match seg {
            Seg::Index(i) => s.push_str(&format!("[{i}]")),
            Seg::Key(k) => {
                s.push('.');
                s.push_str(k);
            }
        }
    }
    s
}

impl<'de> DeserializeSeed<'de> for Scan<'_, 'de> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Scan<'_, 'de> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        if self.depth >= self.max_depth {
            // Deeper than the limits allow: the decoders refuse it with their own error.
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            return Ok(());
        }
        let mut i = 0;
        loop {
            self.path.push(Seg::Index(i));
            let next = seq.next_element_seed(Scan {
                path: &mut *self.path,
                depth: self.depth + 1,
                max_depth: self.max_depth,
                found: &mut *self.found,
            });
            self.path.pop();
            match next? {
                Some(()) if self.found.is_some() => {
                    while seq.next_element::<IgnoredAny>()?.is_some() {}
                    return Ok(());
                }
                Some(()) => i += 1,
                None => return Ok(()),
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut inline: [Option<Cow<'de, str>>; INLINE_KEYS] = Default::default();
        let mut n = 0usize;
        let mut spill: Vec<Cow<'de, str>> = Vec::new();
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            if self.found.is_some() {
                map.next_value::<IgnoredAny>()?;
                continue;
            }
            let seen = inline[..n.min(INLINE_KEYS)]
                .iter()
                .flatten()
                .chain(spill.iter())
                .any(|k| *k == key);
            if seen {
                *self.found = Some(Dup {
                    path: render(self.path),
                    key: key.into_owned(),
                });
                map.next_value::<IgnoredAny>()?;
                continue;
            }
            let slot_key = key.clone();
            if n < INLINE_KEYS {
                inline[n] = Some(slot_key);
            } else {
                spill.push(slot_key);
            }
            n += 1;
            if self.depth >= self.max_depth {
                map.next_value::<IgnoredAny>()?;
                continue;
            }
            self.path.push(Seg::Key(key));
            let r = map.next_value_seed(Scan {
                path: &mut *self.path,
                depth: self.depth + 1,
                max_depth: self.max_depth,
                found: &mut *self.found,
            });
            self.path.pop();
            r?;
        }
        Ok(())
    }
}

/// Refuses a body in which some object names a key twice ([`Error::EventDuplicateField`] at
/// the object's JSON path). Syntax errors are left to the decoders (`Ok`), which report them.
pub(crate) fn check(body: &[u8], limits: &Limits) -> Result<(), Error> {
    let mut path = Vec::new();
    let mut found = None;
    let mut d = serde_json::Deserializer::from_slice(body);
    let scan = Scan {
        path: &mut path,
        depth: 0,
        max_depth: limits.max_depth,
        found: &mut found,
    };
    // A syntax error is the decoder's to report, with its position.
    let _ = scan.deserialize(&mut d);
    match found {
        Some(Dup { path, key }) => Err(Error::EventDuplicateField {
            at: Location::path(path),
            field: key,
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dup(body: &str) -> Option<(String, String)> {
        match check(body.as_bytes(), &Limits::default()) {
            Err(Error::EventDuplicateField { at, field }) => Some((at.path, field)),
            _ => None,
        }
    }

    #[test]
    fn finds_duplicates_at_any_depth_and_only_them() {
        assert_eq!(dup(r#"[{"a":1,"b":2}]"#), None);
        assert_eq!(dup(r#"[{"a":1,"a":2}]"#), Some(("$[0]".into(), "a".into())));
        assert_eq!(
            dup(r#"[{"data":{"blocks":[{"tokens":[{"x":1},{"x":1,"x":2}]}]}}]"#),
            Some(("$[0].data.blocks[0].tokens[1]".into(), "x".into()))
        );
        // An escaped spelling of the same key is the same key.
        assert_eq!(
            dup(r#"{"ab":1,"a\u0062":2}"#),
            Some(("$".into(), "ab".into()))
        );
        // Objects wider than the inline array.
        let wide: Vec<String> = (0..40).map(|i| format!("\"k{i}\":0")).collect();
        assert_eq!(dup(&format!("{{{}}}", wide.join(","))), None);
        assert_eq!(
            dup(&format!("{{{},\"k37\":1}}", wide.join(","))),
            Some(("$".into(), "k37".into()))
        );
        // Malformed bodies are the decoders' to refuse.
        assert_eq!(dup(r#"[{"a":1,"#), None);
    }
}
