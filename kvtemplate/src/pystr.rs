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
