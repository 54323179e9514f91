//! Exact-key JSON for request bodies, borrowed from the caller's bytes.
//!
//! serde's derive refuses duplicate keys and `serde_json::Value` copies every string; the
//! gateway contract (docs/contracts/registry.md §9.2) wants case-sensitive keys where the **last
//! duplicate wins**, like Python's `json.loads`. [`Json`] is a borrowed tree that keeps every
//! member in document order (strings without escapes are borrowed, never copied) and looks keys
//! up from the end. [`RawObject`] keeps a top-level object's values unparsed (`RawValue`), so
//! fields the scan only tests for presence are never built.
//!
//! Numbers are read as Python's `json.loads` reads them: an integer literal stays an exact
//! integer whatever its size (serde_json alone reads one beyond 64 bits, and `-0`, as a float;
//! [`parse`] finds those literals in the text and makes them integers again: [`Json::I128`],
//! or a refusal past `i128`, see [`parse`]); any other literal is a float.
//!
//! The slow twin is `serde_json::Value` (its maps also keep the last duplicate); a proptest in
//! this module checks the two agree.

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::cell::Cell;
use std::fmt;

/// A parsed JSON value borrowing its strings from the input where it can.
#[derive(Debug, Clone, PartialEq)]
pub enum Json<'a> {
    /// `null`
    Null,
    /// `true` / `false`
    Bool(bool),
    /// A negative integer that fits `i64`.
    I64(i64),
    /// A non-negative integer that fits `u64`.
    U64(u64),
    /// An integer that fits neither `i64` nor `u64` but fits `i128` (Python keeps every JSON
    /// integer exact; only [`parse`] builds this variant).
    I128(i128),
    /// Any other number (serde_json parses it exactly, like Python's `float()`).
    F64(f64),
    /// A string (borrowed when it holds no escapes).
    Str(Cow<'a, str>),
    /// An array.
    Array(Vec<Json<'a>>),
    /// An object: every member in document order, duplicates kept.
    Object(JsonObject<'a>),
}

/// The members of a JSON object in document order (duplicates kept; lookups take the last).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct JsonObject<'a>(pub Vec<(Cow<'a, str>, Json<'a>)>);

impl<'a> JsonObject<'a> {
    /// The value of the last member named exactly `key`.
    pub fn get(&self, key: &str) -> Option<&Json<'a>> {
        self.0.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// `key` exists and is not `null` ("present" in docs/contracts/registry.md §9.2).
    pub fn present(&self, key: &str) -> bool {
        self.get(key).is_some_and(|v| !matches!(v, Json::Null))
    }

    /// Distinct keys in first-occurrence order with their last values (Python dict semantics).
    pub fn effective(&self) -> Vec<(&str, &Json<'a>)> {
        let mut out: Vec<(&str, &Json<'a>)> = Vec::with_capacity(self.0.len());
        for (k, v) in &self.0 {
            match out.iter_mut().find(|(ok, _)| *ok == k.as_ref()) {
                Some(slot) => slot.1 = v,
                None => out.push((k.as_ref(), v)),
            }
        }
        out
    }
}

impl<'a> Json<'a> {
    /// The string, if this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Json::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The object, if this is one.
    pub fn as_object(&self) -> Option<&JsonObject<'a>> {
        match self {
            Json::Object(o) => Some(o),
            _ => None,
        }
    }

    /// The array, if this is one.
    pub fn as_array(&self) -> Option<&[Json<'a>]> {
        match self {
            Json::Array(a) => Some(a),
            _ => None,
        }
    }

    /// Serialises back to JSON text in document order (every member kept), with Python's
    /// `json.dumps` separators and escapes.
    pub fn write_json(&self, out: &mut String) {
        match self {
            Json::Null => out.push_str("null"),
            Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Json::I64(n) => out.push_str(&n.to_string()),
            Json::U64(n) => out.push_str(&n.to_string()),
            Json::I128(n) => out.push_str(&n.to_string()),
            Json::F64(f) => out.push_str(&crate::pyjson::float_repr(*f, true)),
            Json::Str(s) => crate::pyjson::write_str(out, s, false),
            Json::Array(a) => {
                out.push('[');
                for (i, v) in a.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    v.write_json(out);
                }
                out.push(']');
            }
            Json::Object(o) => {
                out.push('{');
                for (i, (k, v)) in o.0.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    crate::pyjson::write_str(out, k, false);
                    out.push_str(": ");
                    v.write_json(out);
                }
                out.push('}');
            }
        }
    }

    /// [`Json::write_json`] into a new string.
    pub fn to_json_string(&self) -> String {
        let mut s = String::new();
        self.write_json(&mut s);
        s
    }

    /// Converts to the slow twin (`serde_json::Value`, last duplicate wins).
    pub fn to_serde(&self) -> serde_json::Value {
        use serde_json::Value as V;
        match self {
            Json::Null => V::Null,
            Json::Bool(b) => V::Bool(*b),
            Json::I64(n) => V::from(*n),
            Json::U64(n) => V::from(*n),
            // serde_json without `arbitrary_precision` holds such an integer as the nearest
            // float (Rust's integer-to-float conversion rounds to nearest, as its parser does).
            Json::I128(n) => serde_json::Number::from_f64(*n as f64).map_or(V::Null, V::Number),
            Json::F64(f) => serde_json::Number::from_f64(*f).map_or(V::Null, V::Number),
            Json::Str(s) => V::String(s.to_string()),
            Json::Array(a) => V::Array(a.iter().map(Json::to_serde).collect()),
            Json::Object(o) => {
                let mut m = serde_json::Map::new();
                for (k, v) in &o.0 {
                    m.insert(k.to_string(), v.to_serde());
                }
                V::Object(m)
            }
        }
    }

    /// Converts to a template value the way Python's `json.loads` builds objects: keys in
    /// first-occurrence order, last value wins, integers stay integers.
    pub fn to_value(&self) -> minijinja::Value {
        use minijinja::Value;
        match self {
            Json::Null => Value::from(()),
            Json::Bool(b) => Value::from(*b),
            Json::I64(n) => Value::from(*n),
            Json::U64(n) => Value::from(*n),
            Json::I128(n) => Value::from(*n),
            Json::F64(f) => Value::from(*f),
            Json::Str(s) => Value::from(s.as_ref()),
            Json::Array(a) => list_value(a.iter().map(Json::to_value).collect()),
            Json::Object(o) => map_value(
                o.effective()
                    .into_iter()
                    .map(|(k, v)| (Value::from(k), v.to_value())),
            ),
        }
    }
}

