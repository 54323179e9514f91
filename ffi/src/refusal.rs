//! Strict-rule refusal reasons (docs/contracts/registry.md §9.2), exposed as stable integers and names.
//!
//! The values are the §6.1 order of docs/contracts/gateway-integration.md and equal the discriminants of
//! kvtemplate's refusal enum (checked by a test once that enum exists).

use std::ffi::c_char;

/// Why a strict rule refused a request (`KVEXACT_REFUSAL_*`); written by `kvexact_encode_chat`
/// next to `KVEXACT_ERR_UNSUPPORTED`.
///
/// An integer typedef rather than a C enum: a C enum's size is implementation-defined, and an
/// out-of-range value passed from C into a Rust enum would be undefined behaviour, whereas
/// `kvexact_refusal_name` answers `"unrecognized_refusal"` for it.
pub type kvexact_refusal = u32;

/// No refusal (the call succeeded, or failed for another reason). Name: `"none"`.
pub const KVEXACT_REFUSAL_NONE: kvexact_refusal = 0;
/// The body, `messages` or a message is not the expected shape (docs/contracts/registry.md §9.2 order 0). Name: `"unparseable"`.
pub const KVEXACT_REFUSAL_UNPARSEABLE: kvexact_refusal = 1;
/// `tools` or `tool_choice` present. Name: `"tools"`.
pub const KVEXACT_REFUSAL_TOOLS: kvexact_refusal = 2;
/// `cache_salt` present. Name: `"cache_salt"`.
pub const KVEXACT_REFUSAL_CACHE_SALT: kvexact_refusal = 3;
/// `prompt_embeds` present. Name: `"prompt_embeds"`.
pub const KVEXACT_REFUSAL_PROMPT_EMBEDS: kvexact_refusal = 4;
/// `chat_template_kwargs` present. Name: `"template_kwargs"`.
pub const KVEXACT_REFUSAL_TEMPLATE_KWARGS: kvexact_refusal = 5;
/// `add_generation_prompt` differs from the profile's value. Name: `"add_generation_prompt"`.
pub const KVEXACT_REFUSAL_ADD_GENERATION_PROMPT: kvexact_refusal = 6;
/// `continue_final_message` differs from false. Name: `"continue_final_message"`.
pub const KVEXACT_REFUSAL_CONTINUE_FINAL_MESSAGE: kvexact_refusal = 7;
/// `add_special_tokens` differs from false. Name: `"add_special_tokens"`.
pub const KVEXACT_REFUSAL_ADD_SPECIAL_TOKENS: kvexact_refusal = 8;
/// `documents` present. Name: `"documents"`.
pub const KVEXACT_REFUSAL_DOCUMENTS: kvexact_refusal = 9;
/// `reasoning_effort` present. Name: `"reasoning_effort"`.
pub const KVEXACT_REFUSAL_REASONING_EFFORT: kvexact_refusal = 10;
/// `chat_template` present. Name: `"chat_template"`.
pub const KVEXACT_REFUSAL_CHAT_TEMPLATE: kvexact_refusal = 11;
/// `truncate_prompt_tokens` present. Name: `"truncate_prompt_tokens"`.
pub const KVEXACT_REFUSAL_TRUNCATE_PROMPT_TOKENS: kvexact_refusal = 12;
/// `prompt_token_ids` or `prompt_token_ids_b64` present. Name: `"prompt_token_ids"`.
pub const KVEXACT_REFUSAL_PROMPT_TOKEN_IDS: kvexact_refusal = 13;
/// A content part whose `type` is not `text`. Name: `"multimodal"`.
pub const KVEXACT_REFUSAL_MULTIMODAL: kvexact_refusal = 14;
/// A content array with more than one `text` part. Name: `"multi_text_part"`.
pub const KVEXACT_REFUSAL_MULTI_TEXT_PART: kvexact_refusal = 15;
/// The last message's role is `assistant`. Name: `"trailing_assistant"`.
pub const KVEXACT_REFUSAL_TRAILING_ASSISTANT: kvexact_refusal = 16;
/// A message with role `developer`. Name: `"developer_role"`.
pub const KVEXACT_REFUSAL_DEVELOPER_ROLE: kvexact_refusal = 17;
/// A message with non-null `tools`. Name: `"message_tools"`.
pub const KVEXACT_REFUSAL_MESSAGE_TOOLS: kvexact_refusal = 18;
/// A message with another non-null key the template mentions. Name: `"message_field"`.
pub const KVEXACT_REFUSAL_MESSAGE_FIELD: kvexact_refusal = 19;
/// Null/absent content on a template that tests content with `is none`/`is defined`. Name: `"null_content"`.
pub const KVEXACT_REFUSAL_NULL_CONTENT: kvexact_refusal = 20;
/// The template raised, refused the messages, or rendered empty. Name: `"template_raised"`.
pub const KVEXACT_REFUSAL_TEMPLATE_RAISED: kvexact_refusal = 21;
/// The render depends on the content shape engines may use (string vs list). Name: `"content_shape"`.
pub const KVEXACT_REFUSAL_CONTENT_SHAPE: kvexact_refusal = 22;
/// A NUL byte in the input text or the rendered prompt. Name: `"nul_byte"`.
pub const KVEXACT_REFUSAL_NUL_BYTE: kvexact_refusal = 23;
/// Over one of the encoder's input bounds (body bytes, messages, rendered bytes, one
/// pre-token's bytes, text on the tokenizer's fallback path), checked before the work it
/// bounds. Name: `"input_too_large"`; the error's message names the bound
/// (`"input_too_large: N bytes, over max_body_bytes = M"`). Never liftable.
pub const KVEXACT_REFUSAL_INPUT_TOO_LARGE: kvexact_refusal = 24;
/// The text to tokenize holds an added token the engine's tokenizer loader may or may not keep:
/// the profile pins no `tokenizer_config.json` and the engine release's loader takes its added
/// tokens from it (docs/contracts/registry.md §9.2). Name: `"ambiguous_added_token"`; the
/// error's message names the token and the remedy (pin `tokenizerConfigArtifact`). Never
/// liftable: lifting it would give ids kvexact cannot know.
pub const KVEXACT_REFUSAL_AMBIGUOUS_ADDED_TOKEN: kvexact_refusal = 25;

