//! The fast pre-tokenizer splits exactly as Oniguruma (run by `tokenizers`) does for every
//! Unicode scalar value in several contexts (after itself, a letter, a digit, a space, before
//! a newline). The class tables themselves are checked one scalar at a time against `\p{L}`,
//! `\p{N}` and `\s` by the unit test in `src/classes.rs`.

use crate::common;

use common::{encoder, stock_spans, MODELS};

/// All scalar values, in chunks of text.
fn chunks() -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for cp in 0u32..=0x10FFFF {
        if let Some(c) = char::from_u32(cp) {
            cur.push(c);
            if cur.len() > 60_000 {
                out.push(std::mem::take(&mut cur));
            }
        }
    }
    out.push(cur);
    out
}

/// Qwen2.5 (Qwen2 flavour; Qwen3 and R1 share its pre-tokenizer).
#[test]
fn qwen2_splits_match_oniguruma_for_every_scalar() {
    splits_match_oniguruma_for_every_scalar(0);
}

/// Llama 3.1.
#[test]
fn llama3_splits_match_oniguruma_for_every_scalar() {
    splits_match_oniguruma_for_every_scalar(3);
}

fn splits_match_oniguruma_for_every_scalar(i: usize) {
    let (name, fast) = MODELS[i];
    assert!(fast, "{name}");
    let enc = encoder(i);
    for chunk in chunks() {
        // c "a" c "1" c " " c c "\n": every char next to each class and to itself.
        let mut text = String::new();
        for c in chunk.chars() {
            text.push(c);
            text.push('a');
            text.push(c);
            text.push('1');
            text.push(c);
            text.push(' ');
            text.push(c);
            text.push(c);
            text.push('\n');
        }
        let stock: Vec<(usize, usize)> = match stock_spans(i, &text) {
            Ok(v) => v,
            Err(e) => panic!("{e}"),
        };
        let fast = enc.pre_tokenize_spans(&text).unwrap_or_default();
        if stock != fast {
            let at = stock
                .iter()
                .zip(&fast)
                .position(|(a, b)| a != b)
                .unwrap_or(0);
            let (a, b) = stock[at];
            panic!(
                "{name}: splits differ at {at}: stock {:?} fast {:?}",
                &text[a..b],
                fast.get(at).map(|&(a, b)| &text[a..b])
            );
        }
    }
}
