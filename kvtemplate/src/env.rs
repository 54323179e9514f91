//! The Jinja environment transformers renders chat templates in, rebuilt on minijinja
//! (spec/templates.md §2 and §5).

use crate::pyjson::{self, DumpOptions};
use crate::pystr;
use crate::strftime::{strftime, UtcTime};
use minijinja::value::{Kwargs, Value, ValueKind};
use minijinja::{Environment, ErrorKind, State};
use std::cell::Cell;

/// The name the template is registered under (no `.html`/`.xml`: autoescape stays off).
const TEMPLATE_NAME: &str = "chat_template";

/// Default execution budget (minijinja fuel) for one render.
pub const DEFAULT_FUEL: u64 = 50_000_000;

/// How `strftime_now` behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ClockPolicy {
    /// No clock: `strftime_now` is not defined (calling it fails the render).
    #[default]
    None,
    /// `utc-date`: `strftime_now(fmt)` formats the caller's "now" in UTC.
    UtcDate,
}

/// Why a render failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RenderFailure {
    /// The template called `raise_exception(msg)`.
    Raised(String),
    /// Any other template error on this input (type error, unknown method, …).
    Failed(String),
    /// The execution budget ran out.
    Budget,
}

impl RenderFailure {
    /// The message, in the form transformers reports it.
    pub fn message(&self) -> String {
        match self {
            RenderFailure::Raised(m) => format!("TemplateError: {m}"),
            RenderFailure::Failed(m) => m.clone(),
            RenderFailure::Budget => "template exceeded its execution budget".to_string(),
        }
    }
}

#[derive(Debug)]
struct Raised(String);

impl std::fmt::Display for Raised {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Raised {}

thread_local! {
    static NOW_MS: Cell<Option<i64>> = const { Cell::new(None) };
}

/// A compiled chat template in an HF-equivalent environment. `Send + Sync`; compile once,
/// render from many threads.
#[derive(Debug)]
pub struct ChatTemplate {
    env: Environment<'static>,
    source: String,
}

impl ChatTemplate {
    /// Compiles `source` with trim_blocks, lstrip_blocks, loop controls, Python string methods,
    /// a Python `tojson`/`trim`, `raise_exception`, and `strftime_now` under `utc-date`.
    pub fn compile(source: &str, clock: ClockPolicy, fuel: Option<u64>) -> Result<Self, String> {
        let mut env = Environment::new();
        let syntax = minijinja::syntax::SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .keep_trailing_newline(false)
            .build()
            .map_err(|e| e.to_string())?;
        env.set_syntax(syntax);
        env.set_fuel(fuel);
        env.set_unknown_method_callback(unknown_method);
        env.add_filter("tojson", tojson);
        env.add_filter("trim", trim);
        env.add_function("raise_exception", raise_exception);
        if clock == ClockPolicy::UtcDate {
            env.add_function("strftime_now", strftime_now);
        }
        env.add_template_owned(TEMPLATE_NAME, source.to_string())
            .map_err(|e| e.to_string())?;
        Ok(ChatTemplate {
            env,
            source: source.to_string(),
        })
    }

    /// The template source.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Renders `ctx` into `out` (cleared first). `now_unix_ms` feeds `strftime_now`.
    pub fn render_into(
        &self,
        ctx: &Value,
        now_unix_ms: Option<i64>,
        out: &mut String,
    ) -> Result<(), RenderFailure> {
        out.clear();
        let tmpl = self
            .env
            .get_template(TEMPLATE_NAME)
            .map_err(|e| RenderFailure::Failed(e.to_string()))?;
        NOW_MS.with(|c| c.set(now_unix_ms));
        let res = tmpl.render(ctx.clone());
        NOW_MS.with(|c| c.set(None));
        match res {
            Ok(s) => {
                *out = s;
                Ok(())
            }
            Err(e) => Err(classify(&e)),
        }
    }

