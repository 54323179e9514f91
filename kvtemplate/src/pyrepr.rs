//! Python's `str()` and `repr()` of template values, where minijinja's display differs from
//! what the engines' Jinja (Python) prints:
//!
//! * a float Python writes in exponent form: `str(1e-05)` is `1e-05` and `str(1e16)` is
//!   `1e+16`, where minijinja writes `0.00001` and `10000000000000000.0` (and, inside a list or
//!   a dict, `1e-5` and `1e16`); `nan` where minijinja writes `NaN`;
//! * inside a list, tuple or dict, a string holding a character Python's `repr()` escapes
//!   because `str.isprintable()` is false for it (a no-break space `\xa0`, a zero-width joiner
//!   `\u200d`, a line separator `\u2028`, an unassigned code point, …) where minijinja escapes
//!   control characters only;
//! * an undefined value inside a container (`Undefined` in Python).
//!
//! The template environment (`env.rs`) prints `{{ … }}` through [`write_str`] when
//! [`str_differs`] says minijinja's own display would be wrong, and passes the input of the
//! string filters through it. A character whose printability changed between the Unicode
//! versions of the Pythons engines run (`pyrepr_table.rs`) cannot be printed as the engine
//! would without knowing its Python: [`write_str`] fails on it (the request is refused).

use crate::pyjson::float_repr;
use crate::pyrepr_table::{NON_PRINTABLE, VERSION_DEPENDENT};
use minijinja::value::{Value, ValueKind};
use minijinja::{Error, ErrorKind};
use std::fmt::Write;

/// Nesting a value may have for [`write_str`] (Python's own `repr` stops near 1000).
const MAX_DEPTH: usize = 512;

/// The float a number value holds (`None` for an integer or a non-number).
fn float_of(v: &Value) -> Option<f64> {
    (v.kind() == ValueKind::Number && !v.is_integer())
        .then(|| f64::try_from(v.clone()).ok())
        .flatten()
}

/// Whether minijinja displays `f` otherwise than Python's `str(f)`.
fn float_differs(f: f64) -> bool {
    let mut mine = f.to_string();
    if f.is_finite() && !mine.contains('.') {
        mine.push_str(".0");
    } else if f.is_nan() {
        mine = "NaN".into();
    }
    mine != float_repr(f, false)
}

/// Whether `c` is in one of the sorted inclusive ranges.
fn in_ranges(ranges: &[(u32, u32)], c: char) -> bool {
    let c = c as u32;
    ranges
        .binary_search_by(|&(a, b)| {
            if b < c {
                std::cmp::Ordering::Less
            } else if a > c {
                std::cmp::Ordering::Greater
            } else {
                std::cmp::Ordering::Equal
            }
        })
        .is_ok()
}

/// Whether Python's `repr()` escapes `c` (beyond the quote and the backslash): `\t`, `\n`, `\r`
/// and every character `str.isprintable()` calls non-printable.
fn escaped(c: char) -> bool {
    if c.is_ascii() {
        return c < ' ' || c == '\x7f';
    }
    in_ranges(NON_PRINTABLE, c)
}

/// Whether a string's repr differs between Python and minijinja (which escapes control
/// characters only), or depends on the engine's Unicode version.
fn str_repr_differs(s: &str) -> bool {
    s.chars()
        .any(|c| !c.is_ascii() && (in_ranges(VERSION_DEPENDENT, c) || escaped(c) != c.is_control()))
}

/// Whether Python's `str(v)` differs from how minijinja displays `v`.
pub(crate) fn str_differs(v: &Value) -> bool {
    match v.kind() {
        ValueKind::Number => float_of(v).is_some_and(float_differs),
        ValueKind::Seq | ValueKind::Map => items_differ(v, 0),
        _ => false,
    }
}

/// Whether the repr of an item of a container differs (see the module docs).
fn repr_differs(v: &Value, depth: usize) -> bool {
    match v.kind() {
        ValueKind::Undefined => true,
        ValueKind::Number => float_of(v).is_some_and(float_differs),
        ValueKind::String => v.as_str().is_some_and(str_repr_differs),
        ValueKind::Seq | ValueKind::Map => items_differ(v, depth),
        _ => false,
    }
}

