//! The hot-path encoder (docs/contracts/gateway-integration.md §6.3): one per profile × engine contract,
//! built once (template compiled, tokenizer loaded) and shared by every worker thread.

use std::ffi::c_char;
use std::sync::Arc;

use kvtemplate::{Encoder, Outcome, Refusal, RefusalSet, ScratchBuf};

use crate::enums::KVEXACT_OPTION_NO_CACHE;
use crate::error::boundary_err;
use crate::error::kvexact_error;
use crate::failure::Failure;
use crate::handle::{
    arc_clone, arc_free, arc_into_raw, arc_ref, in_c_str, in_slice, out_param, out_slice,
    versioned_in, ArcHandle,
};
use crate::panic::boundary;
use crate::refusal::{
    kvexact_refusal, KVEXACT_REFUSAL_INPUT_TOO_LARGE, KVEXACT_REFUSAL_NONE,
    KVEXACT_REFUSAL_TEMPLATE_RAISED,
};
use crate::registry::{kvexact_profile, ProfileView};
use crate::status::{
    kvexact_status, KVEXACT_ERR_BUFFER_TOO_SMALL, KVEXACT_ERR_REQUEST, KVEXACT_ERR_UNSUPPORTED,
    KVEXACT_OK,
};

/// An encoder for one profile on one engine contract (e.g. `"vllm-kv-map-v3"`,
/// `"sglang-kv-rank-v1"`): the compiled chat template and the pinned tokenizer, with the
/// contract's quirks. Opaque, immutable and reference-counted; share one between all worker
/// threads. It keeps its profile and generation alive. Release with `kvexact_encoder_free`.
pub struct kvexact_encoder {
    _private: [u8; 0],
}

/// The Rust value behind a `kvexact_encoder`.
#[derive(Debug)]
pub struct EncoderInner {
    /// The kvtemplate encoder.
    pub encoder: Encoder,
    /// Keeps the profile's generation alive.
    pub profile: Arc<ProfileView>,
    /// The engine contract the encoder was built for (its quirks drive the challenge).
    pub contract_id: String,
    /// The route whose ids chat requests get, for token probes (catalog `chat.probeRoutes`:
    /// the tokenize route for the Jinja template, the chat route for harmony on vLLM
    /// 0.31/0.33); `None` where no route is known to take the chat path.
    pub chat_route: Option<kvprobe::contract::ProbeRoute>,
}

impl ArcHandle for kvexact_encoder {
    type Inner = EncoderInner;
}

/// Default segment-cache capacity of an encoder: 8 MiB.
pub const KVEXACT_SEGMENT_CACHE_DEFAULT_BYTES: u64 = 8_388_608;

/// Largest segment-cache capacity an encoder accepts: 4 GiB.
pub const KVEXACT_SEGMENT_CACHE_MAX_BYTES: u64 = 4_294_967_296;

