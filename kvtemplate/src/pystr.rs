//! Python `str` semantics that leak through Jinja templates (docs/contracts/templates.md §2, trap T1).

/// Python's `str.isspace` for one character.
///
/// Rust's `char::is_whitespace` (Unicode `White_Space`) misses U+001C..U+001F, which Python
/// treats as whitespace (bidi class B/S). Everything else agrees.
pub fn is_py_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// Python `s.strip()` (no argument).
pub fn strip(s: &str) -> &str {
    s.trim_matches(is_py_space)
}

/// Python `s.lstrip()` (no argument).
pub fn lstrip(s: &str) -> &str {
    s.trim_start_matches(is_py_space)
}

/// Python `s.rstrip()` (no argument).
pub fn rstrip(s: &str) -> &str {
    s.trim_end_matches(is_py_space)
}

/// Python `s.strip(chars)`, `lstrip(chars)` or `rstrip(chars)`: `left`/`right` choose the ends.
pub fn strip_chars<'s>(s: &'s str, chars: Option<&str>, left: bool, right: bool) -> &'s str {
    let in_set = |c: char| match chars {
        Some(set) => set.contains(c),
        None => is_py_space(c),
    };
    let mut out = s;
    if left {
        out = out.trim_start_matches(in_set);
    }
    if right {
        out = out.trim_end_matches(in_set);
    }
    out
}

/// Unicode general category Lt (titlecase letters; unchanged since Unicode 3.0).
fn is_titlecase(c: char) -> bool {
    matches!(c as u32,
        0x1C5 | 0x1C8 | 0x1CB | 0x1F2 | 0x1F88..=0x1F8F | 0x1F98..=0x1F9F | 0x1FA8..=0x1FAF
        | 0x1FBC | 0x1FCC | 0x1FFC)
}

/// Python's notion of a cased character (Lowercase, Uppercase or Lt).
fn is_cased(c: char) -> bool {
    c.is_lowercase() || c.is_uppercase() || is_titlecase(c)
}

/// Python's titlecase mapping of one character (`c.title()`): its uppercase mapping except
/// for the characters whose titlecase differs (the digraphs DŽ, LJ, NJ, DZ, Greek with
/// ypogegrammeni, ligatures, ß, Georgian Mkhedruli, which stays lowercase).
fn push_title(c: char, out: &mut String) {
    let special: Option<&str> = match c as u32 {
        0xDF => Some("Ss"),
        0x1C4..=0x1C6 => Some("\u{1C5}"),
        0x1C7..=0x1C9 => Some("\u{1C8}"),
        0x1CA..=0x1CC => Some("\u{1CB}"),
        0x1F1..=0x1F3 => Some("\u{1F2}"),
        0x587 => Some("\u{535}\u{582}"),
        0x10D0..=0x10FA | 0x10FD..=0x10FF => {
            out.push(c);
            return;
        }
        0x1F80..=0x1F87 | 0x1F90..=0x1F97 | 0x1FA0..=0x1FA7 => {
            out.push(char::from_u32(c as u32 + 8).unwrap_or(c));
            return;
        }
        0x1F88..=0x1F8F | 0x1F98..=0x1F9F | 0x1FA8..=0x1FAF | 0x1FBC | 0x1FCC | 0x1FFC => {
            out.push(c);
            return;
        }
        0x1FB2 => Some("\u{1FBA}\u{345}"),
        0x1FB3 => Some("\u{1FBC}"),
        0x1FB4 => Some("\u{386}\u{345}"),
        0x1FB7 => Some("\u{1FBC}\u{342}"),
        0x1FC2 => Some("\u{1FCA}\u{345}"),
        0x1FC3 => Some("\u{1FCC}"),
        0x1FC4 => Some("\u{389}\u{345}"),
        0x1FC7 => Some("\u{1FCC}\u{342}"),
        0x1FF2 => Some("\u{1FFA}\u{345}"),
        0x1FF3 => Some("\u{1FFC}"),
        0x1FF4 => Some("\u{38F}\u{345}"),
        0x1FF7 => Some("\u{1FFC}\u{342}"),
        0xFB00 => Some("Ff"),
        0xFB01 => Some("Fi"),
        0xFB02 => Some("Fl"),
        0xFB03 => Some("Ffi"),
        0xFB04 => Some("Ffl"),
        0xFB05 | 0xFB06 => Some("St"),
        0xFB13 => Some("\u{544}\u{576}"),
        0xFB14 => Some("\u{544}\u{565}"),
        0xFB15 => Some("\u{544}\u{56B}"),
        0xFB16 => Some("\u{54E}\u{576}"),
        0xFB17 => Some("\u{544}\u{56D}"),
        _ => None,
    };
    match special {
        Some(t) => out.push_str(t),
        None => out.extend(c.to_uppercase()),
    }
}

/// Python's `s.title()`: each character after a cased one lowercased, every other one
/// titlecased (`"they're"` → `"They'Re"`, `"a,b"` → `"A,B"`). `None` when the string holds a
/// capital sigma that would be lowercased: Python picks `ς` or `σ` from its neighbours by
/// properties kvexact does not carry.
pub fn title(s: &str) -> Option<String> {
    let mut out = String::with_capacity(s.len());
    let mut prev_cased = false;
    for c in s.chars() {
        if prev_cased {
            if c == '\u{3A3}' {
                return None;
            }
            out.extend(c.to_lowercase());
        } else {
            push_title(c, &mut out);
        }
        prev_cased = is_cased(c);
    }
    Some(out)
}

