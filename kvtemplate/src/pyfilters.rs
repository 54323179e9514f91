//! The filters, tests, formatter and method callback with which minijinja behaves as Jinja
//! does under Python in transformers' environment (docs/contracts/templates.md §5): Python's
//! `json.dumps` for `tojson`, Python's `str()` for what a template prints and what the string
//! filters start from (`pyrepr.rs`), markupsafe's `escape`, Python whitespace for `trim` and
//! `strip`, Jinja's `iterable`, `sequence`, `lower`, `upper` tests and `attr` filter, and
//! Python's string methods.

use crate::pyjson::{self, DumpOptions};
use crate::pyrepr;
use crate::pystr;
use minijinja::value::{Kwargs, Rest, Value, ValueKind};
use minijinja::{Environment, ErrorKind, State};
use std::borrow::Cow;

/// Installs every override into `env`.
pub(crate) fn install(env: &mut Environment<'_>) {
    env.set_unknown_method_callback(unknown_method);
    env.set_formatter(python_formatter);
    env.add_function(crate::template_source::LOOP_ITERABLE, loop_iterable);
    env.add_function(crate::template_concat::CONCAT, concat);
    env.add_filter("tojson", tojson);
    env.add_filter("trim", trim);
    env.add_filter("escape", escape);
    env.add_filter("e", escape);
    let builtin_join = Value::from_function(minijinja::filters::join);
    env.add_filter("join", move |state: &mut State, args: Rest<Value>| {
        join(state, args, &builtin_join)
    });
    // The string filters take Python's `str()` of their input, as Jinja's do.
    for (name, builtin) in [
        ("string", Value::from_function(minijinja::filters::string)),
        ("safe", Value::from_function(minijinja::filters::safe)),
        ("upper", Value::from_function(minijinja::filters::upper)),
        ("lower", Value::from_function(minijinja::filters::lower)),
        (
            "capitalize",
            Value::from_function(minijinja::filters::capitalize),
        ),
    ] {
        env.add_filter(name, move |state: &mut State, args: Rest<Value>| {
            python_input(state, args, &builtin)
        });
    }
    env.add_filter("format", crate::pyformat::format);
    env.add_filter("pprint", pprint);
    // Python's `int()` of a float is exact at any size; minijinja's saturates at 128 bits.
    let builtin_int = Value::from_function(minijinja::filters::int);
    env.add_filter("int", move |state: &mut State, args: Rest<Value>| {
        if let Some(f) = args
            .first()
            .filter(|v| v.kind() == ValueKind::Number && !v.is_integer())
            .and_then(|v| f64::try_from(v.clone()).ok())
        {
            if !f.is_finite() || f.abs() >= 2f64.powi(127) {
                return Err(minijinja::Error::new(
                    ErrorKind::InvalidOperation,
                    "int() of a float that is not finite or past 128 bits",
                ));
            }
        }
        builtin_int.call(state, &args)
    });
    // Jinja's `replace` is `str(s).replace(str(old), str(new), count)`.
    let builtin_replace = Value::from_function(minijinja::filters::replace);
    env.add_filter("replace", move |state: &mut State, args: Rest<Value>| {
        python_inputs(state, args, &builtin_replace)
    });
    env.add_filter("title", |v: &Value| -> Result<String, minijinja::Error> {
        Ok(match v.as_str() {
            Some(s) => pystr::jinja_title(s),
            None => pystr::jinja_title(&pyrepr::to_str(v)?),
        })
    });
    env.add_test("iterable", is_iterable);
    env.add_test("sequence", is_sequence);
    env.add_test("lower", |v: &Value| python_str_test(v, pystr::is_lower));
    env.add_test("upper", |v: &Value| python_str_test(v, pystr::is_upper));
    env.add_filter("attr", attr);
}