/// Options of `kvexact_encoder_new_with_options`. Zero-initialise it, set `struct_size` to
/// `sizeof(kvexact_encoder_options)` and the fields you need: every zero field is the default
/// (`kvexact_encoder_new`'s behaviour), and passing NULL instead of the struct means all
/// defaults. The struct only ever grows at its end; a caller built against an older header
/// passes its smaller `struct_size` and gets the defaults for the fields it does not know.
///
/// ```c
/// kvexact_encoder_options o = {0};
/// o.struct_size = sizeof o;
/// o.engine_version = "0.31.0";
/// o.lifted = KVEXACT_REFUSAL_BIT_TOOLS | KVEXACT_REFUSAL_BIT_MESSAGE_FIELD;
/// ```
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct kvexact_encoder_options {
    /// `sizeof(kvexact_encoder_options)` as the caller compiled it (at least this version's
    /// size; a larger one must have all bytes past this version zero).
    pub struct_size: u32,
    /// The strict-rule refusal codes to lift, as a mask of `kvexact_refusal_bit(code)` (the
    /// `KVEXACT_REFUSAL_BIT_*` constants, or `kvexact_refusal_bits_parse`); 0 = none, the
    /// strict rules exactly. A request whose refusal scan hits only lifted codes is rendered
    /// and tokenized as the engine release's own serving path does (tools, tool calls and
    /// results, `chat_template_kwargs`, …); any other hit is still refused with its own
    /// code, in the same scan order. Lifting needs one engine release: `engine_version`, or
    /// a `contract_id` that is a release id (or a contract with a single release). A code
    /// that release's contract does not list as liftable (`chat.liftable` in
    /// `kvexact_contracts_json`) is refused here with `KVEXACT_ERR_LIFT_NOT_ALLOWED`.
    pub lifted: u32,
    /// The engine release, as the engine reports its version (NUL-terminated, e.g. vLLM's
    /// `/version` `"0.31.0"`), resolved within `contract_id` exactly as
    /// `kvexact_hasher_new_for_contract` does (`KVEXACT_ERR_UNKNOWN_ENGINE_VERSION`,
    /// `KVEXACT_ERR_CONTRACT_MISMATCH`); the encoder then has that release's chat rules and
    /// quirks. NULL: the release or contract `contract_id` names (as `kvexact_encoder_new`).
    /// Only read during the call.
    pub engine_version: *const c_char,
    /// Capacity of the encoder's segment cache (token ids of the text between added tokens,
    /// reused across requests: every earlier turn of a conversation is found instead of
    /// re-encoded). 0 = the default, `KVEXACT_SEGMENT_CACHE_DEFAULT_BYTES` (8 MiB); at most
    /// `KVEXACT_SEGMENT_CACHE_MAX_BYTES` (4 GiB). The capacity bounds everything the cache
    /// holds: segment text, 4 bytes per id and 128 bytes of bookkeeping per segment. A quarter
    /// of it goes to the encoder's render cache when the chat template is proven to allow one
    /// (recent renders' per-message output: a conversation's next turn renders only its new
    /// messages; bounded by the messages' text and the output held), and half of the rest to
    /// its prompt cache (recent prompts' ids: a conversation's next prompt takes over the
    /// previous one's up to a cut proven safe and only the rest is encoded), bounded the same
    /// way (text, 4 bytes per id, 16 per cut, 128 per prompt).
    pub segment_cache_bytes: u64,
    /// `KVEXACT_OPTION_NO_CACHE`: no segment, prompt or render cache
    /// (`segment_cache_bytes` must then be 0).
    /// Other bits are `KVEXACT_ERR_INVALID_ARGUMENT`.
    pub flags: u32,
    /// Must be 0.
    pub reserved: u32,
    /// Largest request body accepted, in bytes, checked before it is parsed (over it:
    /// `KVEXACT_REFUSAL_INPUT_TOO_LARGE`, the error message naming the bound). 0 = the
    /// default, `KVEXACT_DEFAULT_MAX_BODY_BYTES` (8 MiB); `UINT64_MAX` = no bound.
    pub max_body_bytes: u64,
    /// Largest text handed to the tokenizer, in bytes: the rendered chat prompt (the render
    /// stops once over) and a completions prompt. 0 = `KVEXACT_DEFAULT_MAX_RENDERED_BYTES`
    /// (8 MiB); `UINT64_MAX` = no bound.
    pub max_rendered_bytes: u64,
    /// Longest pre-token (text the tokenizer's pre-tokenizer does not split, e.g. a word
    /// without spaces) encoded, in bytes, checked before it is encoded. 0 =
    /// `KVEXACT_DEFAULT_MAX_WORD_BYTES` (64 KiB); `UINT64_MAX` = no bound.
    pub max_word_bytes: u64,
    /// Longest text handed whole to a tokenizer kvexact has no fast path for (a layout
    /// kvtoken does not recognise), in bytes. 0 = `KVEXACT_DEFAULT_MAX_FALLBACK_BYTES` (1 MiB); `UINT64_MAX` =
    /// no bound.
    pub max_fallback_bytes: u64,
    /// Most messages in one chat request, checked before rendering. 0 =
    /// `KVEXACT_DEFAULT_MAX_MESSAGES` (4096); `UINT32_MAX` = no bound.
    pub max_messages: u32,
    /// Must be 0.
    pub reserved2: u32,
}

// The defaults are literals so that cbindgen writes them into the header (it cannot evaluate
// a path into another crate); `defaults_are_kvtemplates` pins them to kvtemplate's.

/// Default `kvexact_encoder_options.max_body_bytes`: 8 MiB.
pub const KVEXACT_DEFAULT_MAX_BODY_BYTES: u64 = 8 << 20;
/// Default `kvexact_encoder_options.max_rendered_bytes`: 8 MiB.
pub const KVEXACT_DEFAULT_MAX_RENDERED_BYTES: u64 = 8 << 20;
/// Default `kvexact_encoder_options.max_word_bytes`: 64 KiB.
pub const KVEXACT_DEFAULT_MAX_WORD_BYTES: u64 = 64 << 10;
/// Default `kvexact_encoder_options.max_fallback_bytes`: 1 MiB.
pub const KVEXACT_DEFAULT_MAX_FALLBACK_BYTES: u64 = 1 << 20;
/// Default `kvexact_encoder_options.max_messages`: 4096.
pub const KVEXACT_DEFAULT_MAX_MESSAGES: u32 = 4096;

