//! Strict-rule refusals (spec/registry.md §9.2) and result classes (§9.3).

/// Why a strict rule refuses a request. Discriminants are the C ABI's `kvexact_refusal`
/// values (spec/gateway-integration.md §6.1; 0 is `KVEXACT_REFUSAL_NONE`), and the variant
/// order is the order in which the scan checks them (first hit wins).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(i32)]
pub enum Refusal {
    /// Body, `messages` or a message is not the expected shape.
    Unparseable = 1,
    /// `tools` or `tool_choice` present.
    Tools = 2,
    /// `cache_salt` present.
    CacheSalt = 3,
    /// `prompt_embeds` present.
    PromptEmbeds = 4,
    /// `chat_template_kwargs` present.
    TemplateKwargs = 5,
    /// `add_generation_prompt` differs from the profile's value.
    AddGenerationPrompt = 6,
    /// `continue_final_message` differs from false.
    ContinueFinalMessage = 7,
    /// `add_special_tokens` differs from false.
    AddSpecialTokens = 8,
    /// `documents` present.
    Documents = 9,
    /// `reasoning_effort` present.
    ReasoningEffort = 10,
    /// `chat_template` present.
    ChatTemplate = 11,
    /// `truncate_prompt_tokens` present.
    TruncatePromptTokens = 12,
    /// `prompt_token_ids` or `prompt_token_ids_b64` present.
    PromptTokenIds = 13,
    /// A content part of a type other than `text`.
    Multimodal = 14,
    /// More than one `text` part in one content array.
    MultiTextPart = 15,
    /// The conversation ends on an assistant message.
    TrailingAssistant = 16,
    /// A `developer` message.
    DeveloperRole = 17,
    /// A message carries non-null `tools`.
    MessageTools = 18,
    /// A message carries another non-null key the template mentions.
    MessageField = 19,
    /// Null/absent content where the template tests content for none/defined.
    NullContent = 20,
    /// The template raised (or rendered nothing) for these messages.
    TemplateRaised = 21,
    /// The render depends on the content shape engines may use.
    ContentShape = 22,
    /// A NUL byte in the text to tokenize (rendered prompt or completions text).
    NulByte = 23,
}

impl Refusal {
    /// Every refusal, in scan order.
    pub const ALL: [Refusal; 23] = [
        Refusal::Unparseable,
        Refusal::Tools,
        Refusal::CacheSalt,
        Refusal::PromptEmbeds,
        Refusal::TemplateKwargs,
        Refusal::AddGenerationPrompt,
        Refusal::ContinueFinalMessage,
        Refusal::AddSpecialTokens,
        Refusal::Documents,
        Refusal::ReasoningEffort,
        Refusal::ChatTemplate,
        Refusal::TruncatePromptTokens,
        Refusal::PromptTokenIds,
        Refusal::Multimodal,
        Refusal::MultiTextPart,
        Refusal::TrailingAssistant,
        Refusal::DeveloperRole,
        Refusal::MessageTools,
        Refusal::MessageField,
        Refusal::NullContent,
        Refusal::TemplateRaised,
        Refusal::ContentShape,
        Refusal::NulByte,
    ];

    /// The stable feature code (spec/registry.md §9.2; `kvexact_refusal_name`).
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::Unparseable => "unparseable",
            Refusal::Tools => "tools",
            Refusal::CacheSalt => "cache_salt",
            Refusal::PromptEmbeds => "prompt_embeds",
            Refusal::TemplateKwargs => "template_kwargs",
            Refusal::AddGenerationPrompt => "add_generation_prompt",
            Refusal::ContinueFinalMessage => "continue_final_message",
            Refusal::AddSpecialTokens => "add_special_tokens",
            Refusal::Documents => "documents",
            Refusal::ReasoningEffort => "reasoning_effort",
            Refusal::ChatTemplate => "chat_template",
            Refusal::TruncatePromptTokens => "truncate_prompt_tokens",
            Refusal::PromptTokenIds => "prompt_token_ids",
            Refusal::Multimodal => "multimodal",
            Refusal::MultiTextPart => "multi_text_part",
            Refusal::TrailingAssistant => "trailing_assistant",
            Refusal::DeveloperRole => "developer_role",
            Refusal::MessageTools => "message_tools",
            Refusal::MessageField => "message_field",
            Refusal::NullContent => "null_content",
            Refusal::TemplateRaised => "template_raised",
            Refusal::ContentShape => "content_shape",
            Refusal::NulByte => "nul_byte",
        }
    }

    /// The C ABI integer (`kvexact_refusal`).
    pub fn code(self) -> i32 {
        self as i32
    }

    /// The refusal with C ABI integer `code`, if any.
    pub fn from_code(code: i32) -> Option<Refusal> {
        Refusal::ALL.iter().copied().find(|r| r.code() == code)
    }

    /// The typed result class the gateway reports: an unparseable body is a plain request
    /// error (-1), every other refusal is "unsupported" (-2) (spec/registry.md §9.3).
    pub fn class(self) -> ResultClass {
        match self {
            Refusal::Unparseable => ResultClass::Request,
            _ => ResultClass::Unsupported,
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The typed bridge codes of spec/registry.md §9.3 (identical to the C ABI's `KVEXACT_ERR_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum ResultClass {
    /// -1: empty or unparseable input (request class; never changes readiness).
    Request = -1,
    /// -2: a strict-rule refusal (request class).
    Unsupported = -2,
    /// -3: profile/encoder mismatch (runtime class).
    Profile = -3,
    /// -4: no usable renderer (runtime class).
    Renderer = -4,
    /// -5: tokenizer missing or produced nothing (runtime class).
    Tokenizer = -5,
    /// -6: anything else (runtime class).
    Unknown = -6,
    /// -7: the caller's fence (reserved; never produced here).
    NotReady = -7,
}

impl ResultClass {
    /// The integer code.
    pub fn code(self) -> i32 {
        self as i32
    }

    /// Request-class codes never change readiness; runtime codes kick re-attestation.
    pub fn is_request_class(self) -> bool {
        matches!(self, ResultClass::Request | ResultClass::Unsupported)
    }
}

/// The result of an encode call that may be refused: refusals are ordinary results, not errors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome<T> {
    /// The request was encoded.
    Done(T),
    /// A strict rule refused the request.
    Refused(Refusal),
}

impl<T> Outcome<T> {
    /// The refusal, if any.
    pub fn refusal(&self) -> Option<Refusal> {
        match self {
            Outcome::Done(_) => None,
            Outcome::Refused(r) => Some(*r),
        }
    }

    /// Maps the encoded value.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Outcome<U> {
        match self {
            Outcome::Done(t) => Outcome::Done(f(t)),
            Outcome::Refused(r) => Outcome::Refused(r),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_follow_the_c_enum_order() {
        for (i, r) in Refusal::ALL.iter().enumerate() {
            assert_eq!(r.code(), i32::try_from(i + 1).unwrap_or(-1));
            assert_eq!(Refusal::from_code(r.code()), Some(*r));
        }
        assert_eq!(Refusal::from_code(0), None);
        assert_eq!(Refusal::NulByte.as_str(), "nul_byte");
        assert_eq!(Refusal::Unparseable.class().code(), -1);
        assert_eq!(Refusal::Tools.class().code(), -2);
    }
}