fn tojson(value: &Value, kwargs: Kwargs) -> Result<Value, minijinja::Error> {
    let mut opts = DumpOptions::default();
    if let Some(ind) = kwargs.get::<Option<Value>>("indent")? {
        opts.indent = match ind.kind() {
            ValueKind::None | ValueKind::Undefined => None,
            ValueKind::String => Some(ind.as_str().unwrap_or("").to_string()),
            _ => {
                let n = i64::try_from(ind)?;
                Some(" ".repeat(usize::try_from(n).unwrap_or(0)))
            }
        };
    }
    if let Some(ea) = kwargs.get::<Option<bool>>("ensure_ascii")? {
        opts.ensure_ascii = ea;
    }
    if let Some(sk) = kwargs.get::<Option<bool>>("sort_keys")? {
        opts.sort_keys = sk;
    }
    if let Some(seps) = kwargs.get::<Option<Value>>("separators")? {
        if !seps.is_none() {
            let parts: Vec<String> = seps
                .try_iter()?
                .map(|v| v.as_str().unwrap_or("").to_string())
                .collect();
            if let [a, b] = parts.as_slice() {
                opts.separators = Some((a.clone(), b.clone()));
            } else {
                return Err(minijinja::Error::new(
                    ErrorKind::InvalidOperation,
                    "tojson: separators must be a pair",
                ));
            }
        }
    }
    kwargs.assert_all_used()?;
    pyjson::dumps(value, &opts).map(Value::from_safe_string)
}

/// Jinja's `trim`: `str(value).strip(chars)`, for any value.
fn trim(v: &Value, chars: Option<&str>) -> Result<String, minijinja::Error> {
    let s = match v.as_str() {
        Some(s) => Cow::Borrowed(s),
        None => Cow::Owned(pyrepr::to_str(v)?),
    };
    Ok(pystr::strip_chars(&s, chars, true, true).to_string())
}

/// Jinja's `escape` (`e`): markupsafe's `escape(str(value))` (`&`, `<`, `>`, `'` as `&#39;`,
/// `"` as `&#34;`), a string already marked safe as it is.
fn escape(v: &Value) -> Result<Value, minijinja::Error> {
    if v.is_safe() {
        return Ok(v.clone());
    }
    let s = match v.as_str() {
        Some(s) => Cow::Borrowed(s),
        None => Cow::Owned(pyrepr::to_str(v)?),
    };
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '\'' => out.push_str("&#39;"),
            '"' => out.push_str("&#34;"),
            c => out.push(c),
        }
    }
    Ok(Value::from_safe_string(out))
}

/// Jinja's `~` over a rewritten chain (`template_concat.rs`): Python's `str()` of every
/// operand, joined (an undefined operand is empty; a container prints as its `repr`, refused
/// where a character's printability differs between the engines' Pythons).
fn concat(args: Rest<Value>) -> Result<Value, minijinja::Error> {
    let mut out = String::new();
    for v in args.iter() {
        pyrepr::write_str(v, &mut out)?;
    }
    Ok(Value::from(out))
}

/// Jinja's `pprint` (`pprint.pformat`): a scalar's `repr()`. Containers (pformat sorts dict
/// keys and wraps at 80 columns) and a string whose `repr()` would not fit one line are
/// refused.
fn pprint(v: &Value) -> Result<Value, minijinja::Error> {
    let fits = matches!(
        v.kind(),
        ValueKind::None
            | ValueKind::Bool
            | ValueKind::Number
            | ValueKind::Undefined
            | ValueKind::String
    );
    let text = if fits {
        pyrepr::to_repr(v)?
    } else {
        String::new()
    };
    if !fits || text.chars().count() > 72 {
        return Err(minijinja::Error::new(
            ErrorKind::InvalidOperation,
            "pprint of a container or a long string (pformat sorts and wraps them)",
        ));
    }
    Ok(Value::from(text))
}

/// What a `for` loop iterates (`template_source::rewrite_for_loops`): a string as the list of
/// its characters (an exact length, so `loop.last`, `loop.length` and `loop.revindex` are
/// Jinja's), `none` refused as Jinja refuses it (`'NoneType' object is not iterable`), any
/// other value as it is.
fn loop_iterable(v: Value) -> Result<Value, minijinja::Error> {
    match v.kind() {
        ValueKind::String => Ok(Value::from(
            v.as_str()
                .unwrap_or_default()
                .chars()
                .map(Value::from)
                .collect::<Vec<Value>>(),
        )),
        ValueKind::None => Err(minijinja::Error::new(
            ErrorKind::InvalidOperation,
            "'NoneType' object is not iterable",
        )),
        _ => Ok(v),
    }
}

/// Prints `{{ … }}` as Python's `str()` where minijinja's display differs
/// ([`pyrepr::str_differs`]: a float Python spells in exponent form, a container holding one
/// or a string `repr()` escapes otherwise); else minijinja's own formatter.
fn python_formatter(
    out: &mut minijinja::Output,
    state: &mut State,
    value: &Value,
) -> Result<(), minijinja::Error> {
    if pyrepr::str_differs(value) {
        let s = pyrepr::to_str(value)?;
        out.write_str(&s)
            .map_err(|e| minijinja::Error::new(ErrorKind::WriteFailure, e.to_string()))
    } else {
        minijinja::escape_formatter(out, state, value)
    }
}