/// A byte bound of the options: 0 = `default`, `u64::MAX` = none.
fn byte_bound(v: u64, default: usize) -> usize {
    match v {
        0 => default,
        u64::MAX => usize::MAX,
        n => usize::try_from(n).unwrap_or(usize::MAX),
    }
}

/// The bounds the options ask for.
fn limits_of(o: &kvexact_encoder_options) -> kvtemplate::InputLimits {
    use kvtemplate::{
        InputLimits, DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_FALLBACK_BYTES, DEFAULT_MAX_MESSAGES,
        DEFAULT_MAX_RENDERED_BYTES, DEFAULT_MAX_WORD_BYTES,
    };
    InputLimits {
        max_body_bytes: byte_bound(o.max_body_bytes, DEFAULT_MAX_BODY_BYTES),
        max_rendered_bytes: byte_bound(o.max_rendered_bytes, DEFAULT_MAX_RENDERED_BYTES),
        max_word_bytes: byte_bound(o.max_word_bytes, DEFAULT_MAX_WORD_BYTES),
        max_fallback_bytes: byte_bound(o.max_fallback_bytes, DEFAULT_MAX_FALLBACK_BYTES),
        max_messages: match o.max_messages {
            0 => DEFAULT_MAX_MESSAGES,
            u32::MAX => usize::MAX,
            n => n as usize,
        },
    }
}

/// What `kvexact_encoder_options` asks for, checked.
#[derive(Debug, Clone)]
pub(crate) struct EncoderOptions<'a> {
    pub(crate) lifted: RefusalSet,
    pub(crate) engine_version: Option<&'a str>,
    /// 0: no segment cache.
    pub(crate) segment_cache_bytes: usize,
    /// The bounds on each request's work.
    pub(crate) limits: kvtemplate::InputLimits,
}

impl Default for EncoderOptions<'_> {
    fn default() -> Self {
        EncoderOptions {
            lifted: RefusalSet::EMPTY,
            engine_version: None,
            segment_cache_bytes: KVEXACT_SEGMENT_CACHE_DEFAULT_BYTES as usize,
            limits: kvtemplate::InputLimits::default(),
        }
    }
}

/// Reads and checks `kvexact_encoder_options` (NULL: the defaults).
///
/// # Safety
/// `opts` is NULL or valid for its `struct_size` bytes; its `engine_version` is NULL or
/// NUL-terminated and outlives `'a`.
pub(crate) unsafe fn encoder_options<'a>(
    opts: *const kvexact_encoder_options,
) -> Result<EncoderOptions<'a>, Failure> {
    let Some(o) = (unsafe { versioned_in(opts, "options") })? else {
        return Ok(EncoderOptions::default());
    };
    if o.flags & !KVEXACT_OPTION_NO_CACHE != 0 || o.reserved != 0 || o.reserved2 != 0 {
        return Err(Failure::invalid(
            "options",
            format_args!("unknown flags {:#x} or reserved field set", o.flags),
        ));
    }
    let lifted = RefusalSet::from_bits(o.lifted).ok_or_else(|| {
        Failure::invalid(
            "options.lifted",
            format_args!("bits {:#x} name no refusal code", o.lifted),
        )
    })?;
    let engine_version = if o.engine_version.is_null() {
        None
    } else {
        Some(unsafe { in_c_str(o.engine_version, "options.engine_version") }?)
    };
    let segment_cache_bytes = match (
        o.flags & KVEXACT_OPTION_NO_CACHE != 0,
        o.segment_cache_bytes,
    ) {
        (true, 0) => 0,
        (true, _) => {
            return Err(Failure::invalid(
                "options.segment_cache_bytes",
                "a capacity with KVEXACT_OPTION_NO_CACHE",
            ))
        }
        (false, 0) => KVEXACT_SEGMENT_CACHE_DEFAULT_BYTES,
        (false, n) if n > KVEXACT_SEGMENT_CACHE_MAX_BYTES => {
            return Err(Failure::invalid(
                "options.segment_cache_bytes",
                format_args!("{n} is above KVEXACT_SEGMENT_CACHE_MAX_BYTES"),
            ))
        }
        (false, n) => n,
    };
    Ok(EncoderOptions {
        lifted,
        engine_version,
        segment_cache_bytes: usize::try_from(segment_cache_bytes)
            .map_err(|_| Failure::invalid("options.segment_cache_bytes", "too large"))?,
        limits: limits_of(&o),
    })
}

