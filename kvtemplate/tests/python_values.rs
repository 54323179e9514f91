//! How values become text in a chat template, against the engines' own environment
//! (transformers' `_compile_jinja_template`, Jinja 3.1.6, `json.loads` contexts): floats Python
//! spells in exponent form, strings inside containers (`repr` escapes every non-printable
//! character), tuples, undefined values, the string filters, `join`, `~`.
//! Ground truth: `testdata/vectors/jinja-values/python-values-v1.json`
//! (`scripts/gen_jinja_value_vectors.py`).

use kvtemplate::{ChatTemplate, ClockPolicy, DEFAULT_FUEL};

const VECTORS: &str = include_str!("../../testdata/vectors/jinja-values/python-values-v1.json");

/// The cases kvexact refuses instead of rendering: a template that may print a float through a
/// path minijinja formats (`~`, `replace`, `format`), over a context holding a float Python
/// spells in exponent form. Refusing them is exact-or-refused; rendering them would not be.
fn refused(context: &str, template: &str) -> bool {
    context == "numbers"
        && (template.contains(" ~ ")
            || template.contains("|replace(")
            || template.contains("|format"))
}

#[test]
fn values_print_as_the_engines_python_prints_them() {
    let v: serde_json::Value = serde_json::from_str(VECTORS).unwrap();
    let (mut same, mut refusals) = (0, 0);
    let mut wrong = Vec::new();
    for case in v["cases"].as_array().unwrap() {
        let name = case["context"].as_str().unwrap();
        let ctx_text = v["contexts"][name].as_str().unwrap();
        let ctx = kvtemplate::json::parse(ctx_text.as_bytes())
            .unwrap()
            .to_value();
        let template = case["template"].as_str().unwrap();
        let t = ChatTemplate::compile(template, Some(ClockPolicy::UtcDate), Some(DEFAULT_FUEL))
            .unwrap();
        let got = t.render(&ctx, Some(0));
        let want = case["rendered"].as_str();
        match (&got, want) {
            (Ok(g), Some(w)) if g == w && !refused(name, template) => same += 1,
            (Err(_), _) if refused(name, template) => refusals += 1,
            (Err(_), None) => same += 1,
            _ => wrong.push(format!(
                "[{name}] {template}\n  engine: {want:?}\n  kvexact: {got:?}"
            )),
        }
    }
    assert!(
        wrong.is_empty(),
        "{} cases differ:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
    assert_eq!((same, refusals), (68, 5), "cases rendered equal / refused");
}
