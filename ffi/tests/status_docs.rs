//! The statuses each encode-path call documents in `include/kvexact.h` are the statuses its
//! code returns, no more and no fewer, table-driven (`CALLS`).
//!
//! For each call the table lists every status it returns, each with a witness (a call that
//! returns it, run here) or the reason none is built here; the test checks that the header's
//! doc comment of the call names exactly those statuses (`KVEXACT_OK` and `KVEXACT_ERR_*`
//! tokens), and that the statuses of kvtemplate's error classes the call maps
//! (`template_failure`: every `kvtemplate::Error` variant, matched exhaustively below, so a
//! new variant fails to compile here) are in its list or excluded with a reason.
//! `KVEXACT_ERR_PANIC` (a caught bug, stated once for every call in the header's prologue) is
//! left out.

use std::collections::BTreeSet;
use std::ffi::CString;
use std::ptr::{null, null_mut};

use kvexact::encoder::*;
use kvexact::refusal::*;
use kvexact::status::*;

use crate::route_common::{encoder, profile, EncOpts, NOW, QWEN3};

/// A status a call returns, and a witness producing it (or the reason there is none here).
struct Returns {
    status: i32,
    witness: Witness,
}

enum Witness {
    /// Runs the call; the status it returned.
    Call(fn() -> i32),
    /// Why no witness is built here (a status the sample registry cannot provoke).
    Reason(&'static str),
}

/// One call: its name, what it returns, and the error classes it maps that it never meets.
struct Call {
    name: &'static str,
    returns: &'static [Returns],
    /// Statuses of kvtemplate error classes the call cannot meet, each with the reason.
    never: &'static [(i32, &'static str)],
}

const COMPLETIONS_NEVER: &[(i32, &str)] = &[(
    KVEXACT_ERR_RENDERER,
    "completions never compile or render a template (TemplateCompile is raised when the encoder is built)",
)];

fn qwen3() -> *mut kvexact_encoder {
    encoder(
        QWEN3,
        "vllm-kv-map-v2",
        &EncOpts {
            version: None,
            lifted: 0,
            cache: None,
        },
    )
}

/// `kvexact_encode_completions_with_refusal` on `text` with the Qwen3 encoder.
fn completions_r(text: &[u8]) -> (i32, kvexact_refusal) {
    let enc = qwen3();
    let mut ids = [0u32; 64];
    let mut r = KVEXACT_REFUSAL_TEMPLATE_RAISED;
    let st = unsafe {
        kvexact_encode_completions_with_refusal(
            enc,
            text.as_ptr(),
            text.len(),
            ids.as_mut_ptr(),
            64,
            &mut r,
        )
    };
    unsafe { kvexact_encoder_free(enc) };
    (st, r)
}

fn completions(text: &[u8]) -> i32 {
    let enc = qwen3();
    let mut ids = [0u32; 64];
    let st =
        unsafe { kvexact_encode_completions(enc, text.as_ptr(), text.len(), ids.as_mut_ptr(), 64) };
    unsafe { kvexact_encoder_free(enc) };
    st
}

fn chat(body: &[u8]) -> i32 {
    let enc = qwen3();
    let mut ids = [0u32; 64];
    let mut r = 0;
    let st = unsafe {
        kvexact_encode_chat(
            enc,
            body.as_ptr(),
            body.len(),
            NOW,
            ids.as_mut_ptr(),
            64,
            &mut r,
        )
    };
    unsafe { kvexact_encoder_free(enc) };
    st
}

fn render(body: &[u8], cap: usize) -> i32 {
    let enc = qwen3();
    let mut buf = vec![0u8; cap];
    let (mut len, mut r) = (0usize, 0);
    let st = unsafe {
        kvexact_render_chat(
            enc,
            body.as_ptr(),
            body.len(),
            NOW,
            buf.as_mut_ptr(),
            cap,
            &mut len,
            &mut r,
        )
    };
    unsafe { kvexact_encoder_free(enc) };
    st
}

const HELLO: &[u8] = br#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#;
const TOOLS: &[u8] = br#"{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":{}}}]}"#;

const NO_TOKENIZER: &str = "an encoder without a tokenizer or a tokenizer failing at run time: the sample registry's profiles all load one that encodes every text";
const NO_PROFILE: &str = "an encoder whose engine has no chat path is refused when built; kvtemplate's Spec/ModelDir/NoChatPath classes at request time are not provoked by the sample registry";

