//! Jinja's `~` operator: `str()` of each operand, joined. minijinja joins its own display of
//! each operand, which differs from Python's `str()` for floats (`1e-05`, `1e+16`) and for the
//! containers a template builds (`repr` escapes of every character `str.isprintable()`
//! rejects). Before compiling, each `~` chain whose reading is certain is rewritten into a call
//! of [`CONCAT`], which prints every operand as Python's `str()` (`pyrepr`); a `~` left as it
//! is keeps the template under the exponent-float refusal (`template_source`).
//!
//! The reading follows Jinja's grammar (`parse_math1` → `parse_concat` → `parse_math2`): `~`
//! binds looser than `*`, `/`, `//`, `%`, `**`, the unary signs and the postfix forms
//! (attribute, item, call, filter) and tighter than binary `+`/`-`, comparisons, `not`, `and`,
//! `or` and the conditional expression (`a + b ~ c` is `a + (b ~ c)`). An operand is
//! therefore a product of signed postfix expressions; a chain is rewritten only when every
//! operand parses as one, the token before the chain can only end a looser construct (a
//! bracket, `,`, `:`, `=`, a binary `+`/`-`, a comparison, `and`/`or`/`not`/`if`/`elif`/
//! `else`/`in`, or the start of the tag) and the token after it can only start one. Anything
//! else (a test with `is`, adjacent string literals) leaves the chain alone.

use crate::template_source::tags;
use std::borrow::Cow;

/// The function a rewritten `~` chain calls (installed by `pyfilters.rs`).
pub(crate) const CONCAT: &str = "__kvexact_concat";

/// One token of a tag's code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A string literal.
    Str,
    /// A number literal.
    Num,
    /// An identifier or keyword.
    Word,
    /// `(`, `[` or `{`.
    Open,
    /// `)`, `]` or `}`.
    Close,
    /// Any operator or punctuation (one or two characters).
    Op,
}

#[derive(Debug, Clone, Copy)]
struct Tok {
    kind: Kind,
    start: usize,
    end: usize,
}

/// The tokens of `code`, or `None` when it holds something the tokenizer does not know (an
/// unterminated string): the tag is then left alone.
fn tokenize(code: &str) -> Option<Vec<Tok>> {
    let b = code.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let start = i;
        let kind = match c {
            _ if c.is_ascii_whitespace() => {
                i += 1;
                continue;
            }
            b'\'' | b'"' => {
                i += 1;
                loop {
                    match b.get(i) {
                        None => return None,
                        Some(b'\\') => i += 2,
                        Some(&x) if x == c => {
                            i += 1;
                            break;
                        }
                        Some(_) => i += 1,
                    }
                }
                Kind::Str
            }
            b'0'..=b'9' => {
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'.')
                {
                    // An exponent's sign belongs to the number.
                    if matches!(b[i], b'e' | b'E') && matches!(b.get(i + 1), Some(b'+' | b'-')) {
                        i += 1;
                    }
                    i += 1;
                }
                Kind::Num
            }
            _ if c.is_ascii_alphabetic() || c == b'_' => {
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                    i += 1;
                }
                Kind::Word
            }
            b'(' | b'[' | b'{' => {
                i += 1;
                Kind::Open
            }
            b')' | b']' | b'}' => {
                i += 1;
                Kind::Close
            }
            _ => {
                let two = b.get(i..i + 2).unwrap_or_default();
                i += if matches!(two, b"==" | b"!=" | b"<=" | b">=" | b"//" | b"**") {
                    2
                } else {
                    code.get(i..)?.chars().next()?.len_utf8()
                };
                Kind::Op
            }
        };
        out.push(Tok {
            kind,
            start,
            end: i,
        });
    }
    Some(out)
}

/// Words that never start or continue an operand.
const KEYWORDS: &[&str] = &[
    "and",
    "or",
    "not",
    "if",
    "elif",
    "else",
    "in",
    "is",
    "for",
    "recursive",
];

