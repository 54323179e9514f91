//! String literals as Jinja reads them. Jinja's lexer decodes a literal's body with Python's
//! `unicode_escape` codec (after `encode("ascii", "backslashreplace")`): `\a`, `\v`, octal
//! `\ooo`, `\xhh`, `\uhhhh`, `\Uhhhhhhhh`, a backslash-newline (nothing), and any other
//! backslash pair kept as written (`\/` is two characters); minijinja reads JSON-like escapes
//! (`\/` is `/`, no `\a`, `\v`, `\U`, octal or line continuation). Before compiling, every
//! literal holding a backslash is decoded the Python way and written back with only the
//! escapes both read alike (`\\` and the quote). A `\N{name}` escape (Unicode's name table)
//! and a lone surrogate make the template fail to compile (refused), as does a literal Python
//! rejects (a truncated `\x`, `\u`, `\U` escape, a code point past U+10FFFF).

use crate::template_source::tags;
use std::borrow::Cow;

/// `source` with every string literal inside a tag that holds a backslash re-spelled with
/// Python's reading; an error names a literal kvexact cannot re-spell.
pub(crate) fn respell_string_literals(source: &str) -> Result<Cow<'_, str>, String> {
    let mut out: Option<String> = None;
    let mut copied = 0;
    for tag in tags(source) {
        let code = source.get(tag.inner.clone()).unwrap_or("");
        if !code.contains('\\') {
            continue;
        }
        let b = code.as_bytes();
        let mut i = 0;
        while i < b.len() {
            let q = b[i];
            if q != b'\'' && q != b'"' {
                i += 1;
                continue;
            }
            let start = i;
            i += 1;
            let mut escaped = false;
            while i < b.len() && b[i] != q {
                if b[i] == b'\\' {
                    escaped = true;
                    i += 1;
                }
                i += 1;
            }
            if i >= b.len() {
                break; // unterminated: the compiler reports it
            }
            let end = i; // the closing quote
            i += 1;
            if !escaped {
                continue;
            }
            let body = code.get(start + 1..end).unwrap_or("");
            let decoded = python_unicode_escape(body)?;
            let o = out.get_or_insert_with(|| String::with_capacity(source.len() + 16));
            let at = tag.inner.start + start;
            o.push_str(source.get(copied..at).unwrap_or(""));
            o.push(q as char);
            for c in decoded.chars() {
                if c == '\\' || c == q as char {
                    o.push('\\');
                }
                o.push(c);
            }
            o.push(q as char);
            copied = tag.inner.start + end + 1;
        }
    }
    Ok(match out {
        Some(mut o) => {
            o.push_str(source.get(copied..).unwrap_or(""));
            Cow::Owned(o)
        }
        None => Cow::Borrowed(source),
    })
}

/// Python's `body.encode("ascii", "backslashreplace").decode("unicode_escape")`.
fn python_unicode_escape(body: &str) -> Result<String, String> {
    // The ASCII form: every non-ASCII character as its backslash escape.
    let mut ascii = String::with_capacity(body.len() + 8);
    for c in body.chars() {
        let n = c as u32;
        if n < 0x80 {
            ascii.push(c);
        } else if n < 0x100 {
            ascii.push_str(&format!("\\x{n:02x}"));
        } else if n < 0x10000 {
            ascii.push_str(&format!("\\u{n:04x}"));
        } else {
            ascii.push_str(&format!("\\U{n:08x}"));
        }
    }
    let b = ascii.as_bytes();
    let mut out = String::with_capacity(body.len());
    let mut i = 0;
    let hex = |from: usize, n: usize, what: &str| -> Result<u32, String> {
        let digits = ascii
            .get(from..from + n)
            .filter(|d| d.len() == n && d.bytes().all(|x| x.is_ascii_hexdigit()))
            .ok_or_else(|| format!("a string literal with a truncated {what} escape"))?;
        u32::from_str_radix(digits, 16).map_err(|e| e.to_string())
    };
    let push = |out: &mut String, n: u32| -> Result<(), String> {
        let c = char::from_u32(n).ok_or_else(|| {
            format!("a string literal with the escape of U+{n:X} (a surrogate or past U+10FFFF)")
        })?;
        out.push(c);
        Ok(())
    };
    while i < b.len() {
        if b[i] != b'\\' {
            out.push(b[i] as char);
            i += 1;
            continue;
        }
        let Some(&e) = b.get(i + 1) else {
            return Err("a string literal ending in a lone backslash".to_string());
        };
        i += 2;
        match e {
            b'\n' => {}
            b'\\' => out.push('\\'),
            b'\'' => out.push('\''),
            b'"' => out.push('"'),
            b'a' => out.push('\u{7}'),
            b'b' => out.push('\u{8}'),
            b'f' => out.push('\u{c}'),
            b'n' => out.push('\n'),
            b'r' => out.push('\r'),
            b't' => out.push('\t'),
            b'v' => out.push('\u{b}'),
            b'0'..=b'7' => {
                let mut n = u32::from(e - b'0');
                for _ in 0..2 {
                    match b.get(i) {
                        Some(&d @ b'0'..=b'7') => {
                            n = n * 8 + u32::from(d - b'0');
                            i += 1;
                        }
                        _ => break,
                    }
                }
                push(&mut out, n)?;
            }
            b'x' => {
                let n = hex(i, 2, "\\x")?;
                i += 2;
                push(&mut out, n)?;
            }
            b'u' => {
                let n = hex(i, 4, "\\u")?;
                i += 4;
                push(&mut out, n)?;
            }
            b'U' => {
                let n = hex(i, 8, "\\U")?;
                i += 8;
                push(&mut out, n)?;
            }
            b'N' => return Err("a string literal with a \\N{name} escape".to_string()),
            other => {
                out.push('\\');
                out.push(other as char);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_decode_as_pythons_unicode_escape() {
        for (body, want) in [
            (
                r"\a|\b|\f|\v|\0|\101|\x41|\u00e9|\U0001F600|\q|\'|\\",
                "\u{7}|\u{8}|\u{c}|\u{b}|\0|A|A|é|😀|\\q|'|\\",
            ),
            ("a\\\nb", "ab"),
            (r"\777", "ǿ"),
            (r"\/", "\\/"),
            ("\\é", "\\xe9"),
            ("é\\n", "é\n"),
        ] {
            assert_eq!(python_unicode_escape(body).as_deref(), Ok(want), "{body}");
        }
        for bad in [
            r"\x4",
            r"\u12",
            r"\U00110000",
            r"\N{BULLET}",
            r"\ud800",
            "a\\",
        ] {
            assert!(python_unicode_escape(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn only_literals_with_a_backslash_inside_tags_are_respelled() {
        let src = r#"a\b {{ 'x\ay' ~ "q\"" ~ 'plain' }}{# '\a' #}{% raw %}'\a'{% endraw %}"#;
        let got = respell_string_literals(src).unwrap_or_default();
        assert_eq!(
            got,
            "a\\b {{ 'x\u{7}y' ~ \"q\\\"\" ~ 'plain' }}{# '\\a' #}{% raw %}'\\a'{% endraw %}"
        );
        assert!(matches!(
            respell_string_literals("{{ 'a' }}\\n"),
            Ok(Cow::Borrowed(_))
        ));
    }
}
