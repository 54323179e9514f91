//! Strict-rule refusal reasons (spec/registry.md §9.2), exposed as stable integers and names.
//!
//! The values are the §6.1 order of spec/gateway-integration.md and equal the discriminants of
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
/// The body, `messages` or a message is not the expected shape (registry.md §9.2 order 0). Name: `"unparseable"`.
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

/// Names in value order (index = value), each NUL-terminated.
const NAMES: [&str; 24] = [
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
        assert_eq!(name(KVEXACT_REFUSAL_NUL_BYTE + 1), None);
        let s = unsafe { std::ffi::CStr::from_ptr(kvexact_refusal_name(999)) };
        assert_eq!(s, c"unrecognized_refusal");
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
