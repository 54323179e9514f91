//! [`ChatRules`]: the parts of an engine's OpenAI chat path that change from one engine release
//! to the next, as data an [`crate::EncoderSpec`] carries instead of a hard-wired `match`.
//!
//! Everything else the chat emulation does per engine (text-part separator, SGLang's
//! assistant-turn rewrite, TRT-LLM's `media: []`, …) is the same in every release the vectors
//! cover, so it stays with [`crate::Engine`]. A rule lands here when two releases of one engine
//! are proven by vectors to differ in it (`testdata/vectors/versions/<engine>-<version>/`).
//!
//! Each rule is an enum with a stable lower-case name ([`ToolSerialization::as_str`],
//! [`std::str::FromStr`]) so that a catalog can name it, e.g. `toolSerialization:
//! sglang-request-keys`.
//!
//! ```
//! use kvtemplate::{ChatRules, TemplateErrorClass, ToolSerialization};
//! use kvtemplate::Engine;
//!
//! // SGLang 0.5.23: the reference rules with the new tool serialisation.
//! let rules = ChatRules::reference(Engine::Sglang)
//!     .expect("SGLang has a chat path")
//!     .with_tool_serialization("sglang-request-keys".parse().unwrap());
//! assert_eq!(rules.tool_serialization, ToolSerialization::SglangRequestKeys);
//! assert_eq!(rules.template_error_class, TemplateErrorClass::ValueError);
//! assert!(rules.check_engine(Engine::Sglang).is_ok());
//! ```

use kvprofile_core::Engine;
use std::fmt;
use std::str::FromStr;

/// How an engine hands the request's `tools` to the chat template (what its pydantic models'
/// `model_dump()` produces). Vector cases that prove a variant are the tool cases of the
/// profiles whose templates print tools (Qwen2.5, Qwen3, Llama 3.1): `tools_request`,
/// `tools_request_with_system`, `tool_call_history`, …; Gemma 2 and R1-distill templates do not
/// print tools, so they cannot tell the variants apart.
///
/// Key order within `function` is not exercised by the vectors (every vector tool sends
/// `name, description, parameters` in that order); the orders below are the engines' model
/// definitions, covered by unit tests only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ToolSerialization {
    /// `vllm-set-fields` — vLLM, every release whose chat path has vectors (0.29.0, 0.31.0
    /// reference, 0.33.0): `{"type", "function": {…}}` where `function` holds only the fields
    /// the client set (`name`, then `description`, `parameters`, `strict` when sent), in that
    /// order. Proven by `templates/qwen3-06b-default-v1.json` case `tools_request`
    /// (`engine_token_ids.vllm`).
    VllmSetFields,
    /// `sglang-pydantic-dump` — SGLang up to 0.5.22 (chat-path vectors: 0.5.19 reference,
    /// 0.5.20 identical; 0.5.18, 0.5.21 and 0.5.22 have no chat-path vectors): every field of the
    /// `Function` model, `description, name, parameters, "strict": false` (absent fields as
    /// `null`), and `"defer_loading": null` after `"function"` on the tool. Proven by
    /// `templates/qwen3-06b-default-v1.json` case `tools_request` (`engine_token_ids.sglang`).
    SglangPydanticDump,
    /// `sglang-request-keys` — SGLang 0.5.23: `function` keeps only the fields the client sent,
    /// in the client's order (`strict` included only when sent), plus `"defer_loading": null`
    /// after `"function"` on the tool. Proven by
    /// `versions/sglang-0.5.23/templates/qwen3-06b-default-v1.json` case `tools_request`
    /// (`differs_from_reference.sglang: [ids, rendered]`).
    SglangRequestKeys,
    /// `trtllm-strict-null` — TensorRT-LLM 1.3.0rc29 (reference): `name, description,
    /// parameters, strict` with absent fields as `null` (so `"strict": null` on every
    /// function). Proven by `templates/qwen3-06b-default-v1.json` case `tools_request`
    /// (`engine_token_ids.trtllm`).
    TrtllmStrictNull,
}

impl ToolSerialization {
    /// Every variant.
    pub const ALL: [ToolSerialization; 4] = [
        ToolSerialization::VllmSetFields,
        ToolSerialization::SglangPydanticDump,
        ToolSerialization::SglangRequestKeys,
        ToolSerialization::TrtllmStrictNull,
    ];

