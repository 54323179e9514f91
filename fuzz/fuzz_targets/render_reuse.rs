//! Render once per conversation on arbitrary templates: a template source and a conversation
//! re-sent turn after turn (growing, going back, edited) through a render-only encoder with
//! its render cache on and one without. Never panics; wherever the encoder without a cache
//! renders, the cached one renders the same text, and where it fails the cached one fails
//! alike — except over the execution budget, which bounds the work each does (the cached
//! render does less of it).
#![no_main]

use arbitrary::Arbitrary;
use kvtemplate::{ClockPolicy, Encoder, EncoderSpec, Engine, Error};
use libfuzzer_sys::fuzz_target;
use minijinja::Value;

#[derive(Debug, Arbitrary)]
enum Step {
    Add(u8, String),
    Back(u8),
    Edit(u8, String),
}

#[derive(Debug, Arbitrary)]
struct Input {
    source: String,
    steps: Vec<Step>,
}

fn encoder(source: &str, cache: bool) -> Option<Encoder> {
    let mut spec = EncoderSpec::new(Engine::Vllm);
    spec.template_source = Some(source.to_string());
    spec.fuel = Some(200_000);
    if source.contains("strftime_now") {
        spec.clock_policy = Some(ClockPolicy::UtcDate);
    }
    let mut enc = Encoder::new(spec).ok()?;
    if cache {
        enc.enable_segment_cache(1 << 20);
    }
    Some(enc)
}

fn render(enc: &Encoder, conv: &[(u8, String)]) -> Result<String, Error> {
    let msgs = conv
        .iter()
        .map(|(r, c)| {
            let role = ["system", "user", "assistant", "tool"][usize::from(r % 4)];
            kvtemplate::json::map_value([("role", Value::from(role)), ("content", Value::from(c.as_str()))])
        })
        .collect();
    enc.render_hf(msgs, None, true, false, None, Some(0))
}

fuzz_target!(|input: Input| {
    let (Some(warm), Some(cold)) = (encoder(&input.source, true), encoder(&input.source, false))
    else {
        return;
    };
    let mut conv: Vec<(u8, String)> = Vec::new();
    for step in input.steps.into_iter().take(24) {
        match step {
            Step::Add(r, c) => conv.push((r, c)),
            Step::Back(n) => conv.truncate(usize::from(n) % (conv.len() + 1)),
            Step::Edit(i, c) => {
                let n = conv.len();
                if let Some(m) = conv.get_mut(usize::from(i) % n.max(1)) {
                    m.1 = c;
                }
            }
        }
        let want = render(&cold, &conv);
        let got = render(&warm, &conv);
        match (&want, &got) {
            (Err(Error::RenderBudget), _) => {}
            (Ok(a), Ok(b)) => assert_eq!(a, b, "{:?} {conv:?}", input.source),
            (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "{:?}", input.source),
            _ => panic!("{:?} {conv:?}: {want:?} vs {got:?}", input.source),
        }
    }
});