/// Words after which a chain may start (they end a construct looser than `~`).
const BEFORE: &[&str] = &["and", "or", "not", "if", "elif", "else", "in"];

/// Words that may follow a chain (they start a construct looser than `~`).
const AFTER: &[&str] = &["and", "or", "not", "if", "else", "in"];

/// Operators after which a chain may start, and that may follow one (`+`/`-` only when
/// binary, see [`Parser::starts_after`]).
const BOUNDARY_OPS: &[&str] = &[",", ":", "=", "==", "!=", "<", ">", "<=", ">=", "+", "-"];

/// Operators joining an operand's arithmetic (those binding tighter than `~`).
const MATH_OPS: &[&str] = &["*", "/", "//", "%", "**"];

struct Parser<'a> {
    code: &'a str,
    toks: Vec<Tok>,
    /// For each `Open` token, the index of its `Close`.
    closes: Vec<Option<usize>>,
}

impl<'a> Parser<'a> {
    fn new(code: &'a str) -> Option<Parser<'a>> {
        let toks = tokenize(code)?;
        let mut closes = vec![None; toks.len()];
        let mut stack = Vec::new();
        for (i, t) in toks.iter().enumerate() {
            match t.kind {
                Kind::Open => stack.push(i),
                Kind::Close => closes[stack.pop()?] = Some(i),
                _ => {}
            }
        }
        stack.is_empty().then_some(Parser { code, toks, closes })
    }

    fn text(&self, i: usize) -> &'a str {
        let t = self.toks[i];
        self.code.get(t.start..t.end).unwrap_or("")
    }

    fn is_op(&self, i: usize, ops: &[&str]) -> bool {
        i < self.toks.len() && self.toks[i].kind == Kind::Op && ops.contains(&self.text(i))
    }

    fn is_word(&self, i: usize, words: &[&str]) -> bool {
        i < self.toks.len() && self.toks[i].kind == Kind::Word && words.contains(&self.text(i))
    }

    /// The end (exclusive token index) of a postfix expression starting at `i`, below `hi`.
    fn postfix(&self, mut i: usize, hi: usize) -> Option<usize> {
        let t = *self.toks.get(i).filter(|_| i < hi)?;
        i = match t.kind {
            Kind::Str => {
                // Adjacent literals concatenate in Jinja: left alone.
                if i + 1 < hi && self.toks[i + 1].kind == Kind::Str {
                    return None;
                }
                i + 1
            }
            Kind::Num => i + 1,
            Kind::Word if !self.is_word(i, KEYWORDS) => i + 1,
            Kind::Open => self.closes[i]? + 1,
            _ => return None,
        };
        loop {
            if i >= hi {
                return Some(i);
            }
            let t = self.toks[i];
            match (t.kind, self.text(i)) {
                (Kind::Op, ".") => {
                    if i + 1 < hi && matches!(self.toks[i + 1].kind, Kind::Word | Kind::Num) {
                        i += 2;
                    } else {
                        return None;
                    }
                }
                (Kind::Open, "(" | "[") => i = self.closes[i]? + 1,
                (Kind::Op, "|") => {
                    if i + 1 < hi && self.toks[i + 1].kind == Kind::Word {
                        i += 2;
                        if i < hi && self.text(i) == "(" {
                            i = self.closes[i]? + 1;
                        }
                    } else {
                        return None;
                    }
                }
                (Kind::Word, "is") => return None,
                _ => return Some(i),
            }
        }
    }

    /// The end of an operand (arithmetic of postfix expressions, unary signs allowed after an
    /// operator) starting at `i`.
    fn operand(&self, mut i: usize, hi: usize) -> Option<usize> {
        loop {
            while self.is_op(i, &["-", "+"]) && i < hi {
                i += 1;
            }
            i = self.postfix(i, hi)?;
            if i < hi && self.is_op(i, MATH_OPS) {
                i += 1;
                continue;
            }
            return Some(i);
        }
    }