/// The lift bit of `KVEXACT_REFUSAL_CACHE_SALT` (`1 << code`), for
/// `kvexact_encoder_options.lifted`: liftable where the engine release's salt handling is
/// catalog data (`deployment.cacheSalt`); the prompt is rendered as without the salt, and a
/// deployment's hasher (`kvexact_hasher_new_for_deployment`) keys it.
pub const KVEXACT_REFUSAL_BIT_CACHE_SALT: u32 = 1 << KVEXACT_REFUSAL_CACHE_SALT;
/// The lift bit of `KVEXACT_REFUSAL_TOOLS` (`1 << code`), for `kvexact_encoder_options.lifted`.
pub const KVEXACT_REFUSAL_BIT_TOOLS: u32 = 1 << KVEXACT_REFUSAL_TOOLS;
/// The lift bit of `KVEXACT_REFUSAL_TEMPLATE_KWARGS`.
pub const KVEXACT_REFUSAL_BIT_TEMPLATE_KWARGS: u32 = 1 << KVEXACT_REFUSAL_TEMPLATE_KWARGS;
/// The lift bit of `KVEXACT_REFUSAL_ADD_GENERATION_PROMPT`.
pub const KVEXACT_REFUSAL_BIT_ADD_GENERATION_PROMPT: u32 =
    1 << KVEXACT_REFUSAL_ADD_GENERATION_PROMPT;
/// The lift bit of `KVEXACT_REFUSAL_CONTINUE_FINAL_MESSAGE`.
pub const KVEXACT_REFUSAL_BIT_CONTINUE_FINAL_MESSAGE: u32 =
    1 << KVEXACT_REFUSAL_CONTINUE_FINAL_MESSAGE;