/// Builds the kvtemplate encoder of `view` for `contract_id` with `opts`.
fn build_encoder(
    view: &ProfileView,
    contract_id: &str,
    opts: &EncoderOptions<'_>,
) -> Result<Encoder, Failure> {
    let lp = &view.profile;
    let mut encoder = match (opts.engine_version, opts.lifted.is_empty()) {
        // The strict path (the chat rules do not matter to it), with the renderer the
        // catalog names for the profile's model type (gpt-oss on vLLM 0.31/0.33: harmony;
        // unknown where the id names no release that proves one: chat refused).
        (None, true) => kvprobe::bridge::encoder_for_id(lp, contract_id)
            .map_err(|e| crate::contract::contract_failure(&e))?,
        (None, false) => kvprobe::bridge::encoder_for_id_with_lifts(lp, contract_id, opts.lifted)
            .map_err(|e| crate::contract::contract_failure(&e))?,
        (Some(v), _) => {
            let c = kvprobe::contract::resolve_within(contract_id, Some(v))
                .map_err(|e| crate::contract::contract_failure(&e))?;
            kvprobe::bridge::encoder_with_lifts(lp, &c, opts.lifted)
                .map_err(|e| crate::contract::contract_failure(&e))?
        }
    };
    encoder.enable_segment_cache(opts.segment_cache_bytes);
    encoder.set_limits(opts.limits);
    Ok(encoder)
}

/// The token-probe route of chat requests on `encoder`, built for `contract_id` (and
/// `engine_version`).
fn chat_route_of(
    encoder: &Encoder,
    contract_id: &str,
    engine_version: Option<&str>,
) -> Option<kvprobe::contract::ProbeRoute> {
    let renderer = encoder.renderer();
    match renderer {
        kvtemplate::ChatRenderer::Jinja => Some(kvprobe::contract::ProbeRoute::Tokenize),
        kvtemplate::ChatRenderer::Unknown(_) => None,
        kvtemplate::ChatRenderer::Harmony(_) | kvtemplate::ChatRenderer::Mistral(_) => {
            let c = match engine_version {
                Some(v) => kvprobe::contract::resolve_within(contract_id, Some(v)),
                None => kvprobe::contract::by_id(contract_id),
            };
            c.ok().and_then(|c| c.probe_route(&renderer))
        }
    }
}

/// The chat call shared by `kvexact_encode_chat`, `kvexact_route_keys` and its batch form:
/// refusal scan, render, tokenize into `out` (capped at its length), with the refusal (if
/// any) stored in `refusal`. Returns the number of ids written.
pub(crate) fn chat_ids(
    enc: &EncoderInner,
    body: &[u8],
    now_unix_ms: i64,
    out: &mut [u32],
    refusal: &mut kvexact_refusal,
) -> Result<(usize, bool), Failure> {
    let (res, hit, token) = with_scratch(|s| {
        let r = enc.encoder.encode_chat(body, now_unix_ms, out, s);
        let token = ambiguous_token(&enc.encoder, &r, s.rendered());
        (r, s.limit_hit(), token)
    });
    match res {
        Ok(Outcome::Done(e)) => Ok((e.written, e.truncated)),
        Ok(Outcome::Refused(r)) => {
            *refusal = refusal_value(r);
            Err(refused(r, hit, token))
        }
        Err(e) => {
            let f = template_failure(&e);
            if f.status == KVEXACT_ERR_UNSUPPORTED {
                *refusal = KVEXACT_REFUSAL_TEMPLATE_RAISED;
            }
            Err(f)
        }
    }
}

/// Runs `f` with this thread's render scratch buffer (kvtemplate's one thread-local helper:
/// only a buffer, no state survives between calls; a fresh one if it is somehow in use).
fn with_scratch<R>(f: impl FnOnce(&mut ScratchBuf) -> R) -> R {
    ScratchBuf::with_thread_local(f)
}

/// A kvtemplate error as a failure with the gateway's typed code (§9.3).
fn template_failure(e: &kvtemplate::Error) -> Failure {
    Failure::new(e.class().code(), e.to_string())
}

/// The failure of a refused request: the refusal's code, and for
/// `KVEXACT_REFUSAL_INPUT_TOO_LARGE` the bound crossed as the message
/// (`"input_too_large: N bytes, over max_body_bytes = M"`); for
/// `KVEXACT_REFUSAL_AMBIGUOUS_ADDED_TOKEN` the token and the remedy.
fn refused(r: Refusal, hit: Option<kvtemplate::LimitHit>, token: Option<(u32, String)>) -> Failure {
    match (hit, token) {
        (Some(h), _) if r == Refusal::InputTooLarge => {
            Failure::with_code(KVEXACT_ERR_UNSUPPORTED, r.as_str(), h.to_string())
        }
        (_, Some((id, content))) if r == Refusal::AmbiguousAddedToken => Failure::with_code(
            KVEXACT_ERR_UNSUPPORTED,
            r.as_str(),
            format!(
                "ambiguous_added_token: the text holds added token {id} {content:?}, which the \
                 engine's tokenizer loader keeps or not as the model's tokenizer_config.json \
                 says; the profile pins none: pin tokenizerConfigArtifact"
            ),
        ),
        _ => Failure::with_code(KVEXACT_ERR_UNSUPPORTED, r.as_str(), "refused"),
    }
}

