//! Python `json.dumps` over template values: the `tojson` filter transformers installs
//! (docs/contracts/templates.md §2): `ensure_ascii=False`, Python separators, `indent=N`, float `repr`,
//! insertion key order, no HTML escaping.

use minijinja::value::{Value, ValueKind};
use minijinja::{Error, ErrorKind};
use std::fmt::Write;

/// Options of one `json.dumps` call.
#[derive(Debug, Clone, Default)]
pub struct DumpOptions {
    /// `indent`: `None` = single line; `Some(s)` = newline + `s` repeated per level.
    pub indent: Option<String>,
    /// `separators` override `(item, key)`; defaults depend on `indent` like Python.
    pub separators: Option<(String, String)>,
    /// `sort_keys`.
    pub sort_keys: bool,
    /// `ensure_ascii` (transformers passes `False`).
    pub ensure_ascii: bool,
}

/// Serialises `value` like Python `json.dumps(value, **opts)`.
pub fn dumps(value: &Value, opts: &DumpOptions) -> Result<String, Error> {
    let (item_sep, key_sep) = match &opts.separators {
        Some((i, k)) => (i.clone(), k.clone()),
        None if opts.indent.is_some() => (",".to_string(), ": ".to_string()),
        None => (", ".to_string(), ": ".to_string()),
    };
    let mut out = String::new();
    let w = Writer {
        opts,
        item_sep: &item_sep,
        key_sep: &key_sep,
    };
    w.value(&mut out, value, 0)?;
    Ok(out)
}

struct Writer<'o> {
    opts: &'o DumpOptions,
    item_sep: &'o str,
    key_sep: &'o str,
}

const MAX_DEPTH: usize = 512;

impl Writer<'_> {
    fn newline(&self, out: &mut String, level: usize) {
        if let Some(ind) = &self.opts.indent {
            out.push('\n');
            for _ in 0..level {
                out.push_str(ind);
            }
        }
    }

    fn value(&self, out: &mut String, v: &Value, level: usize) -> Result<(), Error> {
        if level > MAX_DEPTH {
            return Err(Error::new(
                ErrorKind::InvalidOperation,
                "tojson: nesting too deep",
            ));
        }
        match v.kind() {
            ValueKind::Undefined | ValueKind::None => out.push_str("null"),
            ValueKind::Bool => out.push_str(if v.is_true() { "true" } else { "false" }),
            ValueKind::Number => write_number(out, v)?,
            ValueKind::String => write_str(out, v.as_str().unwrap_or(""), self.opts.ensure_ascii),
            ValueKind::Seq | ValueKind::Iterable => {
                let items: Vec<Value> = v.try_iter()?.collect();
                if items.is_empty() {
                    out.push_str("[]");
                    return Ok(());
                }
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(self.item_sep);
                    }
                    self.newline(out, level + 1);
                    self.value(out, item, level + 1)?;
                }
                self.newline(out, level);
                out.push(']');
            }
            ValueKind::Map => {
                let mut keys: Vec<Value> = v.try_iter()?.collect();
                if keys.is_empty() {
                    out.push_str("{}");
                    return Ok(());
                }
                if self.opts.sort_keys {
                    keys.sort();
                }
                out.push('{');
                for (i, key) in keys.iter().enumerate() {
                    if i > 0 {
                        out.push_str(self.item_sep);
                    }
                    self.newline(out, level + 1);
                    self.key(out, key)?;
                    out.push_str(self.key_sep);
                    let item = v.get_item(key)?;
                    self.value(out, &item, level + 1)?;
                }
                self.newline(out, level);
                out.push('}');
            }
            other => {
                return Err(Error::new(
                    ErrorKind::InvalidOperation,
                    format!("Object of type {other} is not JSON serializable"),
                ))
            }
        }
        Ok(())
    }

    fn key(&self, out: &mut String, key: &Value) -> Result<(), Error> {
        // Python converts str/int/float/bool/None keys to strings.
        match key.kind() {
            ValueKind::String => write_str(out, key.as_str().unwrap_or(""), self.opts.ensure_ascii),
            ValueKind::None | ValueKind::Undefined => out.push_str("\"null\""),
            ValueKind::Bool => out.push_str(if key.is_true() {
                "\"true\""
            } else {
                "\"false\""
            }),
            ValueKind::Number => {
                let mut s = String::new();
                write_number(&mut s, key)?;
                write_str(out, &s, false);
            }
            other => {
                return Err(Error::new(
                    ErrorKind::InvalidOperation,
                    format!("keys must be str, int, float, bool or None, not {other}"),
                ))
            }
        }
        Ok(())
    }
}

