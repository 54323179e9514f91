//! Exact-key JSON for request bodies, borrowed from the caller's bytes.
//!
//! serde's derive refuses duplicate keys and `serde_json::Value` copies every string; the
//! gateway contract (docs/contracts/registry.md §9.2) wants case-sensitive keys where the **last
//! duplicate wins**, like Python's `json.loads`. [`Json`] is a borrowed tree that keeps every
//! member in document order (strings without escapes are borrowed, never copied) and looks keys
//! up from the end. [`RawObject`] keeps a top-level object's values unparsed (`RawValue`), so
//! fields the scan only tests for presence are never built.
//!
//! The slow twin is `serde_json::Value` (its maps also keep the last duplicate); a proptest in
//! this module checks the two agree.

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use std::borrow::Cow;
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
    let mut m: indexmap::IndexMap<minijinja::Value, minijinja::Value> = indexmap::IndexMap::new();
    for (k, v) in pairs {
        m.insert(k.into(), v);
    }
    minijinja::Value::from_object(crate::pyvalue::PyDict(m))
}

/// Builds a template list (printed as Python prints a `list`, see `pyvalue.rs`).
pub fn list_value(items: Vec<minijinja::Value>) -> minijinja::Value {
    minijinja::Value::from_object(crate::pyvalue::PyList(items))
}

/// Parses a whole document (trailing whitespace allowed, nothing else).
pub fn parse(bytes: &[u8]) -> Result<Json<'_>, serde_json::Error> {
    serde_json::from_slice(bytes)
}

/// A top-level object whose member values stay unparsed.
#[derive(Debug, Default)]
pub struct RawObject<'a>(pub Vec<(Cow<'a, str>, &'a RawValue)>);

impl<'a> RawObject<'a> {
    /// Parses `bytes` as an object; `Ok(None)` when the document is valid JSON but not an object.
    pub fn parse(bytes: &'a [u8]) -> Result<Option<RawObject<'a>>, serde_json::Error> {
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

impl<'de> Deserialize<'de> for Json<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(JsonVisitor)
    }
}

struct JsonVisitor;

impl<'de> Visitor<'de> for JsonVisitor {
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
        while let Some(v) = seq.next_element::<Json<'de>>()? {
            out.push(v);
        }
        Ok(Json::Array(out))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::with_capacity(map.size_hint().unwrap_or(4));
        while let Some(Key(k)) = map.next_key::<Key<'de>>()? {
            let v: Json<'de> = map.next_value()?;
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

    fn arb_json() -> impl Strategy<Value = String> {
        let leaf = prop_oneof![
            Just("null".to_string()),
            Just("true".to_string()),
            Just("false".to_string()),
            any::<i64>().prop_map(|n| n.to_string()),
            any::<u64>().prop_map(|n| n.to_string()),
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
        fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
            let _ = parse(&bytes);
            let _ = RawObject::parse(&bytes);
        }
    }
}