/// Builds a template map (insertion order kept; a repeated key keeps its first position and
/// takes the last value, like a Python dict; printed as Python prints a `dict`, see
/// `pyvalue.rs`).
pub fn map_value<K: Into<minijinja::Value>>(
    pairs: impl IntoIterator<Item = (K, minijinja::Value)>,
) -> minijinja::Value {
    let pairs = pairs.into_iter();
    let mut m: indexmap::IndexMap<minijinja::Value, minijinja::Value> =
        indexmap::IndexMap::with_capacity(pairs.size_hint().0);
    for (k, v) in pairs {
        m.insert(k.into(), v);
    }
    minijinja::Value::from_object(crate::pyvalue::PyDict(m))
}

/// Builds a template list (printed as Python prints a `list`, see `pyvalue.rs`).
pub fn list_value(items: Vec<minijinja::Value>) -> minijinja::Value {
    minijinja::Value::from_object(crate::pyvalue::PyList(items))
}

/// Parses a whole document (trailing whitespace allowed, nothing else), with Python's
/// `json.loads` reading of numbers: every integer literal an exact integer.
///
/// An integer literal beyond `i128` (39 digits or more) is an error of category
/// [`serde_json::error::Category::Data`] ([`integer_too_large`] tells it apart): Python holds
/// it exactly, kvexact's template values cannot, so a caller refuses rather than render it as
/// a float. Every other error is the document not being JSON.
pub fn parse(bytes: &[u8]) -> Result<Json<'_>, serde_json::Error> {
    let inexact = Cell::new(false);
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let mut v = de::DeserializeSeed::deserialize(Seed(&inexact), &mut de)?;
    de.end()?;
    if inexact.get() {
        exact_integers(bytes, &mut v)?;
    }
    Ok(v)
}