/// Some character has case `want`, and none has case `against` or is titlecase.
fn only_case(s: &str, want: fn(char) -> bool, against: fn(char) -> bool) -> bool {
    let mut cased = false;
    for c in s.chars() {
        if against(c) || is_titlecase(c) {
            return false;
        }
        cased |= want(c);
    }
    cased
}

/// Python's `s.islower()`: some cased character, none uppercase or titlecase.
pub fn is_lower(s: &str) -> bool {
    only_case(s, char::is_lowercase, char::is_uppercase)
}

/// Python's `s.isupper()`: some cased character, none lowercase or titlecase.
pub fn is_upper(s: &str) -> bool {
    only_case(s, char::is_uppercase, char::is_lowercase)
}

/// Python's `s.splitlines()`: lines end at `\n`, `\r`, `\r\n`, `\v`, `\f`, `\x1c`,
/// `\x1d`, `\x1e`, `\x85`, `\u2028` and `\u2029` (the ends dropped); no empty last line.
pub fn splitlines(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut it = s.char_indices().peekable();
    while let Some((i, c)) = it.next() {
        let end = match c {
            '\r' => {
                if it.peek().is_some_and(|&(_, n)| n == '\n') {
                    it.next();
                    i + 2
                } else {
                    i + 1
                }
            }
            '\n' | '\x0b' | '\x0c' | '\x1c' | '\x1d' | '\x1e' | '\u{85}' | '\u{2028}'
            | '\u{2029}' => i + c.len_utf8(),
            _ => continue,
        };
        out.push(&s[start..i]);
        start = end;
    }
    if start < s.len() {
        out.push(&s[start..]);
    }
    out
}

/// Jinja's `title` filter: the text cut before each run of `-`, Python white space, `(`,
/// `{`, `[` or `<`, each piece's first character uppercased and the rest lowercased
/// (`item[0].upper() + item[1:].lower()`).
pub fn jinja_title(s: &str) -> String {
    let sep = |c: char| matches!(c, '-' | '(' | '{' | '[' | '<') || is_py_space(c);
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while !rest.is_empty() {
        let n = rest.find(|c: char| !sep(c)).unwrap_or(rest.len());
        out.push_str(&rest[..n]);
        rest = &rest[n..];
        let w = rest.find(sep).unwrap_or(rest.len());
        let mut chars = rest[..w].chars();
        if let Some(first) = chars.next() {
            out.extend(first.to_uppercase());
            out.push_str(&chars.as_str().to_lowercase());
        }
        rest = &rest[w..];
    }
    out
}

/// Python `s.split(sep, maxsplit)`; `None` for `sep` splits on runs of Python whitespace.
///
/// Returns `None` when `sep` is the empty string (Python raises `ValueError: empty separator`).
pub fn split<'s>(s: &'s str, sep: Option<&str>, maxsplit: Option<i64>) -> Option<Vec<&'s str>> {
    let limit = match maxsplit {
        Some(n) if n >= 0 => Some(usize::try_from(n).unwrap_or(usize::MAX)),
        _ => None,
    };
    match sep {
        Some("") => None,
        Some(sep) => Some(match limit {
            Some(n) => s.splitn(n.saturating_add(1), sep).collect(),
            None => s.split(sep).collect(),
        }),
        None => {
            let mut parts = Vec::new();
            let mut rest = lstrip(s);
            while !rest.is_empty() {
                if limit.is_some_and(|n| parts.len() >= n) {
                    // Python keeps the remainder with its trailing whitespace but no leading.
                    parts.push(rest);
                    break;
                }
                match rest.find(is_py_space) {
                    Some(end) => {
                        parts.push(&rest[..end]);
                        rest = lstrip(&rest[end..]);
                    }
                    None => {
                        parts.push(rest);
                        rest = "";
                    }
                }
            }
            Some(parts)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn isspace_matches_python_list() {
        // The complete list of characters for which CPython's str.isspace() is true.
        let python: Vec<char> = [
            0x09u32, 0x0a, 0x0b, 0x0c, 0x0d, 0x1c, 0x1d, 0x1e, 0x1f, 0x20, 0x85, 0xa0, 0x1680,
            0x2000, 0x2001, 0x2002, 0x2003, 0x2004, 0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200a,
            0x2028, 0x2029, 0x202f, 0x205f, 0x3000,
        ]
        .iter()
        .filter_map(|&u| char::from_u32(u))
        .collect();
        let ours: Vec<char> = (0u32..0x11_0000)
            .filter_map(char::from_u32)
            .filter(|&c| is_py_space(c))
            .collect();
        assert_eq!(ours, python);
    }

    #[test]
    fn split_like_python() {
        assert_eq!(split("  a  b c ", None, None), Some(vec!["a", "b", "c"]));
        assert_eq!(split("  a  b c ", None, Some(1)), Some(vec!["a", "b c "]));
        assert_eq!(
            split("a</think>b</think>c", Some("</think>"), None),
            Some(vec!["a", "b", "c"])
        );
        assert_eq!(split("a,b,c", Some(","), Some(1)), Some(vec!["a", "b,c"]));
        assert_eq!(split("", None, None), Some(vec![]));
        assert_eq!(split("", Some(","), None), Some(vec![""]));
        assert_eq!(split("x", Some(""), None), None);
    }

    #[test]
    fn strip_variants() {
        assert_eq!(strip("\u{1c} a \u{3000}"), "a");
        assert_eq!(strip_chars("xxaxx", Some("x"), true, false), "axx");
        assert_eq!(strip_chars("xxaxx", Some("x"), false, true), "xxa");
        assert_eq!(rstrip("a \n"), "a");
    }
}
