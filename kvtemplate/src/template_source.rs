//! What the template environment does to a chat template's source before compiling it, and
//! what it reads from it: the tags found the way Jinja's lexer finds them (text outside tags,
//! `{# … #}` comments, string literals inside tags and `{% raw %}` … `{% endraw %}` blocks are
//! not tags), transformers' `{% generation %}` blocks rewritten into blocks minijinja knows,
//! and whether the template prints values through a path whose float spelling kvexact does
//! not control ([`prints_floats_unchecked`]).

use std::borrow::Cow;
use std::ops::Range;

/// One `{{ … }}` or `{% … %}` tag.
pub(crate) struct Tag {
    /// The bytes between the delimiters (markers such as `-` included).
    pub inner: Range<usize>,
    /// A `{% … %}` block tag (else an expression).
    pub block: bool,
}

/// Every tag of `source` outside comments and raw blocks, in order; the walk stops at an
/// unclosed comment, tag or raw block (the compiler then reports it).
pub(crate) fn tags(source: &str) -> impl Iterator<Item = Tag> + '_ {
    let mut i = 0;
    std::iter::from_fn(move || loop {
        let at = i + source.get(i..)?.find('{')?;
        match source.as_bytes().get(at + 1) {
            Some(b'#') => i = at + 2 + source.get(at + 2..)?.find("#}")? + 2,
            Some(b'{') => {
                let end = tag_end(source, at + 2, "}}")?;
                i = end + 2;
                return Some(Tag {
                    inner: at + 2..end,
                    block: false,
                });
            }
            Some(b'%') => {
                let end = tag_end(source, at + 2, "%}")?;
                i = end + 2;
                let (_, body, _) = split_markers(source.get(at + 2..end)?);
                if body.trim() == "raw" {
                    // The raw block's own tag is yielded; its body is not code.
                    i = raw_block_end(source, i)?;
                    return Some(Tag {
                        inner: at + 2..end,
                        block: true,
                    });
                }
                return Some(Tag {
                    inner: at + 2..end,
                    block: true,
                });
            }
            _ => i = at + 1,
        }
    })
}

/// The source as Jinja's lexer reads it: every line break (`\r\n`, `\r`, `\n`) a `\n`
/// (`Lexer.tokeniter` splits the source at line breaks and joins the lines with `\n`, so a
/// template with Windows line endings renders `\n`, in its text and in its string
/// literals); minijinja keeps them as written.
pub(crate) fn normalize_newlines(source: &str) -> Cow<'_, str> {
    if source.contains('\r') {
        Cow::Owned(source.replace("\r\n", "\n").replace('\r', "\n"))
    } else {
        Cow::Borrowed(source)
    }
}

/// Jinja does not apply trim_blocks to the line break right after `{% raw %}` (its raw-block
/// rule ends at `%}`), minijinja does: that line break is doubled so that minijinja's trim
/// leaves Jinja's text. A `{% raw -%}` tag strips the white space after it in both.
pub(crate) fn keep_newline_after_raw(source: &str) -> Cow<'_, str> {
    let mut out: Option<String> = None;
    let mut copied = 0;
    for tag in tags(source).filter(|t| t.block) {
        let inner = source.get(tag.inner.clone()).unwrap_or("");
        let (_, body, trail) = split_markers(inner);
        let after = tag.inner.end + 2;
        if body.trim() != "raw" || !trail.is_empty() || source.as_bytes().get(after) != Some(&b'\n')
        {
            continue;
        }
        let o = out.get_or_insert_with(|| String::with_capacity(source.len() + 8));
        o.push_str(source.get(copied..after).unwrap_or(""));
        o.push('\n');
        copied = after;
    }
    match out {
        Some(mut o) => {
            o.push_str(source.get(copied..).unwrap_or(""));
            Cow::Owned(o)
        }
        None => Cow::Borrowed(source),
    }
}