fn write_number(out: &mut String, v: &Value) -> Result<(), Error> {
    if v.is_integer() {
        let n = i128::try_from(v.clone())?;
        let _ = write!(out, "{n}");
    } else {
        let f = f64::try_from(v.clone())?;
        out.push_str(&float_repr(f, true));
    }
    Ok(())
}

/// Python `repr(float)` (or `json.dumps` spelling of non-finite values when `json` is set:
/// `Infinity`, `-Infinity`, `NaN`; Python `repr` gives `inf`, `-inf`, `nan`).
pub fn float_repr(f: f64, json: bool) -> String {
    if f.is_nan() {
        return if json { "NaN" } else { "nan" }.to_string();
    }
    if f.is_infinite() {
        return match (f > 0.0, json) {
            (true, true) => "Infinity",
            (false, true) => "-Infinity",
            (true, false) => "inf",
            (false, false) => "-inf",
        }
        .to_string();
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0.0" } else { "0.0" }.to_string();
    }
    // Shortest round-trip digits and decimal exponent, from Rust's `{:e}` form "d.ddde[-]x".
    let sci = format!("{f:e}");
    let (mant, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let neg = mant.starts_with('-');
    let digits: String = mant.chars().filter(char::is_ascii_digit).collect();
    let mut out = String::new();
    if neg {
        out.push('-');
    }
    // CPython float_repr_style 'short': scientific when exp < -4 or exp >= 16.
    if !(-4..16).contains(&exp) {
        let (first, rest) = digits.split_at(1);
        out.push_str(first);
        if !rest.is_empty() {
            out.push('.');
            out.push_str(rest);
        }
        let _ = write!(out, "e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs());
    } else if exp < 0 {
        out.push_str("0.");
        for _ in 0..(-exp - 1) {
            out.push('0');
        }
        out.push_str(&digits);
    } else {
        let int_len = usize::try_from(exp).unwrap_or(0) + 1;
        if digits.len() <= int_len {
            out.push_str(&digits);
            for _ in digits.len()..int_len {
                out.push('0');
            }
            out.push_str(".0");
        } else {
            let (i, frac) = digits.split_at(int_len);
            out.push_str(i);
            out.push('.');
            out.push_str(frac);
        }
    }
    out
}

/// Writes a JSON string literal with Python's escapes.
pub fn write_str(out: &mut String, s: &str, ensure_ascii: bool) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c if ensure_ascii && (c as u32) > 0x7e => {
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_repr_like_python() {
        let cases = [
            (1.0, "1.0"),
            (0.5, "0.5"),
            (1e21, "1e+21"),
            (1e16, "1e+16"),
            (1e15, "1000000000000000.0"),
            (1e-5, "1e-05"),
            (0.0001, "0.0001"),
            (123.456, "123.456"),
            (-2.5e-7, "-2.5e-07"),
            (0.1 + 0.2, "0.30000000000000004"),
            (1.5e300, "1.5e+300"),
            (-0.0, "-0.0"),
        ];
        for (f, want) in cases {
            assert_eq!(float_repr(f, true), want, "{f:e}");
        }
    }

    #[test]
    fn strings_like_python() {
        let mut s = String::new();
        write_str(&mut s, "a\"\\\n\t\u{1}\u{7f}<>&'é東", false);
        assert_eq!(s, "\"a\\\"\\\\\\n\\t\\u0001\u{7f}<>&'é東\"");
        let mut s = String::new();
        write_str(&mut s, "é😀", true);
        assert_eq!(s, "\"\\u00e9\\ud83d\\ude00\"");
    }

    #[test]
    fn containers_and_indent() {
        let v: Value = crate::json::parse(br#"{"b":[1,2.0,{}],"a":[],"c":null}"#)
            .map(|j| j.to_value())
            .unwrap_or_default();
        let one = dumps(&v, &DumpOptions::default()).unwrap_or_default();
        assert_eq!(one, r#"{"b": [1, 2.0, {}], "a": [], "c": null}"#);
        let opts = DumpOptions {
            indent: Some("  ".into()),
            ..DumpOptions::default()
        };
        let ind = dumps(&v, &opts).unwrap_or_default();
        assert_eq!(
            ind,
            "{\n  \"b\": [\n    1,\n    2.0,\n    {}\n  ],\n  \"a\": [],\n  \"c\": null\n}"
        );
    }
}