    /// The stable name: `vllm-set-fields`, `sglang-pydantic-dump`, `sglang-request-keys`,
    /// `trtllm-strict-null`.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolSerialization::VllmSetFields => "vllm-set-fields",
            ToolSerialization::SglangPydanticDump => "sglang-pydantic-dump",
            ToolSerialization::SglangRequestKeys => "sglang-request-keys",
            ToolSerialization::TrtllmStrictNull => "trtllm-strict-null",
        }
    }

    /// The engine family whose releases show this behaviour.
    pub fn engine(self) -> Engine {
        match self {
            ToolSerialization::VllmSetFields => Engine::Vllm,
            ToolSerialization::SglangPydanticDump | ToolSerialization::SglangRequestKeys => {
                Engine::Sglang
            }
            ToolSerialization::TrtllmStrictNull => Engine::Trtllm,
        }
    }

    /// Whether the tool object gets `"defer_loading"` after `"function"` (SGLang's `Tool`).
    pub fn adds_defer_loading(self) -> bool {
        self.engine() == Engine::Sglang
    }
}

/// The exception class an engine names when the chat template raises (`raise_exception` in
/// Jinja): the engine reports `"<class>: <message>"`, the message being the template's own text
/// in every release checked. Proven by the Gemma 2 system-role and alternation cases
/// (`system_user`, `gemma_non_alternating_error`, …) and Llama 3.1
/// `llama_tools_without_user_message_error` (`engine_errors.<engine>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TemplateErrorClass {
    /// `value-error` — `ValueError`: vLLM 0.29.0 (`vllm-0.29.0/templates/gemma2-9b-it-v1.json`
    /// case `system_user`, `differs_from_reference.vllm: [error]`; releases before 0.29.0 have
    /// no chat-path vectors) and SGLang in every release checked (0.5.19 reference, 0.5.20,
    /// 0.5.23: `templates/gemma2-9b-it-v1.json` case `system_user`, `engine_errors.sglang`).
    ValueError,
    /// `vllm-validation-error` — `VLLMValidationError`: vLLM from 0.30.0 on (vectors: 0.31.0
    /// reference, 0.33.0 identical; `templates/gemma2-9b-it-v1.json` case `system_user`,
    /// `engine_errors.vllm`).
    VllmValidationError,
    /// `template-error` — Jinja's `TemplateError`, unwrapped: TensorRT-LLM 1.3.0rc29
    /// (`templates/gemma2-9b-it-v1.json` case `system_user`, `engine_errors.trtllm`).
    TemplateError,
}

impl TemplateErrorClass {
    /// Every variant.
    pub const ALL: [TemplateErrorClass; 3] = [
        TemplateErrorClass::ValueError,
        TemplateErrorClass::VllmValidationError,
        TemplateErrorClass::TemplateError,
    ];

    /// The stable name: `value-error`, `vllm-validation-error`, `template-error`.
    pub fn as_str(self) -> &'static str {
        match self {
            TemplateErrorClass::ValueError => "value-error",
            TemplateErrorClass::VllmValidationError => "vllm-validation-error",
            TemplateErrorClass::TemplateError => "template-error",
        }
    }

    /// The Python class name the engine prints: `ValueError`, `VLLMValidationError`,
    /// `TemplateError`.
    pub fn python_name(self) -> &'static str {
        match self {
            TemplateErrorClass::ValueError => "ValueError",
            TemplateErrorClass::VllmValidationError => "VLLMValidationError",
            TemplateErrorClass::TemplateError => "TemplateError",
        }
    }

    /// Whether some release of `engine` reports template exceptions with this class.
    pub fn seen_in(self, engine: Engine) -> bool {
        match self {
            TemplateErrorClass::ValueError => matches!(engine, Engine::Vllm | Engine::Sglang),
            TemplateErrorClass::VllmValidationError => engine == Engine::Vllm,
            TemplateErrorClass::TemplateError => engine == Engine::Trtllm,
        }
    }

    /// The engine's error text for a template that raised `message`.
    pub fn format(self, message: &str) -> String {
        format!("{}: {message}", self.python_name())
    }
}

