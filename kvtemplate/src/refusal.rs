//! Strict-rule refusals (docs/contracts/registry.md §9.2), result classes (§9.3), and [`RefusalSet`]:
//! the codes an encoder is told to lift ([`crate::EncoderSpec::lifted`]).

/// Why a strict rule refuses a request. Discriminants are the C ABI's `kvexact_refusal`
/// values (docs/contracts/gateway-integration.md §6.1; 0 is `KVEXACT_REFUSAL_NONE`), and the variant
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
    /// The request is over one of the encoder's work bounds ([`crate::InputLimits`]; the
    /// bound crossed is in [`crate::ScratchBuf::limit_hit`]).
    InputTooLarge = 24,
    /// The text to tokenize holds the content of an added token the engine's loader may or may
    /// not keep: the profile pins no `tokenizer_config.json` and the release's loader takes
    /// its added tokens from it ([`crate::LoaderAmbiguity`]; the token is named by
    /// [`crate::Encoder::ambiguous_added_token`]). Remedy: pin the model's config
    /// (`tokenizerConfigArtifact`). Never liftable: lifting it would give unknown ids.
    AmbiguousAddedToken = 25,
}

impl Refusal {
    /// Every refusal, in scan order.
    pub const ALL: [Refusal; 25] = [
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
        Refusal::InputTooLarge,
        Refusal::AmbiguousAddedToken,
    ];

    /// The stable feature code (docs/contracts/registry.md §9.2; `kvexact_refusal_name`).
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
            Refusal::InputTooLarge => "input_too_large",
            Refusal::AmbiguousAddedToken => "ambiguous_added_token",
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

    /// The refusal whose stable feature code is `name` (exact, lower-case), if any.
    pub fn from_name(name: &str) -> Option<Refusal> {
        Refusal::ALL.iter().copied().find(|r| r.as_str() == name)
    }

    /// Whether kvtemplate can lift this code at all: its engine emulation
    /// ([`crate::Encoder::engine_chat`]) reproduces what the engines do with the feature, and
    /// the template vectors exercise it. Which of these a given engine release may lift is
    /// that release's contract (`liftable` in the catalog); this is the upper bound:
    /// [`Refusal::Tools`], [`Refusal::TemplateKwargs`], [`Refusal::AddGenerationPrompt`],
    /// [`Refusal::ContinueFinalMessage`], [`Refusal::MultiTextPart`],
    /// [`Refusal::TrailingAssistant`], [`Refusal::MessageField`], [`Refusal::NullContent`].
    ///
    /// And [`Refusal::CacheSalt`], which changes the block keys and not the prompt
    /// ([`Refusal::keys_only`]): lifted, the request is rendered on the strict path as if the
    /// salt were absent, and the caller keys the salt (a deployment's hasher does).
    ///
    /// Never liftable: codes whose feature changes more than the prompt text
    /// (`prompt_embeds`, `prompt_token_ids`, `truncate_prompt_tokens`, `add_special_tokens`,
    /// `multimodal`), features no vector exercises or the emulation does not bind
    /// (`documents`, `reasoning_effort`, `chat_template`, `developer_role`, `message_tools`),
    /// and results rather than features (`unparseable`, `template_raised`, `content_shape`,
    /// `nul_byte`, `input_too_large`, `ambiguous_added_token`).
    pub fn can_lift(self) -> bool {
        RefusalSet::LIFTABLE.contains(self)
    }

    /// Whether lifting the code changes only the request's block keys, never its prompt
    /// ([`Refusal::CacheSalt`]): no engine hands the salt to the template.
    pub fn keys_only(self) -> bool {
        self == Refusal::CacheSalt
    }

    /// The typed result class the gateway reports: an unparseable body is a plain request
    /// error (-1), every other refusal is "unsupported" (-2) (docs/contracts/registry.md §9.3).
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

impl std::str::FromStr for Refusal {
    type Err = UnknownRefusal;

    /// Parses a stable feature code (`tools`, `message_field`, …; exact, lower-case).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Refusal::from_name(s).ok_or_else(|| UnknownRefusal(s.to_string()))
    }
}