/// Whether a [`parse`] error is an integer literal beyond `i128` (the document is JSON).
pub fn integer_too_large(e: &serde_json::Error) -> bool {
    e.is_data()
}

/// A float serde_json may have read from an integer literal: `-0`, or a magnitude past
/// `i64`/`u64` (every integer literal inside those ranges reaches the visitor as an integer).
fn maybe_integer_literal(f: f64) -> bool {
    (f == 0.0 && f.is_sign_negative()) || f.abs() >= 9.2e18
}

/// The number literals of a valid JSON document outside its strings, in document order.
fn number_literals(bytes: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
            }
            b'-' | b'0'..=b'9' => {
                let start = i;
                while i < bytes.len()
                    && matches!(bytes[i], b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E')
                {
                    i += 1;
                }
                out.push(&bytes[start..i]);
            }
            _ => i += 1,
        }
    }
    out
}

/// Replaces every float read from an integer literal by the exact integer. The tree's number
/// nodes in document order are the text's number literals in document order (object keys are
/// strings, and every member is kept).
fn exact_integers(bytes: &[u8], v: &mut Json<'_>) -> Result<(), serde_json::Error> {
    fn walk<'t>(
        v: &mut Json<'_>,
        lits: &mut impl Iterator<Item = &'t [u8]>,
    ) -> Result<(), serde_json::Error> {
        match v {
            Json::I64(_) | Json::U64(_) | Json::I128(_) => {
                lits.next().ok_or_else(lost)?;
            }
            Json::F64(_) => {
                let lit = lits.next().ok_or_else(lost)?;
                if !lit.iter().any(|b| matches!(b, b'.' | b'e' | b'E')) {
                    *v = integer(lit)?;
                }
            }
            Json::Array(a) => a.iter_mut().try_for_each(|x| walk(x, lits))?,
            Json::Object(o) => o.0.iter_mut().try_for_each(|(_, x)| walk(x, lits))?,
            Json::Null | Json::Bool(_) | Json::Str(_) => {}
        }
        Ok(())
    }
    fn lost() -> serde_json::Error {
        // Unreachable for a document serde_json accepted; refused rather than guessed.
        de::Error::custom("number literals and parsed numbers do not pair up")
    }
    fn integer(lit: &[u8]) -> Result<Json<'static>, serde_json::Error> {
        let n = std::str::from_utf8(lit)
            .ok()
            .and_then(|t| t.parse::<i128>().ok())
            .ok_or_else(|| de::Error::custom("an integer beyond 128 bits"))?;
        Ok(if let Ok(u) = u64::try_from(n) {
            Json::U64(u)
        } else if let Ok(i) = i64::try_from(n) {
            Json::I64(i)
        } else {
            Json::I128(n)
        })
    }
    let lits = number_literals(bytes);
    let mut it = lits.iter().copied();
    walk(v, &mut it)?;
    match it.next() {
        None => Ok(()),
        Some(_) => Err(lost()),
    }
}

/// A top-level object whose member values stay unparsed.
#[derive(Debug, Default)]
pub struct RawObject<'a>(pub Vec<(Cow<'a, str>, &'a RawValue)>);

impl<'a> RawObject<'a> {
    /// Parses `bytes` as an object; `Ok(None)` when the document is valid JSON but not an object.
    /// One pass over the body when it is an object; anything else is read the two-pass way
    /// ([`RawObject::parse_twice`], the slow twin, held to it by a proptest).
    pub fn parse(bytes: &'a [u8]) -> Result<Option<RawObject<'a>>, serde_json::Error> {
        match serde_json::from_slice::<RawObject<'a>>(bytes) {
            Ok(top) => Ok(Some(top)),
            Err(_) => Self::parse_twice(bytes),
        }
    }