/// What an engine release does with an empty `tools` list (`"tools": []`) on chat
/// completions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EmptyTools {
    /// `refused` — kvexact refuses it (`tools`, never lifted): vLLM up to 0.33 rejects it
    /// (`ChatCompletionRequest.check_tool_usage`: "`tools` must not be an empty array", HTTP
    /// 400); no vector shows what SGLang or TensorRT-LLM render for it.
    Refused,
    /// `omitted` — vLLM 0.34: an empty list is treated as omitted unless `tool_choice` names
    /// a function (`check_tool_usage` sets `tools` to `None`, `"auto"`/`"required"` become
    /// `"none"`), so the prompt is the one without tools. From the 0.34.0 wheel's code; no
    /// template vector has an empty `tools` list (`versions/README.md`, vLLM 0.34.0).
    Omitted,
}

impl EmptyTools {
    /// Every variant.
    pub const ALL: [EmptyTools; 2] = [EmptyTools::Refused, EmptyTools::Omitted];

    /// The stable name: `refused`, `omitted`.
    pub fn as_str(self) -> &'static str {
        match self {
            EmptyTools::Refused => "refused",
            EmptyTools::Omitted => "omitted",
        }
    }
}

impl FromStr for EmptyTools {
    type Err = UnknownRule;

    /// Parses a stable name (exact, lower-case).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        EmptyTools::ALL
            .into_iter()
            .find(|v| v.as_str() == s)
            .ok_or_else(|| unknown("emptyTools", s, Self::ALL.iter().map(|v| v.as_str())))
    }
}

impl fmt::Display for EmptyTools {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A rule name that is not one of the stable names.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {rule} `{name}` (expected one of: {expected})")]
pub struct UnknownRule {
    /// Which rule (`toolSerialization`, `templateErrorClass`).
    pub rule: &'static str,
    /// The name given.
    pub name: String,
    /// The accepted names, comma-separated.
    pub expected: String,
}

fn unknown(
    rule: &'static str,
    name: &str,
    names: impl Iterator<Item = &'static str>,
) -> UnknownRule {
    UnknownRule {
        rule,
        name: name.to_string(),
        expected: names.collect::<Vec<_>>().join(", "),
    }
}

impl FromStr for ToolSerialization {
    type Err = UnknownRule;

    /// Parses a stable name (exact, lower-case).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ToolSerialization::ALL
            .into_iter()
            .find(|v| v.as_str() == s)
            .ok_or_else(|| unknown("toolSerialization", s, Self::ALL.iter().map(|v| v.as_str())))
    }
}

impl FromStr for TemplateErrorClass {
    type Err = UnknownRule;

    /// Parses a stable name (exact, lower-case).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        TemplateErrorClass::ALL
            .into_iter()
            .find(|v| v.as_str() == s)
            .ok_or_else(|| {
                unknown(
                    "templateErrorClass",
                    s,
                    Self::ALL.iter().map(|v| v.as_str()),
                )
            })
    }
}

impl fmt::Display for ToolSerialization {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for TemplateErrorClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The release-dependent behaviour of one engine release's chat path. Build it from
/// [`ChatRules::reference`] and the `with_*` methods (the struct is `#[non_exhaustive]`: rules
/// are added when vectors prove a new difference, and a new rule's default is the reference
/// behaviour).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct ChatRules {
    /// How `tools` reach the template.
    pub tool_serialization: ToolSerialization,
    /// The class named in the engine's error when the template raises.
    pub template_error_class: TemplateErrorClass,
    /// What an empty `tools` list does (reference: [`EmptyTools::Refused`]).
    pub empty_tools: EmptyTools,
}

impl ChatRules {
    /// The reference releases' rules — vLLM 0.31.0, SGLang 0.5.19, TensorRT-LLM 1.3.0rc29 — the
    /// releases `testdata/vectors/templates/*.json` record.
    /// `None` for llama.cpp, which has no chat path kvexact reproduces.
    pub fn reference(engine: Engine) -> Option<ChatRules> {
        Some(match engine {
            Engine::Vllm => ChatRules {
                tool_serialization: ToolSerialization::VllmSetFields,
                template_error_class: TemplateErrorClass::VllmValidationError,
                empty_tools: EmptyTools::Refused,
            },
            Engine::Sglang => ChatRules {
                tool_serialization: ToolSerialization::SglangPydanticDump,
                template_error_class: TemplateErrorClass::ValueError,
                empty_tools: EmptyTools::Refused,
            },
            Engine::Trtllm => ChatRules {
                tool_serialization: ToolSerialization::TrtllmStrictNull,
                template_error_class: TemplateErrorClass::TemplateError,
                empty_tools: EmptyTools::Refused,
            },
            Engine::Llamacpp => return None,
        })
    }