/// A name or integer that is no refusal code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown refusal code `{0}` (expected one of: {names})", names = RefusalSet::ALL)]
pub struct UnknownRefusal(pub String);

/// A set of refusal codes: the codes an encoder lifts, or the codes a request hits. A bit set
/// over [`Refusal::code`] (bit `1 << code`), so that it crosses the C ABI as one integer
/// ([`RefusalSet::bits`], [`RefusalSet::from_bits`]) and parses from the stable names
/// (`"tools,message_field"`, [`RefusalSet::parse`]) or from the integers
/// ([`RefusalSet::from_codes`]). Iterates and prints in scan order.
///
/// ```
/// use kvtemplate::{Refusal, RefusalSet};
/// let lifts = RefusalSet::parse("tools, template_kwargs").unwrap();
/// assert!(lifts.contains(Refusal::Tools) && lifts.len() == 2);
/// assert_eq!(lifts.to_string(), "tools,template_kwargs");
/// assert_eq!(RefusalSet::from_codes(&[2, 5]), Ok(lifts));
/// assert_eq!(RefusalSet::from_bits(lifts.bits()), Some(lifts));
/// assert!(RefusalSet::parse("tool").is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct RefusalSet(u32);

impl RefusalSet {
    /// No code: the strict rules exactly (the default of every encoder).
    pub const EMPTY: RefusalSet = RefusalSet(0);

    /// Every code.
    pub const ALL: RefusalSet = RefusalSet::of(&Refusal::ALL);

    /// The codes kvtemplate can lift at all ([`Refusal::can_lift`]).
    pub const LIFTABLE: RefusalSet = RefusalSet::of(&[
        Refusal::CacheSalt,
        Refusal::Tools,
        Refusal::TemplateKwargs,
        Refusal::AddGenerationPrompt,
        Refusal::ContinueFinalMessage,
        Refusal::MultiTextPart,
        Refusal::TrailingAssistant,
        Refusal::MessageField,
        Refusal::NullContent,
    ]);

    /// The set of `codes`.
    pub const fn of(codes: &[Refusal]) -> RefusalSet {
        let mut bits = 0u32;
        let mut i = 0;
        while i < codes.len() {
            bits |= 1u32 << (codes[i] as u32);
            i += 1;
        }
        RefusalSet(bits)
    }

    /// The bit mask (`1 << code` for each member): what the C ABI carries.
    pub const fn bits(self) -> u32 {
        self.0
    }

    /// The set of a bit mask; `None` if a bit names no refusal code.
    pub const fn from_bits(bits: u32) -> Option<RefusalSet> {
        if bits & !RefusalSet::ALL.0 == 0 {
            Some(RefusalSet(bits))
        } else {
            None
        }
    }

    /// The set of the C ABI integers `codes` ([`Refusal::code`]); the first integer that is no
    /// code is the error.
    pub fn from_codes(codes: &[i32]) -> Result<RefusalSet, UnknownRefusal> {
        codes.iter().try_fold(RefusalSet::EMPTY, |set, &c| {
            Refusal::from_code(c)
                .map(|r| set.with(r))
                .ok_or_else(|| UnknownRefusal(c.to_string()))
        })
    }

    /// Parses comma-separated stable names (`"tools,message_tools"`; spaces around names and
    /// empty items are ignored, so `""` is the empty set); the first unknown name is the error.
    pub fn parse(s: &str) -> Result<RefusalSet, UnknownRefusal> {
        s.split(',')
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .try_fold(RefusalSet::EMPTY, |set, n| Ok(set.with(n.parse()?)))
    }

    /// Whether `r` is a member.
    pub const fn contains(self, r: Refusal) -> bool {
        self.0 & (1u32 << (r as u32)) != 0
    }

    /// This set with `r` added.
    #[must_use]
    pub const fn with(self, r: Refusal) -> RefusalSet {
        RefusalSet(self.0 | (1u32 << (r as u32)))
    }

    /// Adds `r`.
    pub fn insert(&mut self, r: Refusal) {
        *self = self.with(r);
    }

    /// The members of both.
    #[must_use]
    pub const fn intersection(self, other: RefusalSet) -> RefusalSet {
        RefusalSet(self.0 & other.0)
    }

