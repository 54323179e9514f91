//! How a chat template turns values into text and answers tests, filters and operators,
//! against the engines' own environment (transformers' `_compile_jinja_template`, Jinja 3.1.6,
//! contexts parsed by `json.loads`): floats Python spells in exponent form, strings inside
//! containers (`repr` escapes every non-printable character), tuples, undefined values, the
//! string filters, `join`, `~`, every test, filter and operator of a list over every kind of
//! JSON value, integer literals beyond 64 bits and `-0` (exact ints to `json.loads`),
//! template sources with Windows line breaks, raw blocks and string-literal escapes, and
//! Python's string methods and
//! Jinja's string filters over tricky text.
//! Ground truth: `testdata/vectors/jinja-values/python-values-v1.json`
//! (`scripts/gen_jinja_value_vectors.py`).
//!
//! The invariant: where the engine renders, kvexact renders the same text or refuses (fails
//! the render); never other text. Where the engine raises, the request fails at the engine
//! whatever kvexact computes for it. The counts of each outcome are pinned, so a change in
//! either direction shows here.

use kvtemplate::{ChatTemplate, ClockPolicy, DEFAULT_FUEL};

const VECTORS: &str = include_str!("../../testdata/vectors/jinja-values/python-values-v1.json");

#[test]
fn values_print_and_behave_as_in_the_engines_python_or_are_refused() {
    let v: serde_json::Value = serde_json::from_str(VECTORS).unwrap();
    let (mut equal, mut both_raise) = (0, 0);
    let mut refused = Vec::new();
    let mut engine_raises = Vec::new();
    let mut wrong = Vec::new();
    for case in v["cases"].as_array().unwrap() {
        let name = case["context"].as_str().unwrap();
        let ctx_text = v["contexts"][name].as_str().unwrap();
        let ctx = kvtemplate::json::parse(ctx_text.as_bytes())
            .unwrap()
            .to_value();
        let template = case["template"].as_str().unwrap();
        let got = ChatTemplate::compile(template, Some(ClockPolicy::UtcDate), Some(DEFAULT_FUEL))
            .map_err(|e| e.to_string())
            .and_then(|t| t.render(&ctx, Some(0)).map_err(|e| e.message()));
        let line = format!("[{name}] {template}");
        match (got, case["rendered"].as_str()) {
            (Ok(g), Some(w)) if g == w => equal += 1,
            (Ok(g), Some(w)) => wrong.push(format!("{line}\n  engine:  {w:?}\n  kvexact: {g:?}")),
            (Err(_), Some(_)) => refused.push(line),
            (Ok(_), None) => engine_raises.push(line),
            (Err(_), None) => both_raise += 1,
        }
    }
    assert!(
        wrong.is_empty(),
        "{} cases render other text than the engine:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
    // Refused where the engine renders: `format`'s float conversions (`%f`; `%s`, `%r`, `%d`
    // are Python's: `pyformat.rs`; `~` joins Python's `str()`: `template_concat.rs`);
    // arithmetic past 128 bits; Python conversions minijinja does not make (`int`/`float` of a
    // string or container, `abs`/`round` of a boolean, `select`/`map` over `false` or `0`);
    // filters and tests minijinja lacks (`wordcount`, `center`, `truncate`, `callable`);
    // `attr` of a Python method (`attr('items')`: a bound method prints its address);
    // `str.title()` lowercasing a capital sigma (its final form depends on its neighbours);
    // a `\N{name}` escape in a string literal (Unicode's name table); `pprint` of a
    // container (pformat sorts and wraps).
    assert_eq!(refused.len(), 100, "refused:\n{}", refused.join("\n"));
    // The engine raises and kvexact renders (the request fails at the engine): minijinja
    // lists, joins, sorts and slices `none` as empty (a `for` loop over it raises, as
    // Jinja's), orders mixed types, has a `bool` filter, `indent`s
    // any value, tests `odd`/`even` of any value, `tojson`s an undefined value as `null`.
    assert_eq!(
        engine_raises.len(),
        70,
        "rendered where the engine raises:\n{}",
        engine_raises.join("\n")
    );
    assert_eq!((equal, both_raise), (2487, 237));
}