/// The lift bit of `KVEXACT_REFUSAL_MULTI_TEXT_PART`.
pub const KVEXACT_REFUSAL_BIT_MULTI_TEXT_PART: u32 = 1 << KVEXACT_REFUSAL_MULTI_TEXT_PART;
/// The lift bit of `KVEXACT_REFUSAL_TRAILING_ASSISTANT`.
pub const KVEXACT_REFUSAL_BIT_TRAILING_ASSISTANT: u32 = 1 << KVEXACT_REFUSAL_TRAILING_ASSISTANT;
/// The lift bit of `KVEXACT_REFUSAL_MESSAGE_FIELD`.
pub const KVEXACT_REFUSAL_BIT_MESSAGE_FIELD: u32 = 1 << KVEXACT_REFUSAL_MESSAGE_FIELD;
/// The lift bit of `KVEXACT_REFUSAL_NULL_CONTENT`.
pub const KVEXACT_REFUSAL_BIT_NULL_CONTENT: u32 = 1 << KVEXACT_REFUSAL_NULL_CONTENT;

/// The lift bit of any refusal code: `1 << refusal` for a code libkvexact defines
/// (`KVEXACT_REFUSAL_UNPARSEABLE` … `KVEXACT_REFUSAL_AMBIGUOUS_ADDED_TOKEN`), 0 for
/// `KVEXACT_REFUSAL_NONE` and for a value it does not define. The `KVEXACT_REFUSAL_BIT_*`
/// constants are the bits of the codes kvexact can lift at all; which of them an engine release
/// lifts is its contract's (`chat.liftable` in `kvexact_contracts_json`), checked when the
/// encoder is built.
#[no_mangle]
pub extern "C" fn kvexact_refusal_bit(refusal: kvexact_refusal) -> u32 {
    if refusal == KVEXACT_REFUSAL_NONE || name(refusal).is_none() {
        0
    } else {
        1u32 << refusal
    }
}

/// Parses comma-separated refusal names as `kvexact encode --allow` takes them
/// (`"tools,message_field"`; spaces around names and empty items are ignored, so `""` is 0)
/// into a lift mask for `kvexact_encoder_options.lifted`.
///
/// Returns `KVEXACT_OK` and the mask in `*bits`, or `KVEXACT_ERR_INVALID_ARGUMENT` (error code
/// `"invalid_argument"`, the message naming the first unknown name) /
/// `KVEXACT_ERR_NULL_ARGUMENT`; `*bits` is written only on success.
///
/// Ownership: `names` is only read during the call; the caller owns `*err`.
///
/// # Safety
/// `names` is NULL or valid for `len` bytes; `bits` and `err` are NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_refusal_bits_parse(
    names: *const u8,
    len: usize,
    bits: *mut u32,
    err: *mut *mut crate::error::kvexact_error,
) -> crate::status::kvexact_status {
    unsafe {
        crate::error::boundary_err(err, || {
            let names = crate::handle::in_str(names, len, "names")?;
            let bits = crate::handle::out_param(bits, "bits")?;
            let set = kvtemplate::RefusalSet::parse(names)
                .map_err(|e| crate::failure::Failure::invalid("names", e))?;
            bits.write(set.bits());
            Ok(crate::status::KVEXACT_OK)
        })
    }
}

/// Names in value order (index = value), each NUL-terminated.
const NAMES: [&str; 26] = [
    "none\0",
    "unparseable\0",
    "tools\0",
    "cache_salt\0",
    "prompt_embeds\0",
    "template_kwargs\0",
    "add_generation_prompt\0",
    "continue_final_message\0",
    "add_special_tokens\0",
    "documents\0",
    "reasoning_effort\0",
    "chat_template\0",
    "truncate_prompt_tokens\0",
    "prompt_token_ids\0",
    "multimodal\0",
    "multi_text_part\0",
    "trailing_assistant\0",
    "developer_role\0",
    "message_tools\0",
    "message_field\0",
    "null_content\0",
    "template_raised\0",
    "content_shape\0",
    "nul_byte\0",
    "input_too_large\0",
    "ambiguous_added_token\0",
];

/// The stable name of a refusal without its NUL terminator, or `None` when out of range.
pub fn name(refusal: kvexact_refusal) -> Option<&'static str> {
    NAMES
        .get(usize::try_from(refusal).ok()?)
        .map(|n| n.trim_end_matches('\0'))
}

