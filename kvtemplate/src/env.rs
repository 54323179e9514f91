//! The Jinja environment transformers renders chat templates in, rebuilt on minijinja
//! (docs/contracts/templates.md §2 and §5).

use crate::pyrepr;
use crate::strftime::{strftime, UtcTime};
use crate::template_concat::rewrite_concats;
use crate::template_literals::respell_string_literals;
use crate::template_source::{
    keep_newline_after_raw, normalize_newlines, prints_floats_unchecked, rewrite_for_loops,
    rewrite_generation_tags,
};
use kvprofile_core::ClockPolicy;
use minijinja::value::Value;
use minijinja::{Environment, ErrorKind};
use std::cell::Cell;

/// The name the template is registered under (no `.html`/`.xml`: autoescape stays off).
const TEMPLATE_NAME: &str = "chat_template";

/// Default execution budget (minijinja fuel) for one render.
pub const DEFAULT_FUEL: u64 = 50_000_000;

/// Why a render failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RenderFailure {
    /// The template called `raise_exception(msg)`.
    Raised(String),
    /// Any other template error on this input (type error, unknown method, …).
    Failed(String),
    /// The execution budget ran out.
    Budget,
    /// The output went over the template's byte bound
    /// ([`ChatTemplate::with_max_output`]); the render stopped there.
    TooLarge {
        /// The bound.
        max: usize,
        /// Bytes the render had produced when it stopped (over `max`).
        at_least: usize,
    },
}