/// Calls a string filter with Python's `str()` of its input in place of the input where
/// minijinja would display it otherwise (Jinja's string filters start from `str(value)`).
fn python_input(
    state: &mut State,
    args: Rest<Value>,
    builtin: &Value,
) -> Result<Value, minijinja::Error> {
    let mut args = args.0;
    if let Some(first) = args.first_mut() {
        if pyrepr::str_differs(first) {
            *first = Value::from(pyrepr::to_str(first)?);
        }
    }
    builtin.call(state, &args)
}

/// A builtin filter called with Python's `str()` of every positional argument that minijinja
/// would display otherwise (keyword arguments pass as they are).
fn python_inputs(
    state: &mut State,
    args: Rest<Value>,
    builtin: &Value,
) -> Result<Value, minijinja::Error> {
    let mut args = args.0;
    for a in args.iter_mut().filter(|a| !a.is_kwargs()) {
        if pyrepr::str_differs(a) {
            *a = Value::from(pyrepr::to_str(a)?);
        }
    }
    builtin.call(state, &args)
}

/// `join` with Python's `str()` of each item (Jinja joins `map(str, items)`). With an
/// `attribute` or keyword arguments, items Python would print otherwise are refused.
fn join(state: &mut State, args: Rest<Value>, builtin: &Value) -> Result<Value, minijinja::Error> {
    let mut args = args.0;
    let differs = args
        .first()
        .and_then(|seq| seq.try_iter().ok())
        .is_some_and(|mut items| items.any(|v| pyrepr::str_differs(&v)));
    if !differs {
        return builtin.call(state, &args);
    }
    if args.len() > 2 || args.last().is_some_and(Value::is_kwargs) {
        return Err(minijinja::Error::new(
            ErrorKind::InvalidOperation,
            "join by attribute over values Python spells otherwise than minijinja",
        ));
    }
    let items = args[0]
        .try_iter()?
        .map(|v| {
            if pyrepr::str_differs(&v) {
                pyrepr::to_str(&v).map(Value::from)
            } else {
                Ok(v)
            }
        })
        .collect::<Result<Vec<_>, _>>()?;
    args[0] = Value::from(items);
    builtin.call(state, &args)
}

/// Jinja's `iterable` test (`iter(value)` succeeds): not for `none`, a number or a boolean
/// (minijinja iterates `none` as empty), yes for an undefined value (Jinja's `Undefined`
/// iterates as empty), a string and a container.
fn is_iterable(v: &Value) -> bool {
    match v.kind() {
        ValueKind::None | ValueKind::Number | ValueKind::Bool => false,
        ValueKind::Undefined => true,
        _ => v.try_iter().is_ok(),
    }
}

/// Jinja's `sequence` test (`len(value)` and `value[…]` work): strings and dicts too, not only
/// lists and tuples.
fn is_sequence(v: &Value) -> bool {
    match v.kind() {
        ValueKind::String | ValueKind::Seq | ValueKind::Map => true,
        _ => minijinja::tests::is_sequence(v),
    }
}

/// A string test (`lower`, `upper`) over Python's `str()` of the value, as Jinja's
/// (`str(value).islower()`): a list or a number is tested by its text.
fn python_str_test(v: &Value, test: fn(&str) -> bool) -> Result<bool, minijinja::Error> {
    match v.as_str() {
        Some(s) => Ok(test(s)),
        None => Ok(test(&pyrepr::to_str(v)?)),
    }
}

/// Attribute names Python's `str`, `list`, `dict`, `int`, `float` and `bool` have (besides
/// the dunder ones): `getattr` gives a bound method or a number there, which kvexact cannot
/// print as Python would.
const PYTHON_ATTRIBUTES: &[&str] = &[
    "append",
    "as_integer_ratio",
    "bit_count",
    "bit_length",
    "capitalize",
    "casefold",
    "center",
    "clear",
    "conjugate",
    "copy",
    "count",
    "denominator",
    "encode",
    "endswith",
    "expandtabs",
    "extend",
    "find",
    "format",
    "format_map",
    "from_bytes",
    "fromhex",
    "fromkeys",
    "get",
    "hex",
    "imag",
    "index",
    "insert",
    "is_integer",
    "isalnum",
    "isalpha",
    "isascii",
    "isdecimal",
    "isdigit",
    "isidentifier",
    "islower",
    "isnumeric",
    "isprintable",
    "isspace",
    "istitle",
    "isupper",
    "items",
    "join",
    "keys",
    "ljust",
    "lower",
    "lstrip",
    "maketrans",
    "numerator",
    "partition",
    "pop",
    "popitem",
    "real",
    "remove",
    "removeprefix",
    "removesuffix",
    "replace",
    "reverse",
    "rfind",
    "rindex",
    "rjust",
    "rpartition",
    "rsplit",
    "rstrip",
    "setdefault",
    "sort",
    "split",
    "splitlines",
    "startswith",
    "strip",
    "swapcase",
    "title",
    "to_bytes",
    "translate",
    "update",
    "upper",
    "values",
    "zfill",
];