    /// The members of either.
    #[must_use]
    pub const fn union(self, other: RefusalSet) -> RefusalSet {
        RefusalSet(self.0 | other.0)
    }

    /// The members of `self` not in `other`.
    #[must_use]
    pub const fn difference(self, other: RefusalSet) -> RefusalSet {
        RefusalSet(self.0 & !other.0)
    }

    /// Whether every member is in `other`.
    pub const fn is_subset(self, other: RefusalSet) -> bool {
        self.0 & !other.0 == 0
    }

    /// Whether the set is empty.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The number of members.
    pub const fn len(self) -> usize {
        self.0.count_ones() as usize
    }

    /// The members in scan order.
    pub fn iter(self) -> impl Iterator<Item = Refusal> {
        Refusal::ALL.into_iter().filter(move |r| self.contains(*r))
    }

    /// The first member in scan order.
    pub fn first(self) -> Option<Refusal> {
        self.iter().next()
    }
}

impl FromIterator<Refusal> for RefusalSet {
    fn from_iter<I: IntoIterator<Item = Refusal>>(iter: I) -> Self {
        iter.into_iter().fold(RefusalSet::EMPTY, RefusalSet::with)
    }
}

impl std::str::FromStr for RefusalSet {
    type Err = UnknownRefusal;

    /// [`RefusalSet::parse`].
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        RefusalSet::parse(s)
    }
}

impl std::fmt::Display for RefusalSet {
    /// The stable names in scan order, comma-separated (no spaces); `""` for the empty set.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, r) in self.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            f.write_str(r.as_str())?;
        }
        Ok(())
    }
}

/// The typed bridge codes of docs/contracts/registry.md §9.3 (identical to the C ABI's `KVEXACT_ERR_*`).
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

    #[test]
    fn names_parse_back() {
        for r in Refusal::ALL {
            assert_eq!(r.as_str().parse::<Refusal>(), Ok(r));
        }
        assert!("Tools".parse::<Refusal>().is_err());
        let e = "nope".parse::<Refusal>().err().map(|e| e.to_string());
        assert!(
            e.as_deref()
                .is_some_and(|m| m.contains("`nope`") && m.contains("message_field")),
            "{e:?}"
        );
    }

    #[test]
    fn sets() {
        assert_eq!(RefusalSet::ALL.len(), 25);
        // Lifting it would give ids kvexact cannot know.
        assert!(!Refusal::AmbiguousAddedToken.can_lift());
        assert_eq!(RefusalSet::ALL.iter().collect::<Vec<_>>(), Refusal::ALL);
        assert_eq!(RefusalSet::parse(""), Ok(RefusalSet::EMPTY));
        assert_eq!(RefusalSet::parse(" , "), Ok(RefusalSet::EMPTY));
        let s = RefusalSet::parse("null_content,tools,tools").unwrap_or_default();
        assert_eq!(s.to_string(), "tools,null_content");
        assert_eq!(s.first(), Some(Refusal::Tools));
        assert_eq!(s.bits(), (1 << 2) | (1 << 20));
        assert_eq!(RefusalSet::from_bits(1), None);
        assert_eq!(RefusalSet::from_bits(1 << 26), None);
        assert_eq!(
            RefusalSet::from_codes(&[0]),
            Err(UnknownRefusal("0".into()))
        );
        assert_eq!(
            RefusalSet::parse("tools,bogus"),
            Err(UnknownRefusal("bogus".into()))
        );
        assert!(s.is_subset(RefusalSet::LIFTABLE));
        assert!(!RefusalSet::of(&[Refusal::Documents]).is_subset(RefusalSet::LIFTABLE));
        assert_eq!(
            RefusalSet::LIFTABLE.to_string(),
            "tools,cache_salt,template_kwargs,add_generation_prompt,continue_final_message,multi_text_part,trailing_assistant,message_field,null_content"
        );
        let t = RefusalSet::of(&[Refusal::Tools]);
        assert_eq!(s.difference(t).to_string(), "null_content");
        assert_eq!(s.intersection(t), t);
        assert_eq!(t.union(s), s);
        assert!(!Refusal::Documents.can_lift() && Refusal::Tools.can_lift());
    }
}