    /// Whether a chain may start at token `i` of the level starting at `lo`: a `+`/`-` before
    /// it must be binary (it follows an operand), else it is the operand's own sign.
    fn starts_after(&self, i: usize, lo: usize) -> bool {
        if i == lo || self.is_word(i - 1, BEFORE) {
            return true;
        }
        if self.is_op(i - 1, &["+", "-"]) {
            return i - 1 > lo && self.ends_operand(i - 2);
        }
        self.is_op(i - 1, BOUNDARY_OPS)
    }

    /// Whether token `i` can end an operand (so a `+`/`-` after it is binary).
    fn ends_operand(&self, i: usize) -> bool {
        match self.toks[i].kind {
            Kind::Str | Kind::Num | Kind::Close => true,
            Kind::Word => !self.is_word(i, KEYWORDS),
            Kind::Open | Kind::Op => false,
        }
    }

    /// Whether a chain ending before token `i` may end there (level end at `hi`).
    fn ends_before(&self, i: usize, hi: usize) -> bool {
        i == hi || self.is_op(i, BOUNDARY_OPS) || self.is_word(i, AFTER)
    }

    /// The operands of a chain starting at `i` (two or more), or `None`.
    fn chain(&self, i: usize, lo: usize, hi: usize) -> Option<Vec<(usize, usize)>> {
        if !self.starts_after(i, lo) {
            return None;
        }
        let mut ops = Vec::new();
        let mut at = i;
        loop {
            let end = self.operand(at, hi)?;
            ops.push((at, end));
            if end < hi && self.is_op(end, &["~"]) {
                at = end + 1;
                continue;
            }
            return (ops.len() > 1 && self.ends_before(end, hi)).then_some(ops);
        }
    }

    /// Writes tokens `lo..hi` (the text from token `lo`'s start to token `hi - 1`'s end) with
    /// every certain chain rewritten; returns whether a `~` was left.
    fn emit(&self, lo: usize, hi: usize, out: &mut String) -> bool {
        let mut left = false;
        let mut i = lo;
        let mut last_end: Option<usize> = None;
        let gap = |out: &mut String, last: Option<usize>, start: usize| {
            if let Some(e) = last {
                out.push_str(self.code.get(e..start).unwrap_or(""));
            }
        };
        while i < hi {
            let t = self.toks[i];
            gap(out, last_end, t.start);
            if let Some(ops) = self.chain(i, lo, hi) {
                out.push_str(CONCAT);
                out.push('(');
                for (k, &(a, b)) in ops.iter().enumerate() {
                    if k > 0 {
                        out.push_str(", ");
                    }
                    left |= self.emit(a, b, out);
                }
                out.push(')');
                let (_, b) = ops[ops.len() - 1];
                last_end = Some(self.toks[b - 1].end);
                i = b;
                continue;
            }
            if t.kind == Kind::Open {
                let Some(close) = self.closes[i] else {
                    return true;
                };
                out.push_str(self.text(i));
                let inner_start = i + 1;
                if inner_start < close {
                    gap(out, Some(t.end), self.toks[inner_start].start);
                    left |= self.emit(inner_start, close, out);
                    gap(out, Some(self.toks[close - 1].end), self.toks[close].start);
                } else {
                    gap(out, Some(t.end), self.toks[close].start);
                }
                out.push_str(self.text(close));
                last_end = Some(self.toks[close].end);
                i = close + 1;
                continue;
            }
            left |= self.is_op(i, &["~"]);
            out.push_str(self.text(i));
            last_end = Some(t.end);
            i += 1;
        }
        left
    }
}