/// For an `ambiguous_added_token` refusal, the token `text` holds.
fn ambiguous_token<T, E>(
    enc: &kvtemplate::Encoder,
    r: &Result<Outcome<T>, E>,
    text: &str,
) -> Option<(u32, String)> {
    match r {
        Ok(Outcome::Refused(Refusal::AmbiguousAddedToken)) => enc
            .ambiguous_added_token(text)
            .map(|(id, c)| (id, c.to_string())),
        _ => None,
    }
}

/// The C value of a refusal (kvtemplate's discriminants are the ABI's values).
fn refusal_value(r: Refusal) -> kvexact_refusal {
    u32::try_from(r as i32).unwrap_or(KVEXACT_REFUSAL_TEMPLATE_RAISED)
}

/// Builds the encoder of `profile` for the engine contract `contract_id` (NUL-terminated; its
/// first `-` segment names the engine: `vllm`, `sglang`, `trtllm`). Compiles the template; the
/// tokenizer parsed when the registry was loaded is shared, not parsed again (milliseconds:
/// still do it at publish time, not per request). The defaults of
/// `kvexact_encoder_new_with_options` (NULL options): strict rules, a segment cache of
/// `KVEXACT_SEGMENT_CACHE_DEFAULT_BYTES`.
///
/// Returns `KVEXACT_OK` and a new reference in `*out`, or a negative status with an error
/// object: `KVEXACT_ERR_PROFILE` (unknown contract, quirk not valid for it),
/// `KVEXACT_ERR_RENDERER` (template does not compile), `KVEXACT_ERR_TOKENIZER` (tokenizer does
/// not load), `KVEXACT_ERR_NULL_ARGUMENT`, `KVEXACT_ERR_INVALID_ARGUMENT`.
///
/// Ownership: the caller owns `*out` (free with `kvexact_encoder_free`) and `*err`.
///
/// # Safety
/// `profile` is NULL or a live profile; `contract_id` is NULL or a NUL-terminated string;
/// `out` and `err` are NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_encoder_new(
    profile: *const kvexact_profile,
    contract_id: *const c_char,
    out: *mut *mut kvexact_encoder,
    err: *mut *mut kvexact_error,
) -> kvexact_status {
    unsafe { kvexact_encoder_new_with_options(profile, contract_id, std::ptr::null(), out, err) }
}

/// `kvexact_encoder_new` with options (`options` NULL: its defaults): the engine release
/// (`engine_version`), the refusal codes to lift (`lifted`), the segment cache (capacity, or
/// none). See `kvexact_encoder_options`.
///
/// The segment cache belongs to this encoder handle (and to every reference to it: share one
/// encoder between all worker threads); it is sharded (16 locks, no global lock) and bounded
/// by its capacity. Its entries are keyed by the parsed tokenizer (which fixes the vocabulary,
/// merges, normalizer, pre-tokenizer and added-token set) and the exact segment bytes; a
/// segment's ids depend on nothing else (the engine contract only changes what is rendered,
/// and the special tokens added around the segments). Counters: `kvexact_encoder_cache_stats`.
///
/// Returns `KVEXACT_OK` and a new reference in `*out`; otherwise the statuses of
/// `kvexact_encoder_new`, and (with an error object, code in parentheses)
/// `KVEXACT_ERR_LIFT_NOT_ALLOWED` (`"LIFT_NOT_ALLOWED"`: a lifted code the release's
/// contract does not define, or lifts without one release; the message names the code, the
/// release and why), `KVEXACT_ERR_UNKNOWN_ENGINE_VERSION`, `KVEXACT_ERR_CONTRACT_MISMATCH`,
/// `KVEXACT_ERR_NOT_FOUND` (`"UNKNOWN_NAME"`), `KVEXACT_ERR_INVALID_ARGUMENT` (a bad
/// `struct_size`, unknown flag or lift bit, a capacity above the bound, `"CONFIG"`: a
/// contract id spanning releases that differ). Nothing is written to `*out` on failure.
///
/// Ownership: the caller owns `*out` (free with `kvexact_encoder_free`) and `*err`;
/// `options` and the strings are only read during the call.
///
/// # Safety
/// `profile` is NULL or a live profile; `contract_id` is NULL or NUL-terminated; `options` is
/// NULL or valid for its `struct_size` bytes with `engine_version` NULL or NUL-terminated;
/// `out` and `err` are NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_encoder_new_with_options(
    profile: *const kvexact_profile,
    contract_id: *const c_char,
    options: *const kvexact_encoder_options,
    out: *mut *mut kvexact_encoder,
    err: *mut *mut kvexact_error,
) -> kvexact_status {
    unsafe {
        boundary_err(err, || {
            let view = arc_clone(profile, "profile")?;
            let contract = in_c_str(contract_id, "contract_id")?;
            let opts = encoder_options(options)?;
            let out = out_param(out, "out")?;
            let encoder = build_encoder(&view, contract, &opts)?;
            let chat_route = chat_route_of(&encoder, contract, opts.engine_version);
            out.write(arc_into_raw(Arc::new(EncoderInner {
                encoder,
                profile: view,
                contract_id: contract.to_string(),
                chat_route,
            })));
            Ok(KVEXACT_OK)
        })
    }
}