/// transformers' `{% generation %}` … `{% endgeneration %}` block (its `AssistantTracker`
/// extension, used by SmolLM3-style templates to mark assistant tokens for training masks;
/// rendering gives the body unchanged) rewritten into a block minijinja knows that renders its
/// body: `{% if true %}` … `{% endif %}`. Each tag keeps its whitespace-control markers
/// (`{%-`, `-%}`, `+`) and its place on the line, so trim_blocks, lstrip_blocks and `-` trim
/// exactly as around the original tag.
///
/// Only real block tags are rewritten ([`tags`]). A source without such a tag comes back
/// borrowed.
///
/// `{%- generation -%}{{ x }}{% endgeneration %}` becomes `{%- if true -%}{{ x }}{% endif %}`;
/// `{{ '{% generation %}' }}` is left as it is (unit tests in `env.rs`).
pub(crate) fn rewrite_generation_tags(source: &str) -> Cow<'_, str> {
    let mut out: Option<String> = None;
    let mut copied = 0;
    for tag in tags(source).filter(|t| t.block) {
        let inner = source.get(tag.inner.clone()).unwrap_or("");
        let (lead, body, trail) = split_markers(inner);
        let with = match body.trim() {
            "generation" => "if true",
            "endgeneration" => "endif",
            _ => continue,
        };
        let word = body.trim();
        let o = out.get_or_insert_with(|| String::with_capacity(source.len()));
        o.push_str(source.get(copied..tag.inner.start).unwrap_or(""));
        o.push_str(lead);
        o.push_str(&body.replacen(word, with, 1));
        o.push_str(trail);
        copied = tag.inner.end;
    }
    match out {
        Some(mut o) => {
            o.push_str(source.get(copied..).unwrap_or(""));
            Cow::Owned(o)
        }
        None => Cow::Borrowed(source),
    }
}

/// The syntax transformers compiles chat templates with: trim_blocks, lstrip_blocks, the
/// trailing newline dropped.
pub(crate) fn syntax() -> Result<minijinja::syntax::SyntaxConfig, String> {
    minijinja::syntax::SyntaxConfig::builder()
        .trim_blocks(true)
        .lstrip_blocks(true)
        .keep_trailing_newline(false)
        .build()
        .map_err(|e| e.to_string())
}

/// The function every `for` loop's iterable is handed to ([`rewrite_for_loops`]; installed by
/// `pyfilters.rs`).
pub(crate) const LOOP_ITERABLE: &str = "__kvexact_loop_iterable";

/// Every `{% for TARGET in ITER [if COND] [recursive] %}` tag rewritten to iterate
/// `__kvexact_loop_iterable((ITER))`, which gives a string's characters as a list: minijinja
/// iterates a string with a length it does not call exact, so `loop.last`, `loop.length` and
/// `loop.revindex` come out `false`/undefined over a string where Jinja knows them (vLLM's
/// pythonic tool templates loop over `arguments`, a string when it is not JSON). The function
/// also raises over `none`, as Jinja does (minijinja iterates it as empty).
///
/// The iterable is the code after the first top-level word `in` up to the first top-level
/// word `if` or `recursive` (not after a `.`), as Jinja's parser reads it (the iterable is
/// a tuple without a conditional expression); string literals and brackets are skipped. The
/// double parentheses keep a bare tuple (`for x in a, b`) one argument. A source without a
/// `for` tag comes back borrowed.
pub(crate) fn rewrite_for_loops(source: &str) -> Cow<'_, str> {
    let mut out: Option<String> = None;
    let mut copied = 0;
    for tag in tags(source).filter(|t| t.block) {
        let Some(iter) = for_iterable(source, tag.inner.clone()) else {
            continue;
        };
        let o = out.get_or_insert_with(|| String::with_capacity(source.len() + 64));
        o.push_str(source.get(copied..iter.start).unwrap_or(""));
        o.push_str(LOOP_ITERABLE);
        o.push_str("((");
        o.push_str(source.get(iter.clone()).unwrap_or(""));
        o.push_str("))");
        copied = iter.end;
    }
    match out {
        Some(mut o) => {
            o.push_str(source.get(copied..).unwrap_or(""));
            Cow::Owned(o)
        }
        None => Cow::Borrowed(source),
    }
}