/// Whether a sequence's items, or a map's keys and values, print differently.
fn items_differ(v: &Value, depth: usize) -> bool {
    if depth >= MAX_DEPTH {
        return true;
    }
    let Ok(iter) = v.try_iter() else {
        return false;
    };
    let map = v.kind() == ValueKind::Map;
    for item in iter {
        if repr_differs(&item, depth + 1) {
            return true;
        }
        if map && v.get_item(&item).is_ok_and(|x| repr_differs(&x, depth + 1)) {
            return true;
        }
    }
    false
}

/// Whether some float anywhere in `v` (a request's context) prints otherwise in Python.
pub(crate) fn holds_differing_float(v: &Value) -> bool {
    fn walk(v: &Value, depth: usize) -> bool {
        match v.kind() {
            ValueKind::Number => float_of(v).is_some_and(float_differs),
            ValueKind::Seq | ValueKind::Map if depth < MAX_DEPTH => {
                let map = v.kind() == ValueKind::Map;
                v.try_iter().is_ok_and(|mut it| {
                    it.any(|item| {
                        walk(&item, depth + 1)
                            || map && v.get_item(&item).is_ok_and(|x| walk(&x, depth + 1))
                    })
                })
            }
            _ => false,
        }
    }
    walk(v, 0)
}

fn too_deep() -> Error {
    Error::new(
        ErrorKind::InvalidOperation,
        "a value nested too deeply to print as Python would",
    )
}

/// Python's `str(v)`: a string as it is, a float in Python's spelling, a container as its
/// `repr()`; anything else as minijinja displays it.
pub(crate) fn write_str(v: &Value, out: &mut String) -> Result<(), Error> {
    match v.kind() {
        ValueKind::String => out.push_str(v.as_str().unwrap_or_default()),
        ValueKind::Number => match float_of(v) {
            Some(f) => out.push_str(&float_repr(f, false)),
            None => {
                let _ = write!(out, "{v}");
            }
        },
        ValueKind::Seq | ValueKind::Map => write_repr(v, out, 0, false)?,
        _ => {
            let _ = write!(out, "{v}");
        }
    }
    Ok(())
}

/// Python's `str(v)` as a new string.
pub(crate) fn to_str(v: &Value) -> Result<String, Error> {
    let mut s = String::new();
    write_str(v, &mut s)?;
    Ok(s)
}

/// Python's `repr(v)` as a new string (refused where a character's printability differs
/// between the engines' Pythons).
pub(crate) fn to_repr(v: &Value) -> Result<String, Error> {
    let mut s = String::new();
    write_repr(v, &mut s, 0, false)?;
    Ok(s)
}

/// [`write_repr`] for a container's own display (`pyvalue.rs`), which cannot refuse: a
/// character whose printability differs between the engines' Pythons is written as it is.
pub(crate) fn write_repr_lenient(v: &Value, out: &mut String) -> Result<(), Error> {
    write_repr(v, out, 0, true)
}

/// Python's `repr(v)` for the values a chat template prints: `None`, `True`/`False`, numbers,
/// strings (quote and escapes as `unicode_repr`), lists, tuples and dicts; other values as
/// minijinja writes them.
fn write_repr(v: &Value, out: &mut String, depth: usize, lenient: bool) -> Result<(), Error> {
    if depth >= MAX_DEPTH {
        return Err(too_deep());
    }
    match v.kind() {
        ValueKind::Undefined => out.push_str("Undefined"),
        ValueKind::Number => match float_of(v) {
            Some(f) => out.push_str(&float_repr(f, false)),
            None => {
                let _ = write!(out, "{v}");
            }
        },
        ValueKind::String => write_str_repr(v.as_str().unwrap_or_default(), out, lenient)?,
        ValueKind::Seq => {
            let tuple = v.is_tuple();
            out.push(if tuple { '(' } else { '[' });
            let mut n = 0;
            for item in v.try_iter()? {
                if n > 0 {
                    out.push_str(", ");
                }
                write_repr(&item, out, depth + 1, lenient)?;
                n += 1;
            }
            if tuple {
                out.push_str(if n == 1 { ",)" } else { ")" });
            } else {
                out.push(']');
            }
        }
        ValueKind::Map => {
            out.push('{');
            for (i, key) in v.try_iter()?.enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_repr(&key, out, depth + 1, lenient)?;
                out.push_str(": ");
                write_repr(&v.get_item(&key)?, out, depth + 1, lenient)?;
            }
            out.push('}');
        }
        _ => {
            let _ = write!(out, "{v:?}");
        }
    }
    Ok(())
}