/// Takes another reference to `encoder` and returns it (NULL when `encoder` is NULL).
///
/// # Safety
/// `encoder` is NULL or a live encoder.
#[no_mangle]
pub unsafe extern "C" fn kvexact_encoder_retain(
    encoder: *const kvexact_encoder,
) -> *const kvexact_encoder {
    boundary(|| {
        Ok(arc_into_raw::<kvexact_encoder>(unsafe { arc_clone(encoder, "encoder") }?).cast_const())
    })
}

/// Releases one encoder reference. NULL is accepted and ignored.
///
/// # Safety
/// `encoder` is NULL or a reference not released before.
#[no_mangle]
pub unsafe extern "C" fn kvexact_encoder_free(encoder: *mut kvexact_encoder) {
    boundary(|| {
        unsafe { arc_free(encoder) };
        Ok(())
    })
}

/// Encodes a text completions prompt (`text`, `len` bytes of UTF-8, no NUL needed) into the ids
/// the engine caches, using the contract's completions encoding (tokenizer with special tokens;
/// SGLang `completionsBos`: BOS + ids without specials, the BOS counting against `max_ids`).
///
/// Writes at most `max_ids` ids (the rest is cut, as the gateway's 4096-id cap does) and
/// returns how many, or a negative status: `KVEXACT_ERR_REQUEST` (empty text, not UTF-8),
/// `KVEXACT_ERR_UNSUPPORTED` (refused: a NUL byte in the text, the text over an input bound,
/// an added token the engine's loader may or may not keep, a completions path no vectors
/// prove; `kvexact_encode_completions_with_refusal` says which), `KVEXACT_ERR_TOKENIZER`
/// (no tokenizer, or it failed), `KVEXACT_ERR_PROFILE` (the encoder cannot serve
/// completions), `KVEXACT_ERR_NULL_ARGUMENT`. `out_ids` is written only on success.
///
/// # Safety
/// `encoder` is NULL or a live encoder; `text` is valid for `len` bytes; `out_ids` is valid for
/// `max_ids` writes.
#[no_mangle]
pub unsafe extern "C" fn kvexact_encode_completions(
    encoder: *const kvexact_encoder,
    text: *const u8,
    len: usize,
    out_ids: *mut u32,
    max_ids: u32,
) -> i32 {
    let mut refusal = KVEXACT_REFUSAL_NONE;
    boundary(|| {
        let enc = unsafe { arc_ref(encoder, "encoder") }?;
        let text = unsafe { in_slice(text, len, "text") }?;
        let cap = (max_ids as usize).min(i32::MAX as usize);
        let out = unsafe { out_slice(out_ids, cap, "out_ids") }?;
        completions_ids(enc, text, out, &mut refusal)
    })
}

/// `kvexact_encode_completions` with the refusal typed, as `kvexact_encode_chat` gives it.
///
/// Writes at most `max_ids` ids and returns how many, or a negative status:
/// `KVEXACT_ERR_UNSUPPORTED` (refused; the reason in `*refusal_out`:
/// `KVEXACT_REFUSAL_NUL_BYTE`, `KVEXACT_REFUSAL_INPUT_TOO_LARGE` (the error's message names
/// the bound), `KVEXACT_REFUSAL_AMBIGUOUS_ADDED_TOKEN` (the message names the token and the
/// remedy), or `KVEXACT_REFUSAL_TEMPLATE_RAISED` where the engine release's completions
/// path is one no vectors prove (a Mistral encoder without a proven renderer)),
/// `KVEXACT_ERR_REQUEST` (empty text, not UTF-8), `KVEXACT_ERR_TOKENIZER` (no tokenizer, or
/// it failed), `KVEXACT_ERR_PROFILE` (the encoder cannot serve completions),
/// `KVEXACT_ERR_NULL_ARGUMENT`. `out_ids` is written only on success.
///
/// `refusal_out` may be NULL; when not NULL it is always written: the refusal for
/// `KVEXACT_ERR_UNSUPPORTED`, `KVEXACT_REFUSAL_NONE` otherwise.
///
/// # Safety
/// `encoder` is NULL or a live encoder; `text` is valid for `len` bytes; `out_ids` is valid for
/// `max_ids` writes; `refusal_out` is NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_encode_completions_with_refusal(
    encoder: *const kvexact_encoder,
    text: *const u8,
    len: usize,
    out_ids: *mut u32,
    max_ids: u32,
    refusal_out: *mut kvexact_refusal,
) -> i32 {
    let mut refusal = KVEXACT_REFUSAL_NONE;
    let r = boundary(|| {
        let enc = unsafe { arc_ref(encoder, "encoder") }?;
        let text = unsafe { in_slice(text, len, "text") }?;
        let cap = (max_ids as usize).min(i32::MAX as usize);
        let out = unsafe { out_slice(out_ids, cap, "out_ids") }?;
        completions_ids(enc, text, out, &mut refusal)
    });
    if r != KVEXACT_ERR_UNSUPPORTED {
        // A panic caught after a refusal was noted: the call had no effect.
        refusal = KVEXACT_REFUSAL_NONE;
    }
    if !refusal_out.is_null() {
        // SAFETY: the caller guarantees validity when not NULL.
        unsafe { refusal_out.write(refusal) };
    }
    r
}