/// The byte range of a `for` tag's iterable inside `source` (`inner`: the tag's inside), or
/// `None` when the tag is not a `for` loop or its iterable cannot be found.
fn for_iterable(source: &str, inner: Range<usize>) -> Option<Range<usize>> {
    let b = source.as_bytes();
    let mut i = inner.start;
    if b.get(i).is_some_and(|c| matches!(c, b'-' | b'+')) {
        i += 1;
    }
    let end = if inner.end > i && matches!(b.get(inner.end - 1), Some(b'-' | b'+')) {
        inner.end - 1
    } else {
        inner.end
    };
    let is_word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    while i < end && b[i].is_ascii_whitespace() {
        i += 1;
    }
    let starts_with_for = source.get(i..end)?.starts_with("for");
    if !starts_with_for || b.get(i + 3).is_some_and(|&c| is_word(c)) {
        return None;
    }
    i += 3;
    // Top-level words after `for`, with their ranges.
    let mut depth = 0usize;
    let mut after_dot = false;
    let mut iter_start: Option<usize> = None;
    while i < end {
        let c = b[i];
        match c {
            b'\'' | b'"' => {
                i += 1;
                while i < end && b[i] != c {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
                after_dot = false;
                continue;
            }
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => depth = depth.saturating_sub(1),
            _ if c.is_ascii_alphabetic() || c == b'_' => {
                let w0 = i;
                while i < end && is_word(b[i]) {
                    i += 1;
                }
                let word = source.get(w0..i)?;
                if depth == 0 && !after_dot {
                    match (iter_start, word) {
                        (None, "in") => iter_start = Some(i),
                        (Some(s), "if" | "recursive") => return trimmed(source, s..w0),
                        _ => {}
                    }
                }
                after_dot = false;
                continue;
            }
            _ => {}
        }
        if !c.is_ascii_whitespace() {
            after_dot = c == b'.';
        }
        i += 1;
    }
    trimmed(source, iter_start?..end)
}

/// `r` without its leading and trailing white space; `None` when nothing is left.
fn trimmed(source: &str, r: Range<usize>) -> Option<Range<usize>> {
    let text = source.get(r.clone())?;
    let start = r.start + (text.len() - text.trim_start().len());
    let end = r.end - (text.len() - text.trim_end().len());
    (start < end).then_some(start..end)
}

/// The filters whose output never spells a float of their input the way minijinja displays
/// it: those that do not turn their input into text, `tojson` (Python's `json.dumps`),
/// `format` (Python's `%`, `pyformat.rs`), and the string filters the environment passes
/// Python's `str()` of their input (`pyfilters.rs`: `replace` among them).
const FILTERS_EXACT: &[&str] = &[
    "abs",
    "attr",
    "batch",
    "bool",
    "capitalize",
    "chain",
    "count",
    "d",
    "default",
    "dictsort",
    "e",
    "escape",
    "first",
    "float",
    "format",
    "groupby",
    "int",
    "items",
    "join",
    "last",
    "length",
    "list",
    "lower",
    "map",
    "max",
    "min",
    "pprint",
    "reject",
    "rejectattr",
    "replace",
    "reverse",
    "round",
    "safe",
    "select",
    "selectattr",
    "slice",
    "sort",
    "string",
    "sum",
    "title",
    "tojson",
    "trim",
    "unique",
    "upper",
    "zip",
];

/// The filters of the engines' environment: Jinja 3.1's `FILTERS` (transformers adds none but
/// its own `tojson`). A filter outside them raises in the engine when reached, whatever
/// kvexact prints.
const JINJA_FILTERS: &[&str] = &[
    "abs",
    "attr",
    "batch",
    "capitalize",
    "center",
    "count",
    "d",
    "default",
    "dictsort",
    "e",
    "escape",
    "filesizeformat",
    "first",
    "float",
    "forceescape",
    "format",
    "groupby",
    "indent",
    "int",
    "items",
    "join",
    "last",
    "length",
    "list",
    "lower",
    "map",
    "max",
    "min",
    "pprint",
    "random",
    "reject",
    "rejectattr",
    "replace",
    "reverse",
    "round",
    "safe",
    "select",
    "selectattr",
    "slice",
    "sort",
    "string",
    "striptags",
    "sum",
    "title",
    "tojson",
    "trim",
    "truncate",
    "unique",
    "upper",
    "urlencode",
    "urlize",
    "wordcount",
    "wordwrap",
    "xmlattr",
];

/// Whether filter `name` can print a float in minijinja's spelling where the engine prints
/// text: one of the engines' filters ([`JINJA_FILTERS`]) outside [`FILTERS_EXACT`]. A filter
/// the engines lack (a template's own `from_json`) raises there when reached.
fn filter_unchecked(name: &str) -> bool {
    JINJA_FILTERS.contains(&name) && !FILTERS_EXACT.contains(&name)
}

/// Whether the template can turn a float into text through a path where minijinja, not
/// kvexact, spells it: a `~` chain left as written, one of the engines' filters outside
/// [`FILTERS_EXACT`] (`indent`, `center`, `truncate`, …) or one named to `map`. A render of
/// such a template refuses a context holding a float Python spells otherwise (`env.rs`).
pub(crate) fn prints_floats_unchecked(source: &str) -> bool {
    tags(source).any(|tag| {
        let inner = source.get(tag.inner).unwrap_or("");
        let mut words = code_outside_strings(inner);
        let mut after_bar = false;
        let mut after_map = false;
        while let Some(piece) = words.next() {
            match piece {
                Piece::Char('~') => return true,
                Piece::Char('|') => after_bar = true,
                Piece::Word(w) if after_bar => {
                    if filter_unchecked(w) {
                        return true;
                    }
                    after_map = w == "map";
                    after_bar = false;
                }
                Piece::Word(w) => after_map = w == "map",
                Piece::Char('(') if after_map => {
                    // `map('name', …)`: the filter named first.
                    if let Some(Piece::Str(name)) = words.next() {
                        if filter_unchecked(name) {
                            return true;
                        }
                    }
                    after_map = false;
                }
                Piece::Char(c) if c.is_whitespace() => {}
                _ => {
                    after_bar = false;
                    after_map = false;
                }
            }
        }
        false
    })
}

/// A piece of a tag's code.
enum Piece<'a> {
    /// An identifier.
    Word(&'a str),
    /// A string literal's body (escapes left as written).
    Str(&'a str),
    /// Any other character.
    Char(char),
}

/// A tag's code as identifiers, string literals and single characters.
fn code_outside_strings(code: &str) -> impl Iterator<Item = Piece<'_>> + '_ {
    let b = code.as_bytes();
    let mut i = 0;
    std::iter::from_fn(move || {
        let c = *b.get(i)?;
        let start = i;
        if c == b'\'' || c == b'"' {
            i += 1;
            while let Some(&x) = b.get(i) {
                if x == b'\\' {
                    i += 2;
                    continue;
                }
                i += 1;
                if x == c {
                    break;
                }
            }
            let end = i.saturating_sub(1).max(start + 1).min(code.len());
            return Some(Piece::Str(code.get(start + 1..end).unwrap_or("")));
        }
        if c.is_ascii_alphabetic() || c == b'_' {
            while b
                .get(i)
                .is_some_and(|x| x.is_ascii_alphanumeric() || *x == b'_')
            {
                i += 1;
            }
            return Some(Piece::Word(code.get(start..i).unwrap_or("")));
        }
        let ch = code.get(i..)?.chars().next()?;
        i += ch.len_utf8();
        Some(Piece::Char(ch))
    })
}

/// The byte index of `close` ending a tag whose inside starts at `from`, skipping Jinja string
/// literals (`'…'`, `"…"`, backslash escapes).
fn tag_end(source: &str, from: usize, close: &str) -> Option<usize> {
    let b = source.as_bytes();
    let mut i = from;
    let mut quote: Option<u8> = None;
    while let Some(&c) = b.get(i) {
        match quote {
            Some(q) => {
                if c == b'\\' {
                    i += 1;
                } else if c == q {
                    quote = None;
                }
            }
            None if c == b'\'' || c == b'"' => quote = Some(c),
            None if b.get(i..).is_some_and(|t| t.starts_with(close.as_bytes())) => {
                return Some(i);
            }
            None => {}
        }
        i += 1;
    }
    None
}

/// A block tag's inside split into its whitespace-control markers and its statement.
fn split_markers(inner: &str) -> (&str, &str, &str) {
    let lead = if inner.starts_with(['-', '+']) { 1 } else { 0 };
    let (l, rest) = inner.split_at(lead);
    let trail = if rest.ends_with(['-', '+']) { 1 } else { 0 };
    let (body, t) = rest.split_at(rest.len() - trail);
    (l, body, t)
}

/// The index after the `{% endraw %}` tag that closes a raw block whose body starts at `from`.
fn raw_block_end(source: &str, from: usize) -> Option<usize> {
    let mut i = from;
    loop {
        let at = i + source.get(i..)?.find("{%")?;
        let end = at + 2 + source.get(at + 2..)?.find("%}")?;
        let (_, body, _) = split_markers(source.get(at + 2..end)?);
        if body.trim() == "endraw" {
            return Some(end + 2);
        }
        i = at + 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_breaks_and_raw_blocks_read_as_jinjas_lexer_reads_them() {
        assert_eq!(normalize_newlines("a\r\nb\rc\n"), "a\nb\nc\n");
        assert!(matches!(normalize_newlines("a\nb"), Cow::Borrowed(_)));
        assert_eq!(
            keep_newline_after_raw("{% raw %}\nx{% endraw %}\n{%- raw -%}\ny{% endraw %}"),
            "{% raw %}\n\nx{% endraw %}\n{%- raw -%}\ny{% endraw %}"
        );
        // A `{% raw %}` inside a raw block is text.
        assert!(matches!(
            keep_newline_after_raw("{% raw %}{% raw %}\n{% endraw %}"),
            Cow::Borrowed(_)
        ));
    }

    #[test]
    fn for_loops_hand_their_iterable_to_the_loop_function() {
        let f = |x: &str| format!("{LOOP_ITERABLE}(({x}))");
        for (src, want) in [
            (
                "{% for m in messages %}x{% endfor %}".to_string(),
                format!("{{% for m in {} %}}x{{% endfor %}}", f("messages")),
            ),
            (
                "{%- for k, v in d.items() if v is not none recursive -%}".to_string(),
                format!(
                    "{{%- for k, v in {} if v is not none recursive -%}}",
                    f("d.items()")
                ),
            ),
            (
                "{% for x in a, b %}".to_string(),
                format!("{{% for x in {} %}}", f("a, b")),
            ),
            (
                "{% for x in xs|select('in', 'if x') if x.recursive %}".to_string(),
                format!(
                    "{{% for x in {} if x.recursive %}}",
                    f("xs|select('in', 'if x')")
                ),
            ),
            (
                "{% for x in y.if_ + [\"%}\"] recursive %}".to_string(),
                format!("{{% for x in {} recursive %}}", f("y.if_ + [\"%}\"]")),
            ),
            (
                "{% for (a, b) in (c if d else e) %}".to_string(),
                format!("{{% for (a, b) in {} %}}", f("(c if d else e)")),
            ),
            (
                "{% for x in s %}{% for y in x %}{% endfor %}{% endfor %}".to_string(),
                format!(
                    "{{% for x in {} %}}{{% for y in {} %}}{{% endfor %}}{{% endfor %}}",
                    f("s"),
                    f("x")
                ),
            ),
        ] {
            assert_eq!(rewrite_for_loops(&src), want, "{src}");
        }
        for src in [
            "{{ 'for x in y' }}{# {% for x in y %} #}",
            "{% raw %}{% for x in y %}{% endraw %}",
            "{% format %}{% if for_ %}{% set forx = 1 %}",
            "{% for %}",
        ] {
            assert!(matches!(rewrite_for_loops(src), Cow::Borrowed(_)), "{src}");
        }
    }

    #[test]
    fn unchecked_float_paths_are_found_in_tags_only() {
        for (src, want) in [
            ("{{ a ~ b }}", true),
            ("{{ '~' }}~ text {# ~ #}", false),
            ("{% raw %}{{ a ~ b }}{% endraw %}", false),
            ("{{ x | replace('a', 'b') }}", false),
            ("{{ x | indent(2) }}", true),
            (
                "{{ x|trim|upper }}{{ xs | join(', ') }}{{ y|tojson }}",
                false,
            ),
            (
                "{{ xs|map('upper')|join }}{{ xs|map(attribute='a') }}",
                false,
            ),
            ("{{ xs|map('center', 9) }}", true),
            (
                "{{ x|from_json }}{{ xs|map('from_json') }}{{ x|pprint }}",
                false,
            ),
            ("{% set s = x|indent(2) %}", true),
            ("{{ 'a|replace' }}{{ x or y }}", false),
        ] {
            assert_eq!(prints_floats_unchecked(src), want, "{src}");
        }
    }
}