const COMPLETIONS_RETURNS: &[Returns] = &[
    Returns {
        status: KVEXACT_ERR_REQUEST,
        witness: Witness::Call(|| completions(b"")),
    },
    Returns {
        status: KVEXACT_ERR_UNSUPPORTED,
        witness: Witness::Call(|| completions(b"a\0b")),
    },
    Returns {
        status: KVEXACT_ERR_TOKENIZER,
        witness: Witness::Reason(NO_TOKENIZER),
    },
    Returns {
        status: KVEXACT_ERR_PROFILE,
        witness: Witness::Reason(NO_PROFILE),
    },
    Returns {
        status: KVEXACT_ERR_NULL_ARGUMENT,
        witness: Witness::Call(|| unsafe {
            kvexact_encode_completions(null(), b"a".as_ptr(), 1, [0u32; 4].as_mut_ptr(), 4)
        }),
    },
];

const COMPLETIONS_R_RETURNS: &[Returns] = &[
    Returns {
        status: KVEXACT_ERR_REQUEST,
        witness: Witness::Call(|| completions_r(b"\xff").0),
    },
    Returns {
        status: KVEXACT_ERR_UNSUPPORTED,
        witness: Witness::Call(|| completions_r(b"a\0b").0),
    },
    Returns {
        status: KVEXACT_ERR_TOKENIZER,
        witness: Witness::Reason(NO_TOKENIZER),
    },
    Returns {
        status: KVEXACT_ERR_PROFILE,
        witness: Witness::Reason(NO_PROFILE),
    },
    Returns {
        status: KVEXACT_ERR_NULL_ARGUMENT,
        witness: Witness::Call(|| unsafe {
            kvexact_encode_completions_with_refusal(
                null(),
                b"a".as_ptr(),
                1,
                [0u32; 4].as_mut_ptr(),
                4,
                null_mut(),
            )
        }),
    },
];

const CHAT_RETURNS: &[Returns] = &[
    Returns {
        status: KVEXACT_ERR_UNSUPPORTED,
        witness: Witness::Call(|| chat(TOOLS)),
    },
    Returns {
        status: KVEXACT_ERR_REQUEST,
        witness: Witness::Reason(
            "the clock out of range or a request the engine answers with HTTP 400 outside the strict scan: Qwen3's template reads no clock",
        ),
    },
    Returns {
        status: KVEXACT_ERR_RENDERER,
        witness: Witness::Reason("an encoder without a template: every sample profile has one"),
    },
    Returns {
        status: KVEXACT_ERR_TOKENIZER,
        witness: Witness::Reason(NO_TOKENIZER),
    },
    Returns {
        status: KVEXACT_ERR_PROFILE,
        witness: Witness::Reason(NO_PROFILE),
    },
    Returns {
        status: KVEXACT_ERR_NULL_ARGUMENT,
        witness: Witness::Call(|| unsafe {
            kvexact_encode_chat(
                null(),
                HELLO.as_ptr(),
                HELLO.len(),
                NOW,
                [0u32; 4].as_mut_ptr(),
                4,
                null_mut(),
            )
        }),
    },
];

const RENDER_RETURNS: &[Returns] = &[
    Returns {
        status: KVEXACT_OK,
        witness: Witness::Call(|| render(HELLO, 4096)),
    },
    Returns {
        status: KVEXACT_ERR_BUFFER_TOO_SMALL,
        witness: Witness::Call(|| render(HELLO, 1)),
    },
    Returns {
        status: KVEXACT_ERR_UNSUPPORTED,
        witness: Witness::Call(|| render(TOOLS, 4096)),
    },
    Returns {
        status: KVEXACT_ERR_REQUEST,
        witness: Witness::Reason("as for kvexact_encode_chat"),
    },
    Returns {
        status: KVEXACT_ERR_RENDERER,
        witness: Witness::Reason("as for kvexact_encode_chat"),
    },
    Returns {
        status: KVEXACT_ERR_TOKENIZER,
        witness: Witness::Reason(NO_TOKENIZER),
    },
    Returns {
        status: KVEXACT_ERR_PROFILE,
        witness: Witness::Reason(NO_PROFILE),
    },
    Returns {
        status: KVEXACT_ERR_NULL_ARGUMENT,
        witness: Witness::Call(|| unsafe {
            kvexact_render_chat(
                null(),
                HELLO.as_ptr(),
                HELLO.len(),
                NOW,
                null_mut(),
                0,
                &mut 0,
                null_mut(),
            )
        }),
    },
];