impl RenderFailure {
    /// The message, in the form transformers reports it.
    pub fn message(&self) -> String {
        match self {
            RenderFailure::Raised(m) => format!("TemplateError: {m}"),
            RenderFailure::Failed(m) => m.clone(),
            RenderFailure::Budget => "template exceeded its execution budget".to_string(),
            RenderFailure::TooLarge { max, at_least } => {
                format!("rendered prompt of at least {at_least} bytes exceeds the {max}-byte bound")
            }
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
    /// `source` as compiled, after kvexact's rewrites.
    compiled: String,
    clock: Option<ClockPolicy>,
    fuel: Option<u64>,
    max_output: usize,
    /// The template may spell a float through a path minijinja formats
    /// ([`prints_floats_unchecked`]): a context holding a float Python spells otherwise is
    /// refused.
    floats_unchecked: bool,
}

/// The render's output, refusing to grow past `max` bytes (the render then stops with a
/// write error, which [`ChatTemplate::render_into`] reports as [`RenderFailure::TooLarge`]).
struct BoundedOutput {
    buf: Vec<u8>,
    max: usize,
    over: Option<usize>,
}

impl std::io::Write for BoundedOutput {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        let total = self.buf.len().saturating_add(b.len());
        if total > self.max {
            self.over = Some(total);
            return Err(std::io::Error::other("rendered prompt over its bound"));
        }
        self.buf.extend_from_slice(b);
        Ok(b.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl ChatTemplate {
    /// Compiles `source` with trim_blocks, lstrip_blocks, loop controls, Jinja's behaviour
    /// under Python where minijinja's differs (`pyfilters.rs`: values printed as Python's
    /// `str()`, Python's `tojson`, `trim`, `escape`, string methods, tests), `raise_exception`,
    /// `strftime_now` under `utc-date`, and transformers' `{% generation %}` block (rewritten
    /// to `{% if true %}` … `{% endif %}` first); every `for` loop iterates a string as a
    /// list of its characters and raises over `none`, as Jinja does
    /// (`template_source::rewrite_for_loops`); `~` joins Python's `str()` of its operands
    /// wherever its reading is certain (`template_concat.rs`); line breaks read as Jinja's
    /// lexer reads them (`\r\n` and `\r` are `\n`; the one after `{% raw %}` kept); string
    /// literals decoded with Python's `unicode_escape` (`template_literals.rs`).
    pub fn compile(
        source: &str,
        clock: Option<ClockPolicy>,
        fuel: Option<u64>,
    ) -> Result<Self, String> {
        let lines = normalize_newlines(source);
        let raw = keep_newline_after_raw(&lines);
        let literals = respell_string_literals(&raw)?;
        let with_blocks = rewrite_generation_tags(&literals);
        let with_loops = rewrite_for_loops(&with_blocks);
        let (compiled, _) = rewrite_concats(&with_loops);
        // What is still unchecked after the rewrites: a `~` chain left as it was, a filter
        // outside the exact ones.
        let floats_unchecked = prints_floats_unchecked(&compiled);
        Self::from_compiled(
            source,
            compiled.into_owned(),
            clock,
            fuel,
            floats_unchecked,
            false,
        )
    }

    /// The environment for `compiled` (a source after kvexact's rewrites); `marks`: with the
    /// render-reuse marker filter (`render_split.rs`).
    fn from_compiled(
        source: &str,
        compiled: String,
        clock: Option<ClockPolicy>,
        fuel: Option<u64>,
        floats_unchecked: bool,
        marks: bool,
    ) -> Result<Self, String> {
        let mut env = Environment::new();
        env.set_syntax(crate::template_source::syntax()?);
        env.set_fuel(fuel);
        crate::pyfilters::install(&mut env);
        env.add_function("raise_exception", raise_exception);
        if clock == Some(ClockPolicy::UtcDate) {
            env.add_function("strftime_now", strftime_now);
        }
        if marks {
            env.add_filter(crate::render_split::MARK_FILTER, |_: Value| {
                crate::render_split::MARK
            });
        }
        env.add_template_owned(TEMPLATE_NAME, compiled.clone())
            .map_err(|e| e.to_string())?;
        Ok(ChatTemplate {
            env,
            source: source.to_string(),
            compiled,
            clock,
            fuel,
            max_output: usize::MAX,
            floats_unchecked,
        })
    }

    /// The source as compiled (after kvexact's rewrites).
    pub(crate) fn compiled_source(&self) -> &str {
        &self.compiled
    }

    /// `split` (this template's compiled source split by `render_split.rs`) compiled in the
    /// same environment, with the marker filter.
    pub(crate) fn split_twin(&self, split: String) -> Result<ChatTemplate, String> {
        Self::from_compiled(
            &self.source,
            split,
            self.clock,
            self.fuel,
            self.floats_unchecked,
            true,
        )
    }

    /// This template with renders bounded to `max` bytes of output: a render that would
    /// produce more stops as soon as it goes over and fails with [`RenderFailure::TooLarge`]
    /// (so a request can never make one render hold more than `max` bytes). Default: no bound.
    #[must_use]
    pub fn with_max_output(mut self, max: usize) -> Self {
        self.max_output = max;
        self
    }

    /// The output bound ([`ChatTemplate::with_max_output`]).
    pub fn max_output(&self) -> usize {
        self.max_output
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
        self.render_into_bounded(ctx, now_unix_ms, out, self.max_output)
    }

    /// [`ChatTemplate::render_into`] bounded to `max` bytes of output.
    pub(crate) fn render_into_bounded(
        &self,
        ctx: &Value,
        now_unix_ms: Option<i64>,
        out: &mut String,
        max: usize,
    ) -> Result<(), RenderFailure> {
        out.clear();
        if self.floats_unchecked && pyrepr::holds_differing_float(ctx) {
            return Err(RenderFailure::Failed(
                "a float Python spells otherwise than minijinja (below 1e-4 or from 1e16 on), \
                 in a template that may print it through `~` or a filter kvexact does not \
                 control"
                    .into(),
            ));
        }
        let tmpl = self
            .env
            .get_template(TEMPLATE_NAME)
            .map_err(|e| RenderFailure::Failed(e.to_string()))?;
        NOW_MS.with(|c| c.set(now_unix_ms));
        let res = if max == usize::MAX {
            tmpl.render(ctx.clone()).map(|s| *out = s)
        } else {
            // Reuse `out`'s allocation as the bounded sink.
            let mut sink = BoundedOutput {
                buf: std::mem::take(out).into_bytes(),
                max,
                over: None,
            };
            let r = tmpl.render_captured_to(ctx.clone(), &mut sink).map(drop);
            if let Some(at_least) = sink.over {
                NOW_MS.with(|c| c.set(None));
                return Err(RenderFailure::TooLarge { max, at_least });
            }
            match String::from_utf8(sink.buf) {
                Ok(s) => *out = s,
                // minijinja writes `str` pieces only: not reachable, but never a panic.
                Err(e) => {
                    NOW_MS.with(|c| c.set(None));
                    return Err(RenderFailure::Failed(format!("render output: {e}")));
                }
            }
            r
        };
        NOW_MS.with(|c| c.set(None));
        res.map_err(|e| classify(&e))
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::borrow::Cow;

    fn render(src: &str, ctx: Value) -> Result<String, RenderFailure> {
        let t = ChatTemplate::compile(src, Some(ClockPolicy::UtcDate), Some(DEFAULT_FUEL))
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
        let t = ChatTemplate::compile("{{ strftime_now('%Y') }}", None, None);
        let failed = t.map(|t| t.render(&Value::from(()), Some(0)));
        assert!(matches!(failed, Ok(Err(RenderFailure::Failed(_)))));
    }

    #[test]
    fn fuel_stops_runaway_templates() {
        let t = ChatTemplate::compile(
            "{% for i in range(10000) %}{% for j in range(10000) %}x{% endfor %}{% endfor %}",
            None,
            Some(10_000),
        );
        let got = t.map(|t| t.render(&Value::from(()), None));
        assert!(matches!(got, Ok(Err(RenderFailure::Budget))), "{got:?}");
    }

    fn render_plain(src: &str) -> Result<String, RenderFailure> {
        let ctx = crate::json::map_value([
            (
                "messages",
                Value::from(vec![
                    crate::json::map_value([
                        ("role", Value::from("user")),
                        ("content", Value::from("hi")),
                    ]),
                    crate::json::map_value([
                        ("role", Value::from("assistant")),
                        ("content", Value::from("yo")),
                    ]),
                ]),
            ),
            ("add_generation_prompt", Value::from(true)),
        ]);
        render(src, ctx)
    }

    /// A SmolLM3-style template: the assistant turn wrapped in `{% generation %}`, with and
    /// without whitespace control, trim_blocks/lstrip_blocks doing the rest.
    const SMOL: &str = "{%- for message in messages -%}\n\
        {%- if message.role == 'assistant' -%}\n\
        {{ '<|im_start|>assistant\\n' }}\n\
        {%- generation -%}\n\
        {{ message.content }}<|im_end|>\n\
        {%- endgeneration -%}\n\
        {% else %}\n\
        <|im_start|>{{ message.role }}\n\
          {% generation %}\n\
        {{ message.content }}<|im_end|>\n\
          {% endgeneration %}\n\
        {% endif %}\n\
        {%- endfor -%}\n\
        {% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}\n";

    #[test]
    fn generation_blocks_render_their_body() {
        let got = render_plain(SMOL);
        assert_eq!(
            got.as_deref().ok(),
            Some("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nyo<|im_end|><|im_start|>assistant\n")
        );
        // Exactly what the same template with `if true` blocks renders (same markers, same
        // places), so trim_blocks/lstrip_blocks/`-` behave identically.
        let as_if = SMOL
            .replace(" endgeneration ", " endif ")
            .replace(" generation ", " if true ");
        assert_eq!(got, render_plain(&as_if));
        assert_eq!(
            rewrite_generation_tags(SMOL),
            as_if.as_str(),
            "only the tags change"
        );
        // trim_blocks + lstrip_blocks around a bare tag, as in trim_and_lstrip_blocks_like_hf.
        let src = "A\n  {% generation %}\nB\n  {% endgeneration %}\nC\n";
        assert_eq!(
            render(src, Value::from(())).ok().as_deref(),
            Some("A\nB\nC")
        );
        // Nested in loops, no spaces inside the tag, `+` markers.
        let src = "{% for i in range(2) %}{%generation%}{{ i }}{%+ endgeneration +%}{% endfor %}";
        assert_eq!(render(src, Value::from(())).ok().as_deref(), Some("01"));
    }

    #[test]
    fn generation_tags_become_if_true_blocks_keeping_their_trim_marks() {
        assert_eq!(
            rewrite_generation_tags("{%- generation -%}{{ x }}{% endgeneration %}"),
            "{%- if true -%}{{ x }}{% endif %}"
        );
        assert_eq!(
            rewrite_generation_tags("{{ '{% generation %}' }}"),
            "{{ '{% generation %}' }}"
        );
    }

    #[test]
    fn generation_text_outside_tags_is_left_alone() {
        let src = concat!(
            "{{ \"{% generation %}\" }}|",
            "{# {% generation %} #}|",
            "{% raw %}{% generation %}{%- endgeneration -%}{% endraw %}|",
            "{%- raw -%} {% endgeneration %} {%- endraw -%}|",
            "{% set s = '{% endgeneration %}' ~ \"%}\" %}{{ s }}|",
            "{{ '\\'}}' }}|generation endgeneration",
        );
        assert!(matches!(rewrite_generation_tags(src), Cow::Borrowed(_)));
        assert_eq!(
            render(src, Value::from(())).ok().as_deref(),
            Some("{% generation %}||{% generation %}{%- endgeneration -%}|{% endgeneration %}|{% endgeneration %}%}|'}}|generation endgeneration")
        );
        // A variable named `generation` and a `set` of it are not the tag.
        let src = "{% set generation = 'g' %}{{ generation }}{% if generation %}!{% endif %}";
        assert!(matches!(rewrite_generation_tags(src), Cow::Borrowed(_)));
        assert_eq!(render(src, Value::from(())).ok().as_deref(), Some("g!"));
        // After a raw block, tags are real again.
        let src = "{% raw %}{% generation %}{% endraw %}{% generation %}x{% endgeneration %}";
        assert_eq!(
            rewrite_generation_tags(src),
            "{% raw %}{% generation %}{% endraw %}{% if true %}x{% endif %}"
        );
        // An unclosed generation block fails to compile, as in jinja2.
        assert!(ChatTemplate::compile("{% generation %}x", None, None).is_err());
    }

    #[test]
    fn loop_controls() {
        assert_eq!(
            render("{% for i in range(5) %}{% if i == 1 %}{% continue %}{% endif %}{% if i == 3 %}{% break %}{% endif %}{{ i }}{% endfor %}", Value::from(())).ok().as_deref(),
            Some("02")
        );
    }
}