/// The completions call behind both C entry points: the ids of `text` in `out`, their count,
/// or the failure with the refusal noted in `refusal`.
fn completions_ids(
    enc: &EncoderInner,
    text: &[u8],
    out: &mut [u32],
    refusal: &mut kvexact_refusal,
) -> Result<i32, Failure> {
    let text = std::str::from_utf8(text)
        .map_err(|e| Failure::new(KVEXACT_ERR_REQUEST, format!("prompt is not UTF-8: {e}")))?;
    let (res, hit) = with_scratch(|s| {
        let r = enc.encoder.encode_completions_with(text, out, s);
        (r, s.limit_hit())
    });
    let token = ambiguous_token(&enc.encoder, &res, text);
    match res {
        Ok(Outcome::Done(e)) => Ok(i32::try_from(e.written).unwrap_or(i32::MAX)),
        Ok(Outcome::Refused(r)) => {
            *refusal = refusal_value(r);
            Err(refused(r, hit, token))
        }
        Err(e) => {
            let f = template_failure(&e);
            if f.status == KVEXACT_ERR_UNSUPPORTED {
                *refusal = match e {
                    kvtemplate::Error::InputTooLarge(_) => KVEXACT_REFUSAL_INPUT_TOO_LARGE,
                    _ => KVEXACT_REFUSAL_TEMPLATE_RAISED,
                };
            }
            Err(f)
        }
    }
}

/// The gateway's chat call: strict refusal scan of the raw request `body` (JSON, exact keys),
/// render of the profile's template at `now_unix_ms` (UTC; one instant per request), encoding
/// without special tokens.
///
/// Writes at most `max_ids` ids and returns how many, or a negative status:
/// `KVEXACT_ERR_UNSUPPORTED` (a strict-rule refusal; its reason in `*refusal_out`),
/// `KVEXACT_ERR_REQUEST` (e.g. clock out of range), `KVEXACT_ERR_RENDERER` (no template),
/// `KVEXACT_ERR_TOKENIZER` (no tokenizer, or it failed), `KVEXACT_ERR_PROFILE` (the encoder
/// cannot serve this chat path, e.g. an engine without one), `KVEXACT_ERR_NULL_ARGUMENT`.
/// `out_ids` is written only on success.
///
/// `refusal_out` may be NULL; when not NULL it is always written: the refusal for
/// `KVEXACT_ERR_UNSUPPORTED`, `KVEXACT_REFUSAL_NONE` otherwise.
///
/// # Safety
/// `encoder` is NULL or a live encoder; `body` is valid for `len` bytes; `out_ids` is valid for
/// `max_ids` writes; `refusal_out` is NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_encode_chat(
    encoder: *const kvexact_encoder,
    body: *const u8,
    len: usize,
    now_unix_ms: i64,
    out_ids: *mut u32,
    max_ids: u32,
    refusal_out: *mut kvexact_refusal,
) -> i32 {
    let mut refusal = KVEXACT_REFUSAL_NONE;
    let r = boundary(|| {
        let enc = unsafe { arc_ref(encoder, "encoder") }?;
        let body = unsafe { in_slice(body, len, "body") }?;
        let cap = (max_ids as usize).min(i32::MAX as usize);
        let out = unsafe { out_slice(out_ids, cap, "out_ids") }?;
        let (n, _) = chat_ids(enc, body, now_unix_ms, out, &mut refusal)?;
        Ok(i32::try_from(n).unwrap_or(i32::MAX))
    });
    if !refusal_out.is_null() {
        // SAFETY: the caller guarantees validity when not NULL.
        unsafe { refusal_out.write(refusal) };
    }
    r
}

