//! Arbitrary chat-template sources through kvexact's source rewrites (`{% generation %}`
//! blocks, `for` loops, `~` chains) and compiler: never panics; whatever minijinja itself
//! compiles still compiles after the rewrites; a compiled template renders a small context
//! within its budget without panicking.
#![no_main]

use kvtemplate::{ChatTemplate, ClockPolicy};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(source) = std::str::from_utf8(data) else {
        return;
    };
    let mut plain = minijinja::Environment::new();
    let syntax = minijinja::syntax::SyntaxConfig::builder()
        .trim_blocks(true)
        .lstrip_blocks(true)
        .build()
        .expect("syntax");
    plain.set_syntax(syntax);
    let plain_ok = plain.add_template("t", source).is_ok();
    let ours = ChatTemplate::compile(source, Some(ClockPolicy::UtcDate), Some(20_000));
    // `{% generation %}` is a tag only kvexact knows; a string literal Python reads
    // otherwise than kvexact can write (`\N{…}`, a code point past U+10FFFF, a surrogate) is
    // refused by kvexact where minijinja alone keeps its escape as written.
    if plain_ok && !source.contains("generation") {
        let refused_literal = ours
            .as_ref()
            .err()
            .is_some_and(|e| e.contains("a string literal"));
        assert!(
            ours.is_ok() || refused_literal,
            "{source:?}: {:?}",
            ours.err()
        );
    }
    if let Ok(t) = ours {
        let ctx = kvtemplate::json::parse(
            br#"{"messages": [{"role": "user", "content": "hi \u00a0 1e-05"}], "x": 1e-05,
                "s": "abc", "l": [1, "a"], "d": {"k": 0.5}, "n": null, "add_generation_prompt": true}"#,
        )
        .expect("context")
        .to_value();
        let _ = t.with_max_output(1 << 16).render(&ctx, Some(0));
    }
});