/// The stable feature code of a refusal (`"tools"`, `"multi_text_part"` …, `"none"` for
/// `KVEXACT_REFUSAL_NONE`), or `"unrecognized_refusal"` for a value libkvexact does not define.
///
/// Ownership: the string is static; never free it.
#[no_mangle]
pub extern "C" fn kvexact_refusal_name(refusal: kvexact_refusal) -> *const c_char {
    usize::try_from(refusal)
        .ok()
        .and_then(|i| NAMES.get(i))
        .copied()
        .unwrap_or("unrecognized_refusal\0")
        .as_ptr()
        .cast()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_values() {
        assert_eq!(name(KVEXACT_REFUSAL_NONE), Some("none"));
        assert_eq!(
            name(KVEXACT_REFUSAL_MULTI_TEXT_PART),
            Some("multi_text_part")
        );
        assert_eq!(name(KVEXACT_REFUSAL_NUL_BYTE), Some("nul_byte"));
        assert_eq!(
            name(KVEXACT_REFUSAL_INPUT_TOO_LARGE),
            Some("input_too_large")
        );
        assert_eq!(
            name(KVEXACT_REFUSAL_AMBIGUOUS_ADDED_TOKEN),
            Some("ambiguous_added_token")
        );
        assert_eq!(name(KVEXACT_REFUSAL_AMBIGUOUS_ADDED_TOKEN + 1), None);
        let s = unsafe { std::ffi::CStr::from_ptr(kvexact_refusal_name(999)) };
        assert_eq!(s, c"unrecognized_refusal");
    }

    #[test]
    fn bits_are_one_shifted_by_the_code() {
        assert_eq!(kvexact_refusal_bit(KVEXACT_REFUSAL_TOOLS), 4);
        assert_eq!(KVEXACT_REFUSAL_BIT_TOOLS, 4);
        assert_eq!(kvexact_refusal_bit(KVEXACT_REFUSAL_NONE), 0);
        assert_eq!(
            kvexact_refusal_bit(KVEXACT_REFUSAL_AMBIGUOUS_ADDED_TOKEN + 1),
            0
        );
        assert_eq!(kvexact_refusal_bit(99), 0);
        let liftable = KVEXACT_REFUSAL_BIT_CACHE_SALT
            | KVEXACT_REFUSAL_BIT_TOOLS
            | KVEXACT_REFUSAL_BIT_TEMPLATE_KWARGS
            | KVEXACT_REFUSAL_BIT_ADD_GENERATION_PROMPT
            | KVEXACT_REFUSAL_BIT_CONTINUE_FINAL_MESSAGE
            | KVEXACT_REFUSAL_BIT_MULTI_TEXT_PART
            | KVEXACT_REFUSAL_BIT_TRAILING_ASSISTANT
            | KVEXACT_REFUSAL_BIT_MESSAGE_FIELD
            | KVEXACT_REFUSAL_BIT_NULL_CONTENT;
        assert_eq!(liftable, kvtemplate::RefusalSet::LIFTABLE.bits());
        let mut bits = 0u32;
        let names = "tools, message_field,";
        let st = unsafe {
            kvexact_refusal_bits_parse(names.as_ptr(), names.len(), &mut bits, std::ptr::null_mut())
        };
        assert_eq!(st, 0);
        assert_eq!(
            bits,
            KVEXACT_REFUSAL_BIT_TOOLS | KVEXACT_REFUSAL_BIT_MESSAGE_FIELD
        );
        let st = unsafe {
            kvexact_refusal_bits_parse(b"tool".as_ptr(), 4, &mut bits, std::ptr::null_mut())
        };
        assert_eq!(st, crate::status::KVEXACT_ERR_INVALID_ARGUMENT);
    }
}

#[cfg(test)]
mod kvtemplate_agreement {
    use super::*;

    /// The ABI values and names are kvtemplate's `Refusal` discriminants and codes.
    #[test]
    fn values_and_names_equal_kvtemplate() {
        for r in kvtemplate::Refusal::ALL {
            let v = r as i32;
            assert!(v > 0);
            assert_eq!(name(v as kvexact_refusal), Some(r.as_str()), "value {v}");
        }
        assert_eq!(kvtemplate::Refusal::ALL.len(), NAMES.len() - 1);
    }
}