const CALLS: &[Call] = &[
    Call {
        name: "kvexact_encode_completions",
        returns: COMPLETIONS_RETURNS,
        never: COMPLETIONS_NEVER,
    },
    Call {
        name: "kvexact_encode_completions_with_refusal",
        returns: COMPLETIONS_R_RETURNS,
        never: COMPLETIONS_NEVER,
    },
    Call {
        name: "kvexact_encode_chat",
        returns: CHAT_RETURNS,
        never: &[],
    },
    Call {
        name: "kvexact_render_chat",
        returns: RENDER_RETURNS,
        never: &[],
    },
];

/// The status a `KVEXACT_*` name stands for in the header.
fn status_of(name: &str) -> Option<i32> {
    HEADER_STATUSES.with(|t| t.iter().find(|(_, n)| *n == name).map(|(v, _)| *v))
}

/// The header's constant name for a status value.
fn status_constant(s: i32) -> Option<&'static str> {
    HEADER_STATUSES.with(|t| t.iter().find(|(v, _)| *v == s).map(|(_, n)| *n))
}

thread_local! {
    /// `#define KVEXACT_OK 0`, `#define KVEXACT_ERR_… (-N)` lines of the header.
    static HEADER_STATUSES: Vec<(i32, &'static str)> = {
        let mut out = Vec::new();
        for line in header().lines() {
            let Some(rest) = line.strip_prefix("#define ") else { continue };
            let Some((name, value)) = rest.split_once(' ') else { continue };
            if name != "KVEXACT_OK" && !name.starts_with("KVEXACT_ERR_") {
                continue;
            }
            let v = value.trim().trim_start_matches('(').trim_end_matches(')');
            if let Ok(v) = v.parse::<i32>() {
                out.push((v, &*Box::leak(name.to_string().into_boxed_str())));
            }
        }
        out
    };
}

fn header() -> &'static str {
    static H: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    H.get_or_init(|| {
        let p = crate::route_common::repo().join("include/kvexact.h");
        std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    })
}

/// The doc comment (`/** … */`) right above the declaration of `name` in the header.
fn doc_of(name: &str) -> String {
    let lines: Vec<&str> = header().lines().collect();
    let decl = lines
        .iter()
        .position(|l| {
            !l.starts_with(' ') && !l.starts_with("/*") && l.contains(&format!(" {name}("))
        })
        .unwrap_or_else(|| panic!("{name} is not declared in include/kvexact.h"));
    let end = decl - 1;
    assert_eq!(lines[end].trim(), "*/", "{name} has no doc comment");
    let start = (0..end)
        .rev()
        .find(|&i| lines[i].trim_start().starts_with("/**"))
        .expect("the doc comment opens");
    lines[start..end].join("\n")
}