/// `source` with every `~` chain whose reading is certain rewritten into a call of
/// [`CONCAT`] (a source without one comes back borrowed), and whether a `~` was left as it
/// is.
pub(crate) fn rewrite_concats(source: &str) -> (Cow<'_, str>, bool) {
    let mut out: Option<String> = None;
    let mut copied = 0;
    let mut left = false;
    for tag in tags(source) {
        let inner = source.get(tag.inner.clone()).unwrap_or("");
        if !inner.contains('~') {
            continue;
        }
        // The markers stay where they are: a leading/trailing `-`/`+` is not code.
        let lead = usize::from(inner.starts_with(['-', '+']));
        let trail = usize::from(inner.len() > lead && inner.ends_with(['-', '+']));
        let code_range = tag.inner.start + lead..tag.inner.end - trail;
        let code = source.get(code_range.clone()).unwrap_or("");
        let Some(p) = Parser::new(code) else {
            left = true;
            continue;
        };
        if p.toks.is_empty() {
            continue;
        }
        let mut body = String::with_capacity(code.len() + 32);
        let still = p.emit(0, p.toks.len(), &mut body);
        left |= still;
        let first = p.toks[0].start;
        let last = p.toks[p.toks.len() - 1].end;
        let o = out.get_or_insert_with(|| String::with_capacity(source.len() + 64));
        o.push_str(source.get(copied..code_range.start + first).unwrap_or(""));
        o.push_str(&body);
        copied = code_range.start + last;
    }
    match out {
        Some(mut o) => {
            o.push_str(source.get(copied..).unwrap_or(""));
            (Cow::Owned(o), left)
        }
        None => (Cow::Borrowed(source), left),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use minijinja::{context, Environment, Value};
    use proptest::prelude::*;

    /// Renders `src` in a plain minijinja environment whose `__kvexact_concat` joins
    /// minijinja's own display of each operand (what its `~` does): the rewrite must not
    /// change the reading of any expression.
    fn plain(src: &str) -> Result<String, String> {
        let mut env = Environment::new();
        env.add_function(CONCAT, |args: minijinja::value::Rest<Value>| {
            args.iter().map(|v| v.to_string()).collect::<String>()
        });
        env.add_template_owned("t", src.to_string())
            .map_err(|e| e.to_string())?;
        let t = env.get_template("t").map_err(|e| e.to_string())?;
        t.render(context! { a => "x", b => 2, c => "", d => vec![1, 2], e => true })
            .map_err(|e| e.to_string())
    }

    fn arb_expr() -> impl Strategy<Value = String> {
        let leaf = prop_oneof![
            Just("a".to_string()),
            Just("b".to_string()),
            Just("c".to_string()),
            Just("d".to_string()),
            Just("e".to_string()),
            Just("'s'".to_string()),
            Just("3".to_string()),
            Just("1.5".to_string()),
            Just("none".to_string()),
            Just("d[0]".to_string()),
            Just("a|upper".to_string()),
            Just("d|length".to_string()),
        ];
        leaf.prop_recursive(4, 32, 3, |inner| {
            let op = prop_oneof![
                4 => Just(" ~ "),
                3 => Just(" + "),
                1 => Just(" * "),
                1 => Just(" - "),
                1 => Just(" == "),
                1 => Just(" != "),
                1 => Just(" < "),
                1 => Just(" and "),
                1 => Just(" or "),
                1 => Just(" in "),
            ];
            prop_oneof![
                8 => (inner.clone(), op, inner.clone()).prop_map(|(l, o, r)| format!("{l}{o}{r}")),
                1 => inner.clone().prop_map(|x| format!("({x})")),
                1 => inner.clone().prop_map(|x| format!("not {x}")),
                1 => inner.clone().prop_map(|x| format!("-{x}")),
                1 => inner.clone().prop_map(|x| format!("{x} is defined")),
                1 => inner.clone().prop_map(|x| format!("[{x}, 1]")),
                1 => inner.clone().prop_map(|x| format!("{x}|string")),
                1 => (inner.clone(), inner.clone(), inner)
                    .prop_map(|(x, y, z)| format!("{x} if {y} else {z}")),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2048))]
        #[test]
        fn the_rewrite_keeps_every_expressions_reading(e in arb_expr()) {
            for src in [format!("{{{{ {e} }}}}"), format!("{{% set v = {e} %}}{{{{ v }}}}"),
                        format!("{{% if {e} %}}T{{% else %}}F{{% endif %}}")] {
                let (rewritten, _) = rewrite_concats(&src);
                // Both fail (messages may differ) or both render the same text.
                prop_assert_eq!(plain(&rewritten).ok(), plain(&src).ok(), "{} -> {}", src, rewritten);
            }
        }
    }

    fn cat(args: &[&str]) -> String {
        format!("{CONCAT}({})", args.join(", "))
    }

    #[test]
    fn certain_chains_become_calls_and_the_rest_is_left() {
        for (src, want, left) in [
            (
                "{{ 'a' ~ b }}".to_string(),
                format!("{{{{ {} }}}}", cat(&["'a'", "b"])),
                false,
            ),
            (
                "{{- 'x' ~ a.b[0](1)|trim ~ (c + 1) * 2 -}}".to_string(),
                format!(
                    "{{{{- {} -}}}}",
                    cat(&["'x'", "a.b[0](1)|trim", "(c + 1) * 2"])
                ),
                false,
            ),
            (
                "{% set s = s[:n] + 'T ' ~ (s|length|string) ~ ' chars' %}".to_string(),
                format!(
                    "{{% set s = s[:n] + {} %}}",
                    cat(&["'T '", "(s|length|string)", "' chars'"])
                ),
                false,
            ),
            (
                "{% if a ~ b == c and not d ~ e %}".to_string(),
                format!(
                    "{{% if {} == c and not {} %}}",
                    cat(&["a", "b"]),
                    cat(&["d", "e"])
                ),
                false,
            ),
            (
                "{{ raise_exception('bad: ' ~ role) }}".to_string(),
                format!("{{{{ raise_exception({}) }}}}", cat(&["'bad: '", "role"])),
                false,
            ),
            (
                "{{ f(x, 'k' ~ (y ~ z), w='a' ~ 1.5e-5) }}".to_string(),
                format!(
                    "{{{{ f(x, {}, w={}) }}}}",
                    cat(&["'k'", &format!("({})", cat(&["y", "z"]))]),
                    cat(&["'a'", "1.5e-5"])
                ),
                false,
            ),
            (
                "{{ -a ~ b * -2 }}".to_string(),
                format!("{{{{ {} }}}}", cat(&["-a", "b * -2"])),
                false,
            ),
            (
                "{{ x + a ~ b|length - -c ~ d }}".to_string(),
                format!(
                    "{{{{ x + {} - {} }}}}",
                    cat(&["a", "b|length"]),
                    cat(&["-c", "d"])
                ),
                false,
            ),
            (
                "{{ a ~ b.c is defined }}".to_string(),
                "{{ a ~ b.c is defined }}".to_string(),
                true,
            ),
            (
                "{{ a ~ b c }}".to_string(),
                "{{ a ~ b c }}".to_string(),
                true,
            ),
            ("{{ a.~b }}".to_string(), "{{ a.~b }}".to_string(), true),
            (
                "{{ a ~ b is string }}".to_string(),
                "{{ a ~ b is string }}".to_string(),
                true,
            ),
            (
                "{{ 'a' 'b' ~ c }}".to_string(),
                "{{ 'a' 'b' ~ c }}".to_string(),
                true,
            ),
            (
                "{{ '~' }}{# a ~ b #}".to_string(),
                "{{ '~' }}{# a ~ b #}".to_string(),
                false,
            ),
        ] {
            let (got, l) = rewrite_concats(&src);
            assert_eq!(got, want, "{src}");
            assert_eq!(l, left, "{src}");
        }
    }
}