/// Jinja's `attr` filter: `getattr(value, name)`, never an item (minijinja's looks items up).
/// On a string, number, boolean, `none`, list or dict — values whose attributes are Python's
/// own — a name they lack gives an undefined value; one they have (a method) is refused.
/// Other objects (a `namespace()`, `loop`) keep minijinja's lookup.
fn attr(v: &Value, name: &str) -> Result<Value, minijinja::Error> {
    let builtin_kind = matches!(
        v.kind(),
        ValueKind::String | ValueKind::Number | ValueKind::Bool | ValueKind::None | ValueKind::Seq
    ) || v.downcast_object_ref::<crate::pyvalue::PyDict>().is_some()
        || v.downcast_object_ref::<indexmap::IndexMap<Value, Value>>()
            .is_some();
    if !builtin_kind {
        return minijinja::filters::attr(v, &Value::from(name));
    }
    if name.starts_with('_') || PYTHON_ATTRIBUTES.contains(&name) {
        return Err(minijinja::Error::new(
            ErrorKind::InvalidOperation,
            format!(
                "attr({name:?}) of a {}: a Python attribute kvexact cannot print",
                v.kind()
            ),
        ));
    }
    Ok(Value::UNDEFINED)
}

fn unknown_method(
    state: &mut State,
    value: &Value,
    method: &str,
    args: &[Value],
) -> Result<Value, minijinja::Error> {
    if let Some(s) = value.as_str() {
        let str_arg = |i: usize| -> Result<Option<&str>, minijinja::Error> {
            match args.get(i) {
                None => Ok(None),
                Some(v) if v.is_none() || v.is_undefined() => Ok(None),
                Some(v) => v.as_str().map(Some).ok_or_else(|| {
                    minijinja::Error::new(ErrorKind::InvalidOperation, "expected a string argument")
                }),
            }
        };
        match method {
            "title" if args.is_empty() => {
                return pystr::title(s).map(Value::from).ok_or_else(|| {
                    minijinja::Error::new(
                        ErrorKind::InvalidOperation,
                        "str.title() lowercasing a capital sigma (final form by context)",
                    )
                });
            }
            "splitlines" => {
                if !args.is_empty() {
                    return Err(minijinja::Error::new(
                        ErrorKind::InvalidOperation,
                        "str.splitlines with arguments",
                    ));
                }
                return Ok(pystr::splitlines(s).into_iter().map(Value::from).collect());
            }
            "islower" if args.is_empty() => return Ok(Value::from(pystr::is_lower(s))),
            "isupper" if args.is_empty() => return Ok(Value::from(pystr::is_upper(s))),
            "strip" | "lstrip" | "rstrip" => {
                let chars = str_arg(0)?;
                let (l, r) = match method {
                    "lstrip" => (true, false),
                    "rstrip" => (false, true),
                    _ => (true, true),
                };
                return Ok(Value::from(pystr::strip_chars(s, chars, l, r)));
            }
            "split" => {
                let sep = str_arg(0)?;
                let maxsplit = match args.get(1) {
                    Some(v) => Some(i64::try_from(v.clone())?),
                    None => None,
                };
                let parts = pystr::split(s, sep, maxsplit).ok_or_else(|| {
                    minijinja::Error::new(
                        ErrorKind::InvalidOperation,
                        "ValueError: empty separator",
                    )
                })?;
                return Ok(parts.into_iter().map(Value::from).collect());
            }
            "format" if args.iter().any(pyrepr::str_differs) => {
                return Err(minijinja::Error::new(
                    ErrorKind::InvalidOperation,
                    "str.format of a value Python spells otherwise than minijinja",
                ));
            }
            _ => {}
        }
    }
    minijinja_contrib::pycompat::unknown_method_callback(state, value, method, args)
}