    /// Renders `ctx` to a new string.
    pub fn render(&self, ctx: &Value, now_unix_ms: Option<i64>) -> Result<String, RenderFailure> {
        let mut out = String::new();
        self.render_into(ctx, now_unix_ms, &mut out)?;
        Ok(out)
    }
}

fn classify(e: &minijinja::Error) -> RenderFailure {
    if e.kind() == ErrorKind::OutOfFuel {
        return RenderFailure::Budget;
    }
    let mut src: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    while let Some(s) = src {
        if let Some(r) = s.downcast_ref::<Raised>() {
            return RenderFailure::Raised(r.0.clone());
        }
        if let Some(inner) = s.downcast_ref::<minijinja::Error>() {
            if inner.kind() == ErrorKind::OutOfFuel {
                return RenderFailure::Budget;
            }
        }
        src = s.source();
    }
    RenderFailure::Failed(e.to_string())
}

fn raise_exception(msg: String) -> Result<Value, minijinja::Error> {
    Err(minijinja::Error::new(ErrorKind::InvalidOperation, msg.clone()).with_source(Raised(msg)))
}

fn strftime_now(fmt: &str) -> Result<Value, minijinja::Error> {
    let now = NOW_MS.with(Cell::get).ok_or_else(|| {
        minijinja::Error::new(
            ErrorKind::InvalidOperation,
            "strftime_now: no clock for this render",
        )
    })?;
    Ok(Value::from(strftime(&UtcTime::from_unix_ms(now), fmt)))
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

fn trim(s: &str, chars: Option<&str>) -> String {
    pystr::strip_chars(s, chars, true, true).to_string()
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
            _ => {}
        }
    }
    minijinja_contrib::pycompat::unknown_method_callback(state, value, method, args)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(src: &str, ctx: Value) -> Result<String, RenderFailure> {
        let t = ChatTemplate::compile(src, ClockPolicy::UtcDate, Some(DEFAULT_FUEL))
            .map_err(RenderFailure::Failed)?;
        t.render(&ctx, Some(1_721_997_296_000))
    }

    #[test]
    fn trim_and_lstrip_blocks_like_hf() {
        let src = "A\n  {% if true %}\nB\n  {% endif %}\nC\n";
        // jinja2 with trim_blocks + lstrip_blocks, keep_trailing_newline=False.
        assert_eq!(
            render(src, Value::from(())).ok().as_deref(),
            Some("A\nB\nC")
        );
    }

    #[test]
    fn raise_exception_is_typed() {
        let got = render("{{ raise_exception('nope') }}", Value::from(()));
        assert_eq!(got, Err(RenderFailure::Raised("nope".into())));
    }

    #[test]
    fn python_strip_trim_and_split() {
        let ctx = crate::json::map_value([("s", Value::from("\u{1c} hi \u{3000}"))]);
        assert_eq!(
            render("[{{ s|trim }}|{{ s.strip() }}|{{ 'a</think>b'.split('</think>')[-1] }}|{{ 'xxyxx'.lstrip('x') }}]", ctx).ok().as_deref(),
            Some("[hi|hi|b|yxx]")
        );
    }

    #[test]
    fn tojson_is_python_json_dumps() {
        let ctx = crate::json::map_value([(
            "d",
            crate::json::map_value([("k", Value::from("<&'é>")), ("f", Value::from(1e21))]),
        )]);
        assert_eq!(
            render("{{ d|tojson }}|{{ d|tojson(indent=2) }}", ctx)
                .ok()
                .as_deref(),
            Some("{\"k\": \"<&'é>\", \"f\": 1e+21}|{\n  \"k\": \"<&'é>\",\n  \"f\": 1e+21\n}")
        );
    }

    #[test]
    fn strftime_now_uses_callers_clock() {
        assert_eq!(
            render("{{ strftime_now('%d %b %Y') }}", Value::from(()))
                .ok()
                .as_deref(),
            Some("26 Jul 2024")
        );
        let t = ChatTemplate::compile("{{ strftime_now('%Y') }}", ClockPolicy::None, None);
        let failed = t.map(|t| t.render(&Value::from(()), Some(0)));
        assert!(matches!(failed, Ok(Err(RenderFailure::Failed(_)))));
    }

    #[test]
    fn fuel_stops_runaway_templates() {
        let t = ChatTemplate::compile(
            "{% for i in range(10000) %}{% for j in range(10000) %}x{% endfor %}{% endfor %}",
            ClockPolicy::None,
            Some(10_000),
        );
        let got = t.map(|t| t.render(&Value::from(()), None));
        assert!(matches!(got, Ok(Err(RenderFailure::Budget))), "{got:?}");
    }

    #[test]
    fn loop_controls() {
        assert_eq!(
            render("{% for i in range(5) %}{% if i == 1 %}{% continue %}{% endif %}{% if i == 3 %}{% break %}{% endif %}{{ i }}{% endfor %}", Value::from(())).ok().as_deref(),
            Some("02")
        );
    }
}
