//! A request's JSON lists and objects as template values that print as the engines' Python
//! prints the `list` and `dict` `json.loads` made of them: minijinja's own containers display
//! their floats and strings with Rust's spelling (`1e-5`, a no-break space unescaped) wherever
//! a container becomes text — `{{ … }}`, `~`, `|string`, `|join` — where Python's `repr`
//! writes `1e-05` and `'\xa0'`. Everything else (indexing, iteration, length, truth, equality,
//! methods) behaves as minijinja's own list and ordered map.

use crate::pyrepr;
use indexmap::IndexMap;
use minijinja::value::{Enumerator, Object, ObjectExt, ObjectRepr, Value};
use std::fmt;
use std::sync::Arc;

/// A JSON array: a Python `list`.
#[derive(Debug)]
pub(crate) struct PyList(pub Vec<Value>);

/// A JSON object: a Python `dict` (first-occurrence key order).
#[derive(Debug)]
pub(crate) struct PyDict(pub IndexMap<Value, Value>);

/// Writes Python's `repr` of a container (a character whose printability differs between the
/// engines' Pythons is written as it is here: only a formatter can refuse, see `pyrepr.rs`).
fn render_python(v: Value, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let mut s = String::new();
    match pyrepr::write_repr_lenient(&v, &mut s) {
        Ok(()) => f.write_str(&s),
        // Nested past `pyrepr`'s bound, which request JSON (serde_json stops at 128 levels)
        // never reaches; Python would raise there.
        Err(_) => f.write_str("[...]"),
    }
}

impl Object for PyList {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Seq
    }

    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        self.0.get(key.as_usize()?).cloned()
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        Enumerator::Seq(self.0.len())
    }

    fn enumerator_len(self: &Arc<Self>) -> Option<usize> {
        Some(self.0.len())
    }

    fn render(self: &Arc<Self>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        render_python(Value::from_dyn_object(self.clone()), f)
    }
}

impl Object for PyDict {
    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        self.0.get(key).cloned()
    }

    fn get_value_by_str(self: &Arc<Self>, key: &str) -> Option<Value> {
        // A message or tool has a handful of keys: comparing them beats hashing a new key.
        if self.0.len() <= 12 {
            self.0
                .iter()
                .find_map(|(k, v)| (k.as_str() == Some(key)).then(|| v.clone()))
        } else {
            self.0.get(&Value::from(key)).cloned()
        }
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        self.mapped_rev_key_value_enumerator(|this| {
            Box::new(this.0.iter().map(|(k, v)| (k.clone(), v.clone())))
        })
    }

    fn enumerator_len(self: &Arc<Self>) -> Option<usize> {
        Some(self.0.len())
    }

    fn render(self: &Arc<Self>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        render_python(Value::from_dyn_object(self.clone()), f)
    }
}