    /// The slow twin of [`RawObject::parse`]: the whole document read as one raw value, then,
    /// when it is an object, its members.
    pub fn parse_twice(bytes: &'a [u8]) -> Result<Option<RawObject<'a>>, serde_json::Error> {
        let raw: &'a RawValue = serde_json::from_slice(bytes)?;
        if !raw.get().starts_with('{') {
            return Ok(None);
        }
        serde_json::from_str::<RawObject<'a>>(raw.get()).map(Some)
    }

    /// The raw value of the last member named exactly `key`.
    pub fn get(&self, key: &str) -> Option<&'a RawValue> {
        self.0.iter().rev().find(|(k, _)| k == key).map(|(_, v)| *v)
    }

    /// `key` exists and is not `null`.
    pub fn present(&self, key: &str) -> bool {
        self.get(key).is_some_and(|v| v.get() != "null")
    }

    /// `key` is present and not a JSON boolean equal to `wanted` (docs/contracts/registry.md §9.2 "differs").
    pub fn differs(&self, key: &str, wanted: bool) -> bool {
        match self.get(key).map(RawValue::get) {
            None | Some("null") => false,
            Some("true") => !wanted,
            Some("false") => wanted,
            Some(_) => true,
        }
    }
}

/// A chat request body's top level read in one pass: `messages` (its last member of that
/// name) read as a value, every other member kept raw as [`RawObject`] keeps it — the body is
/// not first skipped whole and then read again. Exactly what [`RawObject::parse`] and then
/// reading its `messages` member with serde give ([`ChatBody::parse_twice`], the slow twin,
/// is held to it by a proptest).
#[derive(Debug, Default)]
pub struct ChatBody<'a> {
    /// Every top-level member except `messages`, raw.
    pub top: RawObject<'a>,
    /// The last `messages` member, read (`None`: no such member).
    pub messages: Option<Json<'a>>,
}

/// Why a body is no chat body [`ChatBody::parse`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotChatBody {
    /// Not JSON, a top level other than an object, or a `messages` member serde cannot read
    /// as a [`Json`] value.
    Unparseable,
}

impl<'a> ChatBody<'a> {
    /// Reads `bytes` in one pass; on any failure, reads it the two-pass way
    /// ([`ChatBody::parse_twice`]) so that the answer is always that one's.
    pub fn parse(bytes: &'a [u8]) -> Result<ChatBody<'a>, NotChatBody> {
        match serde_json::from_slice::<ChatBody<'a>>(bytes) {
            Ok(b) => Ok(b),
            Err(_) => Self::parse_twice(bytes),
        }
    }

    /// The slow twin: [`RawObject::parse`], then the last `messages` member read with serde
    /// from its raw text.
    pub fn parse_twice(bytes: &'a [u8]) -> Result<ChatBody<'a>, NotChatBody> {
        let Ok(Some(mut top)) = RawObject::parse_twice(bytes) else {
            return Err(NotChatBody::Unparseable);
        };
        let messages = match top.get("messages") {
            None => None,
            Some(raw) => Some(
                serde_json::from_str::<Json<'a>>(raw.get())
                    .map_err(|_| NotChatBody::Unparseable)?,
            ),
        };
        top.0.retain(|(k, _)| k != "messages");
        Ok(ChatBody { top, messages })
    }
}

impl<'de> Deserialize<'de> for ChatBody<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ChatBody<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut top = Vec::with_capacity(map.size_hint().unwrap_or(8));
                let mut messages = None;
                while let Some(Key(k)) = map.next_key::<Key<'de>>()? {
                    if k == "messages" {
                        messages = Some(map.next_value::<Json<'de>>()?);
                    } else {
                        let v: &'de RawValue = map.next_value()?;
                        top.push((k, v));
                    }
                }
                Ok(ChatBody {
                    top: RawObject(top),
                    messages,
                })
            }
        }
        d.deserialize_map(V)
    }
}

/// A string key borrowed from the input when it has no escapes.
struct Key<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(Key(Cow::Owned(v)))
            }
        }
        d.deserialize_str(V)
    }
}