/// Debug/oracle: the prompt `kvexact_encode_chat` would tokenize, as UTF-8 bytes (no NUL).
///
/// Writes the needed length to `*len_out`; when `cap` is smaller, returns
/// `KVEXACT_ERR_BUFFER_TOO_SMALL` and writes nothing else (`buf` may be NULL with `cap` 0 to
/// ask for the size). Otherwise copies the prompt into `buf` and returns `KVEXACT_OK`. The
/// other statuses as for `kvexact_encode_chat`: `KVEXACT_ERR_UNSUPPORTED` (its reason in
/// `*refusal_out`), `KVEXACT_ERR_REQUEST`, `KVEXACT_ERR_RENDERER`, `KVEXACT_ERR_TOKENIZER`,
/// `KVEXACT_ERR_PROFILE`, `KVEXACT_ERR_NULL_ARGUMENT`; `refusal_out` as there.
///
/// # Safety
/// As `kvexact_encode_chat`; `buf` is NULL or valid for `cap` writes; `len_out` is NULL or
/// valid for one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_render_chat(
    encoder: *const kvexact_encoder,
    body: *const u8,
    len: usize,
    now_unix_ms: i64,
    buf: *mut u8,
    cap: usize,
    len_out: *mut usize,
    refusal_out: *mut kvexact_refusal,
) -> kvexact_status {
    let mut refusal = KVEXACT_REFUSAL_NONE;
    let r = boundary(|| {
        let enc = unsafe { arc_ref(encoder, "encoder") }?;
        let body = unsafe { in_slice(body, len, "body") }?;
        let len_out = unsafe { out_param(len_out, "len_out") }?;
        let out = unsafe { out_slice(buf, cap, "buf") }?;
        with_scratch(|s| match enc.encoder.render_chat(body, now_unix_ms, s) {
            Ok(Outcome::Done(())) => {
                let text = s.rendered().as_bytes();
                len_out.write(text.len());
                let dst = out.get_mut(..text.len()).ok_or_else(|| {
                    Failure::new(
                        KVEXACT_ERR_BUFFER_TOO_SMALL,
                        "buffer too small for the prompt",
                    )
                })?;
                dst.copy_from_slice(text);
                Ok(KVEXACT_OK)
            }
            Ok(Outcome::Refused(r)) => {
                refusal = refusal_value(r);
                Err(Failure::with_code(
                    KVEXACT_ERR_UNSUPPORTED,
                    r.as_str(),
                    "refused",
                ))
            }
            Err(e) => {
                let f = template_failure(&e);
                if f.status == KVEXACT_ERR_UNSUPPORTED {
                    refusal = KVEXACT_REFUSAL_TEMPLATE_RAISED;
                }
                Err(f)
            }
        })
    });
    if !refusal_out.is_null() {
        // SAFETY: the caller guarantees validity when not NULL.
        unsafe { refusal_out.write(refusal) };
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_kvtemplates() {
        let d = kvtemplate::InputLimits::default();
        assert_eq!(
            KVEXACT_DEFAULT_MAX_BODY_BYTES,
            kvtemplate::DEFAULT_MAX_BODY_BYTES as u64
        );
        assert_eq!(KVEXACT_DEFAULT_MAX_BODY_BYTES, d.max_body_bytes as u64);
        assert_eq!(
            KVEXACT_DEFAULT_MAX_RENDERED_BYTES,
            kvtemplate::DEFAULT_MAX_RENDERED_BYTES as u64
        );
        assert_eq!(
            KVEXACT_DEFAULT_MAX_RENDERED_BYTES,
            d.max_rendered_bytes as u64
        );
        assert_eq!(
            KVEXACT_DEFAULT_MAX_WORD_BYTES,
            kvtemplate::DEFAULT_MAX_WORD_BYTES as u64
        );
        assert_eq!(KVEXACT_DEFAULT_MAX_WORD_BYTES, d.max_word_bytes as u64);
        assert_eq!(
            KVEXACT_DEFAULT_MAX_FALLBACK_BYTES,
            kvtemplate::DEFAULT_MAX_FALLBACK_BYTES as u64
        );
        assert_eq!(
            KVEXACT_DEFAULT_MAX_FALLBACK_BYTES,
            d.max_fallback_bytes as u64
        );
        assert_eq!(
            KVEXACT_DEFAULT_MAX_MESSAGES,
            kvtemplate::DEFAULT_MAX_MESSAGES as u32
        );
        assert_eq!(KVEXACT_DEFAULT_MAX_MESSAGES, d.max_messages as u32);
    }
}