    /// The version string of `engine`'s reference release (`0.31.0`, `0.5.19`, `1.3.0rc29`),
    /// as the vector files' `engine_truth.engines.<engine>.version` spells it.
    /// `None` for llama.cpp.
    pub fn reference_version(engine: Engine) -> Option<&'static str> {
        match engine {
            Engine::Vllm => Some("0.31.0"),
            Engine::Sglang => Some("0.5.19"),
            Engine::Trtllm => Some("1.3.0rc29"),
            Engine::Llamacpp => None,
        }
    }

    /// These rules with another tool serialisation.
    pub fn with_tool_serialization(mut self, tool_serialization: ToolSerialization) -> ChatRules {
        self.tool_serialization = tool_serialization;
        self
    }

    /// These rules with another template-exception class.
    pub fn with_template_error_class(mut self, class: TemplateErrorClass) -> ChatRules {
        self.template_error_class = class;
        self
    }

    /// These rules with another empty-`tools` rule.
    pub fn with_empty_tools(mut self, empty_tools: EmptyTools) -> ChatRules {
        self.empty_tools = empty_tools;
        self
    }

    /// Fails when a rule belongs to another engine family (e.g. `sglang-request-keys` on a
    /// vLLM contract): such a combination is no release of any engine, only a catalog typo.
    pub fn check_engine(&self, engine: Engine) -> Result<(), String> {
        let ts = self.tool_serialization;
        if ts.engine() != engine {
            return Err(format!(
                "toolSerialization {ts} is {} behaviour; the contract engine is {}",
                ts.engine().as_str(),
                engine.as_str()
            ));
        }
        let class = self.template_error_class;
        if !class.seen_in(engine) {
            return Err(format!(
                "templateErrorClass {class} is not reported by any {} release",
                engine.as_str()
            ));
        }
        if self.empty_tools == EmptyTools::Omitted && engine != Engine::Vllm {
            return Err(format!(
                "emptyTools omitted is vLLM behaviour; the contract engine is {}",
                engine.as_str()
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for v in ToolSerialization::ALL {
            assert_eq!(v.as_str().parse::<ToolSerialization>(), Ok(v));
            assert_eq!(v.to_string(), v.as_str());
        }
        for v in EmptyTools::ALL {
            assert_eq!(v.as_str().parse::<EmptyTools>(), Ok(v));
            assert_eq!(v.to_string(), v.as_str());
        }
        for v in TemplateErrorClass::ALL {
            assert_eq!(v.as_str().parse::<TemplateErrorClass>(), Ok(v));
            assert_eq!(v.to_string(), v.as_str());
        }
    }

    #[test]
    fn unknown_names_are_refused_with_the_choices() {
        let e = "SGLang-Request-Keys".parse::<ToolSerialization>().err();
        let msg = e.map(|e| e.to_string()).unwrap_or_default();
        assert!(msg.contains("toolSerialization"), "{msg}");
        assert!(msg.contains("sglang-request-keys"), "{msg}");
        assert!("ValueError".parse::<TemplateErrorClass>().is_err());
    }

    #[test]
    fn reference_rules_fit_their_engine() {
        for e in Engine::WITH_KV_PLANE {
            let r = ChatRules::reference(e).unwrap();
            assert_eq!(r.check_engine(e), Ok(()));
            assert_eq!(r.tool_serialization.engine(), e);
            assert!(ChatRules::reference_version(e).is_some());
        }
        assert_eq!(ChatRules::reference(Engine::Llamacpp), None);
        assert_eq!(ChatRules::reference_version(Engine::Llamacpp), None);
    }

    #[test]
    fn foreign_rules_are_refused() {
        let r = ChatRules::reference(Engine::Vllm)
            .unwrap()
            .with_tool_serialization(ToolSerialization::SglangRequestKeys);
        assert!(r.check_engine(Engine::Vllm).is_err());
        let r = ChatRules::reference(Engine::Trtllm)
            .unwrap()
            .with_template_error_class(TemplateErrorClass::ValueError);
        assert!(r.check_engine(Engine::Trtllm).is_err());
        let r = ChatRules::reference(Engine::Vllm)
            .unwrap()
            .with_template_error_class(TemplateErrorClass::ValueError);
        assert_eq!(r.check_engine(Engine::Vllm), Ok(()));
    }

    #[test]
    fn error_text() {
        assert_eq!(
            TemplateErrorClass::VllmValidationError.format("System role not supported"),
            "VLLMValidationError: System role not supported"
        );
    }
}