impl<'de> Deserialize<'de> for RawObject<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawObject<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut out = Vec::with_capacity(map.size_hint().unwrap_or(8));
                while let Some(Key(k)) = map.next_key::<Key<'de>>()? {
                    let v: &'de RawValue = map.next_value()?;
                    out.push((k, v));
                }
                Ok(RawObject(out))
            }
        }
        d.deserialize_map(V)
    }
}

/// Reading a `Json` through serde alone (inside a derived struct) keeps serde_json's reading
/// of integer literals beyond 64 bits (and `-0`) as floats; [`parse`] is the exact reader.
impl<'de> Deserialize<'de> for Json<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let inexact = Cell::new(false);
        d.deserialize_any(JsonVisitor(&inexact))
    }
}

/// Reads one value, noting in the flag a float that may come from an integer literal.
struct Seed<'f>(&'f Cell<bool>);

impl<'de> de::DeserializeSeed<'de> for Seed<'_> {
    type Value = Json<'de>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Json<'de>, D::Error> {
        d.deserialize_any(JsonVisitor(self.0))
    }
}

struct JsonVisitor<'f>(&'f Cell<bool>);

impl<'de> Visitor<'de> for JsonVisitor<'_> {
    type Value = Json<'de>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Json::Null)
    }
    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Json::Null)
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
        Ok(Json::Bool(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Ok(if v >= 0 {
            Json::U64(v.unsigned_abs())
        } else {
            Json::I64(v)
        })
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(Json::U64(v))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        if maybe_integer_literal(v) {
            self.0.set(true);
        }
        Ok(Json::F64(v))
    }
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Json::Str(Cow::Borrowed(v)))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Json::Str(Cow::Owned(v.to_owned())))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(Json::Str(Cow::Owned(v)))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(4));
        while let Some(v) = seq.next_element_seed(Seed(self.0))? {
            out.push(v);
        }
        Ok(Json::Array(out))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::with_capacity(map.size_hint().unwrap_or(4));
        while let Some(Key(k)) = map.next_key::<Key<'de>>()? {
            let v = map.next_value_seed(Seed(self.0))?;
            out.push((k, v));
        }
        Ok(Json::Object(JsonObject(out)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn last_duplicate_wins_and_keys_are_exact() {
        let doc = br#"{"a":1,"A":2,"a":{"x":"y\n"},"b":null}"#;
        let Ok(Json::Object(o)) = parse(doc) else {
            panic!("not an object")
        };
        assert!(matches!(o.get("a"), Some(Json::Object(_))));
        assert_eq!(o.get("A"), Some(&Json::U64(2)));
        assert!(!o.present("b"));
        assert!(!o.present("B"));
        let raw = RawObject::parse(doc).ok().flatten().unwrap_or_default();
        assert_eq!(raw.get("a").map(RawValue::get), Some(r#"{"x":"y\n"}"#));
        assert!(!raw.present("b"));
    }

    #[test]
    fn strings_without_escapes_are_borrowed() {
        let Ok(Json::Array(a)) = parse(br#"["plain","esc\u00e9"]"#) else {
            panic!("not an array")
        };
        assert!(matches!(a.first(), Some(Json::Str(Cow::Borrowed("plain")))));
        assert!(matches!(a.get(1), Some(Json::Str(Cow::Owned(_)))));
    }

    #[test]
    fn differs_rule() {
        let raw = RawObject::parse(br#"{"t":true,"f":false,"n":null,"s":"true","z":0}"#)
            .ok()
            .flatten()
            .unwrap_or_default();
        assert!(!raw.differs("t", true));
        assert!(raw.differs("t", false));
        assert!(!raw.differs("f", false));
        assert!(!raw.differs("n", true));
        assert!(!raw.differs("absent", true));
        assert!(raw.differs("s", true));
        assert!(raw.differs("z", false));
    }

    #[test]
    fn integer_literals_stay_exact_integers_like_python_json_loads() {
        let doc = br#"{"k\"1": "x\\", "n": [12345678901234567890123, -0, "-0", -0.0, 1e19, 1.0,
            -9223372036854775809, 18446744073709551616, 18446744073709551615,
            -9223372036854775808, 170141183460469231731687303715884105727,
            -170141183460469231731687303715884105728, 10000000000000000000.0, 0]}"#;
        let Ok(Json::Object(o)) = parse(doc) else {
            panic!("not an object")
        };
        let Some(Json::Array(n)) = o.get("n") else {
            panic!("no n")
        };
        let want = [
            Json::I128(12345678901234567890123),
            Json::U64(0),
            Json::Str(Cow::Borrowed("-0")),
            Json::F64(-0.0),
            Json::F64(1e19),
            Json::F64(1.0),
            Json::I128(-9223372036854775809),
            Json::I128(18446744073709551616),
            Json::U64(u64::MAX),
            Json::I64(i64::MIN),
            Json::I128(i128::MAX),
            Json::I128(i128::MIN),
            Json::F64(1e19),
            Json::U64(0),
        ];
        assert_eq!(n.as_slice(), &want);
        assert!(matches!(n.get(3), Some(Json::F64(f)) if f.is_sign_negative()));
        let text = Json::Array(n.clone()).to_json_string();
        assert_eq!(
            text,
            "[12345678901234567890123, 0, \"-0\", -0.0, 1e+19, 1.0, -9223372036854775809, \
             18446744073709551616, 18446744073709551615, -9223372036854775808, \
             170141183460469231731687303715884105727, -170141183460469231731687303715884105728, \
             1e+19, 0]"
        );
        // Printed by a template as Python prints the int.
        let v = Json::Array(n.clone()).to_value();
        let first = v.get_item_by_index(0).ok();
        assert_eq!(
            first.map(|x| x.to_string()).as_deref(),
            Some("12345678901234567890123")
        );
    }

    #[test]
    fn an_integer_beyond_128_bits_is_refused_apart_from_text_that_is_not_json() {
        for doc in [
            &b"170141183460469231731687303715884105728"[..],
            b"[1, {\"a\": -170141183460469231731687303715884105729}]",
            b"{\"a\": 1e400000000000000000000}",
        ] {
            let e = parse(doc).err();
            assert!(
                e.as_ref().is_some_and(integer_too_large) == (doc[0] != b'{'),
                "{}: {e:?}",
                String::from_utf8_lossy(doc)
            );
        }
        let e = parse(b"[1,]").err();
        assert!(e.is_some_and(|e| !integer_too_large(&e)));
    }

    /// A JSON value with exact integers of any size up to 128 bits, and the text a writer
    /// gives it; the obvious twin of [`parse`]'s number reading is that it reads back the
    /// value written.
    fn arb_exact() -> impl Strategy<Value = Json<'static>> {
        let int = any::<i128>().prop_map(|n| {
            if let Ok(u) = u64::try_from(n) {
                Json::U64(u)
            } else if let Ok(i) = i64::try_from(n) {
                Json::I64(i)
            } else {
                Json::I128(n)
            }
        });
        let leaf = prop_oneof![
            Just(Json::Null),
            any::<bool>().prop_map(Json::Bool),
            int.clone(),
            (-1e30f64..1e30).prop_map(Json::F64),
            (0u32..40).prop_map(|e| Json::F64(10f64.powi(e as i32))),
            "[0-9\\\\\"e.-]{0,8}".prop_map(|s| Json::Str(Cow::Owned(s))),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..5).prop_map(Json::Array),
                prop::collection::vec(("[0-9\"\\\\-]{1,3}", inner), 0..5).prop_map(|m| {
                    Json::Object(JsonObject(
                        m.into_iter().map(|(k, v)| (Cow::Owned(k), v)).collect(),
                    ))
                }),
            ]
        })
    }

    fn arb_json() -> impl Strategy<Value = String> {
        let leaf = prop_oneof![
            Just("null".to_string()),
            Just("true".to_string()),
            Just("false".to_string()),
            any::<i64>().prop_map(|n| n.to_string()),
            any::<u64>().prop_map(|n| n.to_string()),
            any::<i128>().prop_map(|n| n.to_string()),
            (-1e300f64..1e300).prop_map(|f| format!("{f:e}")),
            "[a-c\\\\\"é\n\u{1}]{0,6}".prop_map(|s| serde_json::Value::String(s).to_string()),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..5)
                    .prop_map(|v| format!("[{}]", v.join(","))),
                prop::collection::vec(("[abA]{1,2}", inner), 0..6).prop_map(|m| {
                    let members: Vec<String> = m
                        .into_iter()
                        .map(|(k, v)| format!("{}:{v}", serde_json::Value::String(k)))
                        .collect();
                    format!("{{{}}}", members.join(","))
                }),
            ]
        })
    }

    proptest! {
        #[test]
        fn borrowed_tree_agrees_with_serde_json_value(doc in arb_json()) {
            let slow: serde_json::Value = serde_json::from_str(&doc).map_err(|e| TestCaseError::fail(e.to_string()))?;
            let fast = parse(doc.as_bytes()).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(fast.to_serde(), slow.clone());
            if let serde_json::Value::Object(m) = &slow {
                let raw = RawObject::parse(doc.as_bytes()).map_err(|e| TestCaseError::fail(e.to_string()))?;
                let raw = raw.unwrap_or_default();
                for (k, v) in m {
                    let got: serde_json::Value = raw
                        .get(k)
                        .map(|r| serde_json::from_str(r.get()))
                        .transpose()
                        .map_err(|e| TestCaseError::fail(e.to_string()))?
                        .unwrap_or(serde_json::Value::Null);
                    prop_assert_eq!(&got, v);
                    prop_assert_eq!(raw.present(k), !v.is_null());
                }
            }
        }

        #[test]
        fn every_number_reads_back_as_written(v in arb_exact()) {
            let text = v.to_json_string();
            let back = parse(text.as_bytes()).map_err(|e| TestCaseError::fail(format!("{text}: {e}")))?;
            prop_assert_eq!(back, v, "{}", text);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
            let _ = parse(&bytes);
            let _ = RawObject::parse(&bytes);
            let _ = ChatBody::parse(&bytes);
        }

        /// The one-pass chat body read equals the two-pass one (its slow twin) on objects
        /// with and without (and with duplicated) `messages` members, on other documents, and
        /// on bodies cut or spliced at any byte.
        #[test]
        fn chat_body_in_one_pass_equals_two_passes(
            doc in arb_json(),
            msgs in prop::collection::vec(arb_json(), 0..3),
            cut in any::<prop::sample::Index>(),
        ) {
            let mut members: Vec<String> = msgs.iter().map(|m| format!("\"messages\":{m}")).collect();
            members.push(format!("\"x\":{doc}"));
            let body = format!("{{{}}}", members.join(","));
            let bytes = body.as_bytes();
            let at = cut.index(bytes.len() + 1);
            for b in [bytes, &bytes[..at], doc.as_bytes()] {
                let fast = ChatBody::parse(b);
                let slow = ChatBody::parse_twice(b);
                match (&fast, &slow) {
                    (Ok(f), Ok(s)) => {
                        prop_assert_eq!(&f.messages, &s.messages);
                        let keys = |o: &RawObject<'_>| o.0.iter().map(|(k, v)| (k.to_string(), v.get().to_string())).collect::<Vec<_>>();
                        prop_assert_eq!(keys(&f.top), keys(&s.top));
                    }
                    (Err(f), Err(s)) => prop_assert_eq!(f, s),
                    _ => prop_assert!(false, "one pass {:?} vs two {:?} on {:?}", fast.is_ok(), slow.is_ok(), String::from_utf8_lossy(b)),
                }
                let keys = |o: &Option<RawObject<'_>>| o.as_ref().map(|o| o.0.iter().map(|(k, v)| (k.to_string(), v.get().to_string())).collect::<Vec<_>>());
                match (RawObject::parse(b), RawObject::parse_twice(b)) {
                    (Ok(f), Ok(s)) => prop_assert_eq!(keys(&f), keys(&s)),
                    (Err(f), Err(s)) => prop_assert_eq!(f.to_string(), s.to_string()),
                    (f, s) => prop_assert!(false, "raw one pass {:?} vs two {:?}", f.is_ok(), s.is_ok()),
                }
            }
        }
    }
}
