//! Jinja's `format` filter: `str(value) % args` (or `% kwargs`), Python's printf-style
//! formatting. The conversions chat templates use are reproduced exactly — `%s` (`str()`),
//! `%r` (`repr()`), `%d`/`%i`/`%u` (an integer; a float truncated toward zero, a boolean as
//! 0/1), `%%` — with the flags `-`, `0`, ` `, `+`, a width and, for `%s`/`%r`, a precision.
//! Anything else (float and hex conversions, `*` widths, a precision on an integer, a safe
//! string whose `%` would escape its arguments) fails the render, as do the cases where
//! Python raises (too few or too many arguments, `%d` of a string).

use crate::pyrepr;
use minijinja::value::{Kwargs, Rest, Value, ValueKind};
use minijinja::ErrorKind;

fn fail(msg: &str) -> minijinja::Error {
    minijinja::Error::new(ErrorKind::InvalidOperation, msg.to_string())
}

/// Where `%` takes its arguments from.
enum Args<'a> {
    /// A tuple: each conversion takes the next.
    Seq(std::slice::Iter<'a, Value>, usize),
    /// A mapping (Jinja's keyword arguments): `%(name)s`; a conversion without a name takes
    /// the mapping itself.
    Map(&'a Value),
}

/// The `format` filter.
pub(crate) fn format(
    value: &Value,
    args: Rest<Value>,
    kwargs: Kwargs,
) -> Result<Value, minijinja::Error> {
    let names: Vec<&str> = kwargs.args().collect();
    if !args.is_empty() && !names.is_empty() {
        return Err(fail(
            "can't handle positional and keyword arguments at the same time",
        ));
    }
    if value.is_safe() && !(args.is_empty() && names.is_empty()) {
        return Err(fail(
            "format of a safe string (markupsafe escapes its arguments)",
        ));
    }
    let template = match value.as_str() {
        Some(s) if value.kind() == ValueKind::String => s.to_string(),
        _ => pyrepr::to_str(value)?,
    };
    let map;
    let mut src = if names.is_empty() {
        Args::Seq(args.iter(), 0)
    } else {
        let mut pairs = Vec::with_capacity(names.len());
        for n in &names {
            pairs.push((Value::from(*n), kwargs.get::<Value>(n)?));
        }
        map = crate::json::map_value(pairs);
        Args::Map(&map)
    };
    let out = percent(&template, &mut src)?;
    if let Args::Seq(rest, _) = &mut src {
        if rest.next().is_some() {
            return Err(fail(
                "TypeError: not all arguments converted during string formatting",
            ));
        }
    }
    Ok(Value::from(out))
}

/// `template % args`.
fn percent(template: &str, args: &mut Args<'_>) -> Result<String, minijinja::Error> {
    let mut out = String::with_capacity(template.len() + 16);
    let mut chars = template.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        // `%(name)`
        let mut key: Option<String> = None;
        if chars.peek() == Some(&'(') {
            chars.next();
            let mut depth = 1;
            let mut k = String::new();
            for x in chars.by_ref() {
                match x {
                    '(' => depth += 1,
                    ')' => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    _ => {}
                }
                k.push(x);
            }
            if depth != 0 {
                return Err(fail("ValueError: incomplete format key"));
            }
            key = Some(k);
        }
        let (mut left, mut zero, mut space, mut plus) = (false, false, false, false);
        while let Some(&f) = chars.peek() {
            match f {
                '-' => left = true,
                '0' => zero = true,
                ' ' => space = true,
                '+' => plus = true,
                '#' => return Err(fail("a `#` conversion flag")),
                _ => break,
            }
            chars.next();
        }
        let mut width = 0usize;
        while let Some(d) = chars.peek().and_then(|c| c.to_digit(10)) {
            width = width.saturating_mul(10).saturating_add(d as usize);
            chars.next();
        }
        let mut precision: Option<usize> = None;
        if chars.peek() == Some(&'.') {
            chars.next();
            let mut p = 0usize;
            while let Some(d) = chars.peek().and_then(|c| c.to_digit(10)) {
                p = p.saturating_mul(10).saturating_add(d as usize);
                chars.next();
            }
            precision = Some(p);
        }
        if chars.peek() == Some(&'*') {
            return Err(fail("a `*` width or precision"));
        }
        while matches!(chars.peek(), Some('h' | 'l' | 'L')) {
            chars.next();
        }
        let conv = chars
            .next()
            .ok_or_else(|| fail("ValueError: incomplete format"))?;
        if conv == '%' {
            // CPython writes '%' for "%%" (flags and width ignored) without taking an argument.
            out.push('%');
            continue;
        }
        if width > 1 << 16 || precision.is_some_and(|p| p > 1 << 16) {
            return Err(fail("a format width or precision over 65536"));
        }
        let arg = next_arg(args, key.as_deref())?;
        let body = match conv {
            's' | 'r' => {
                let mut text = if conv == 's' {
                    pyrepr::to_str(&arg)?
                } else {
                    pyrepr::to_repr(&arg)?
                };
                if let Some(p) = precision {
                    text = text.chars().take(p).collect();
                }
                pad(text, width, left, ' ')
            }
            'd' | 'i' | 'u' => {
                if precision.is_some() {
                    return Err(fail("a precision on an integer conversion"));
                }
                let n = integer(&arg)?;
                let mut digits = n.unsigned_abs().to_string();
                let sign = if n < 0 {
                    "-"
                } else if plus {
                    "+"
                } else if space {
                    " "
                } else {
                    ""
                };
                if zero && !left {
                    let len = sign.len() + digits.len();
                    if width > len {
                        digits = "0".repeat(width - len) + &digits;
                    }
                }
                pad(format!("{sign}{digits}"), width, left, ' ')
            }
            _ => return Err(fail("a printf conversion other than %s, %r, %d, %i, %u")),
        };
        out.push_str(&body);
    }
    Ok(out)
}

fn next_arg(args: &mut Args<'_>, key: Option<&str>) -> Result<Value, minijinja::Error> {
    match (args, key) {
        (Args::Seq(it, n), None) => {
            *n += 1;
            it.next()
                .cloned()
                .ok_or_else(|| fail("TypeError: not enough arguments for format string"))
        }
        (Args::Seq(..), Some(_)) => Err(fail("TypeError: format requires a mapping")),
        (Args::Map(m), Some(k)) => {
            let v = m.get_item(&Value::from(k))?;
            if v.is_undefined() {
                return Err(fail(&format!("KeyError: '{k}'")));
            }
            Ok(v)
        }
        (Args::Map(m), None) => Ok((*m).clone()),
    }
}

/// Python's `int()` of a `%d` argument: an integer, a boolean, a float truncated toward zero.
fn integer(v: &Value) -> Result<i128, minijinja::Error> {
    match v.kind() {
        ValueKind::Bool => Ok(i128::from(v.is_true())),
        ValueKind::Number if v.is_integer() => i128::try_from(v.clone()),
        ValueKind::Number => {
            let f = f64::try_from(v.clone())?;
            let t = f.trunc();
            if !t.is_finite() || t.abs() >= 2f64.powi(127) {
                return Err(fail("%d of a float that is not finite or too large"));
            }
            // An integral float below 2^127 converts exactly.
            Ok(t as i128)
        }
        _ => Err(fail("TypeError: %d format: a real number is required")),
    }
}

fn pad(text: String, width: usize, left: bool, fill: char) -> String {
    let n = text.chars().count();
    if n >= width {
        return text;
    }
    let fill: String = std::iter::repeat_n(fill, width - n).collect();
    if left {
        text + &fill
    } else {
        fill + &text
    }
}