/// The `KVEXACT_OK` / `KVEXACT_ERR_*` names a text mentions.
fn statuses_named(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = text;
    while let Some(i) = rest.find("KVEXACT_") {
        let tail = &rest[i..];
        let end = tail
            .find(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'))
            .unwrap_or(tail.len());
        let word = &tail[..end];
        if word == "KVEXACT_OK" || word.starts_with("KVEXACT_ERR_") {
            out.insert(word.to_string());
        }
        rest = &tail[end..];
    }
    out
}

/// The status of every kvtemplate error variant's class, matched without a wildcard: a new
/// variant fails to compile here until it is placed.
fn template_error_statuses() -> BTreeSet<i32> {
    use kvtemplate::Error as E;
    let hit = kvtemplate::LimitHit::check(
        kvtemplate::Limit::RenderedBytes,
        &kvtemplate::InputLimits::default(),
        usize::MAX,
    )
    .expect("usize::MAX bytes are over the bound");
    let all = [
        E::TemplateCompile(String::new()),
        E::TokenizerLoad(String::new()),
        E::Tokenize(String::new()),
        E::ModelDir {
            path: String::new(),
            reason: String::new(),
        },
        E::Spec(String::new()),
        E::EngineRequest(String::new()),
        E::TemplateRender(String::new()),
        E::RenderBudget,
        E::Request(String::new()),
        E::InputTooLarge(hit),
        E::NoChatPath(kvtemplate::Engine::Vllm),
        E::Unsupported(String::new()),
        E::Clock(0),
    ];
    for e in &all {
        match e {
            E::TemplateCompile(_)
            | E::TokenizerLoad(_)
            | E::Tokenize(_)
            | E::ModelDir { .. }
            | E::Spec(_)
            | E::EngineRequest(_)
            | E::TemplateRender(_)
            | E::RenderBudget
            | E::Request(_)
            | E::InputTooLarge(_)
            | E::NoChatPath(_)
            | E::Unsupported(_)
            | E::Clock(_) => {}
        }
    }
    all.iter().map(|e| e.class().code()).collect()
}

#[test]
fn each_encode_call_documents_exactly_the_statuses_it_returns() {
    let classes = template_error_statuses();
    let mut failures = Vec::new();
    for call in CALLS {
        let listed: BTreeSet<i32> = call.returns.iter().map(|r| r.status).collect();
        let names: BTreeSet<String> = listed
            .iter()
            .map(|&s| status_constant(s).unwrap_or("?").to_string())
            .collect();
        let documented = statuses_named(&doc_of(call.name));
        if documented != names {
            failures.push(format!(
                "{}: the header documents {documented:?}, the code returns {names:?}",
                call.name
            ));
        }
        for &c in &classes {
            let never = call.never.iter().any(|(s, _)| *s == c);
            if !listed.contains(&c) && !never {
                failures.push(format!(
                    "{}: kvtemplate's error class {c} ({:?}) is neither listed nor excluded",
                    call.name,
                    status_constant(c)
                ));
            }
        }
        for r in call.returns {
            match r.witness {
                Witness::Call(f) => {
                    let got = f();
                    let ok = got == r.status || (r.status == KVEXACT_OK && got >= 0);
                    if !ok {
                        failures.push(format!(
                            "{}: the witness of {:?} returned {got}",
                            call.name,
                            status_constant(r.status)
                        ));
                    }
                }
                Witness::Reason(why) => assert!(!why.is_empty()),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The typed completions call writes the refusal: NUL byte, input over a bound, none on
/// success or on a request error.
#[test]
fn the_completions_call_types_its_refusal() {
    assert_eq!(
        completions_r(b"a\0b"),
        (KVEXACT_ERR_UNSUPPORTED, KVEXACT_REFUSAL_NUL_BYTE)
    );
    assert_eq!(completions_r(b"").1, KVEXACT_REFUSAL_NONE);
    let (n, r) = completions_r(b"hello");
    assert!(n > 0 && r == KVEXACT_REFUSAL_NONE, "{n} {r}");
    assert_eq!(n, completions(b"hello"));
    // Over max_rendered_bytes.
    let contract = CString::new("vllm-kv-map-v2").unwrap();
    let opts = kvexact_encoder_options {
        struct_size: std::mem::size_of::<kvexact_encoder_options>() as u32,
        lifted: 0,
        engine_version: null(),
        segment_cache_bytes: 0,
        flags: kvexact::enums::KVEXACT_OPTION_NO_CACHE,
        reserved: 0,
        max_body_bytes: 0,
        max_rendered_bytes: 4,
        max_word_bytes: 0,
        max_fallback_bytes: 0,
        max_messages: 0,
        reserved2: 0,
    };
    let (mut enc, mut err) = (null_mut(), null_mut());
    let st = unsafe {
        kvexact_encoder_new_with_options(
            profile(QWEN3),
            contract.as_ptr(),
            &opts,
            &mut enc,
            &mut err,
        )
    };
    assert_eq!(st, KVEXACT_OK);
    let text = b"hello world";
    let mut ids = [0u32; 16];
    let mut r = 0;
    let st = unsafe {
        kvexact_encode_completions_with_refusal(
            enc,
            text.as_ptr(),
            text.len(),
            ids.as_mut_ptr(),
            16,
            &mut r,
        )
    };
    unsafe { kvexact_encoder_free(enc) };
    assert_eq!(
        (st, r),
        (KVEXACT_ERR_UNSUPPORTED, KVEXACT_REFUSAL_INPUT_TOO_LARGE)
    );
}

#[test]
fn the_doc_parser_reads_the_header() {
    let doc = doc_of("kvexact_encode_chat");
    assert!(doc.contains("The gateway's chat call"), "{doc}");
    assert_eq!(
        status_of("KVEXACT_ERR_UNSUPPORTED"),
        Some(KVEXACT_ERR_UNSUPPORTED)
    );
    assert_eq!(
        statuses_named("`KVEXACT_ERR_REQUEST` (x), KVEXACT_REFUSAL_NONE, KVEXACT_OK."),
        BTreeSet::from(["KVEXACT_ERR_REQUEST".to_string(), "KVEXACT_OK".to_string()])
    );
}