/// CPython's `unicode_repr`: single quotes unless the string holds a single quote and no
/// double quote; `\\`, the quote, `\t`, `\n`, `\r` escaped; every other non-printable
/// character as `\xhh`, `\uhhhh` or `\Uhhhhhhhh`.
fn write_str_repr(s: &str, out: &mut String, lenient: bool) -> Result<(), Error> {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if !lenient && !c.is_ascii() && in_ranges(VERSION_DEPENDENT, c) => {
                return Err(Error::new(
                    ErrorKind::InvalidOperation,
                    format!(
                        "U+{:04X} prints differently under the Unicode versions of the \
                         engines' Pythons",
                        c as u32
                    ),
                ));
            }
            c if escaped(c) => {
                let n = c as u32;
                let _ = if n <= 0xff {
                    write!(out, "\\x{n:02x}")
                } else if n <= 0xffff {
                    write!(out, "\\u{n:04x}")
                } else {
                    write!(out, "\\U{n:08x}")
                };
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn floats_print_as_python() {
        for (f, want) in [
            (1e20, "1e+20"),
            (1e-5, "1e-05"),
            (1e16, "1e+16"),
            (1e15, "1000000000000000.0"),
            (0.0001, "0.0001"),
            (-0.0, "-0.0"),
            (2.5, "2.5"),
            (f64::NAN, "nan"),
            (f64::INFINITY, "inf"),
        ] {
            assert_eq!(to_str(&Value::from(f)).unwrap(), want);
        }
        assert!(str_differs(&Value::from(1e-5)));
        assert!(!str_differs(&Value::from(2.5)));
        assert!(!str_differs(&Value::from(1e15)));
        assert!(!str_differs(&Value::from(7)));
    }

    #[test]
    fn containers_print_as_python() {
        let v = Value::from(vec![
            Value::from(1e-7),
            Value::from("a'b"),
            Value::from("\u{a0}\u{200d}é"),
            Value::from(()),
            Value::from(true),
        ]);
        assert!(str_differs(&v));
        assert_eq!(
            to_str(&v).unwrap(),
            "[1e-07, \"a'b\", '\\xa0\\u200dé', None, True]"
        );
        // A container minijinja already prints as Python does is left to it.
        assert!(!str_differs(&Value::from(vec![
            Value::from(1.5),
            Value::from("x")
        ])));
    }

    #[test]
    fn a_version_dependent_character_is_refused() {
        // U+1FAE8 (SHAKING FACE) was assigned in Unicode 15.0: Python 3.11 escapes it.
        let v = Value::from(vec![Value::from("\u{1FAE8}")]);
        assert!(str_differs(&v));
        assert!(to_str(&v).is_err());
    }

    #[test]
    fn the_tables_are_sorted_and_disjoint() {
        for t in [NON_PRINTABLE, VERSION_DEPENDENT] {
            assert!(t.windows(2).all(|w| w[0].1 < w[1].0 && w[0].0 <= w[0].1));
        }
        for &(a, b) in VERSION_DEPENDENT {
            for c in [a, b] {
                let c = char::from_u32(c).unwrap();
                assert!(!in_ranges(NON_PRINTABLE, c));
            }
        }
    }

    proptest! {
        /// Whenever [`str_differs`] says minijinja's display is right, it equals Python's
        /// `str()` as [`write_str`] writes it (for floats, strings in lists, nesting).
        #[test]
        fn no_difference_means_equal_text(
            f in prop_oneof![any::<f64>(), -1e20f64..1e20, -1e-3f64..1e-3],
            s in "\\PC{0,6}",
            c in any::<char>(),
        ) {
            let s = format!("{s}{c}");
            let v = Value::from(vec![
                Value::from(f),
                Value::from(s.as_str()),
                Value::from(vec![Value::from(f)]),
            ]);
            for x in [Value::from(f), v] {
                if !str_differs(&x) {
                    prop_assert_eq!(x.to_string(), to_str(&x).unwrap());
                }
            }
        }
    }
}
