//! Harmony messages to token ids (docs/contracts/templates.md §13.1): every message is
//! `<|start|>` header `<|message|>` content `<|end|>` (`<|call|>` for an assistant message to a
//! recipient), and the prompt ends with `<|start|>assistant`. Header and content texts are
//! encoded one piece at a time with the ordinary encoder (special-token text in a message is
//! plain text).

use super::request::{Author, Conversation, Message};
use super::HarmonyConfig;

/// One piece of a rendered prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Piece {
    /// A formatting token.
    Special(Special),
    /// Text encoded on its own.
    Text(String),
}

/// The formatting tokens harmony uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Special {
    Start,
    Message,
    End,
    Channel,
    Call,
}

impl Special {
    /// The token's text in the vocabulary.
    pub(crate) const fn text(self) -> &'static str {
        match self {
            Special::Start => "<|start|>",
            Special::Message => "<|message|>",
            Special::End => "<|end|>",
            Special::Channel => "<|channel|>",
            Special::Call => "<|call|>",
        }
    }

    /// Every formatting token.
    pub(crate) const ALL: [Special; 5] = [
        Special::Start,
        Special::Message,
        Special::End,
        Special::Channel,
        Special::Call,
    ];
}

/// The system message's text.
fn system_text(conv: &Conversation, config: &HarmonyConfig, date: &str) -> String {
    let mut identity = config.model_identity.clone();
    if let Some(i) = &conv.system_instructions {
        identity.push('\n');
        identity.push_str(i);
    }
    let mut channels = "# Valid channels: analysis, commentary, final. Channel must be included \
                        for every message."
        .to_string();
    if conv.has_function_tools {
        channels.push_str("\nCalls to these tools must go to the commentary channel: 'functions'.");
    }
    format!(
        "{identity}\nKnowledge cutoff: {}\nCurrent date: {date}\n\nReasoning: {}\n\n{channels}",
        config.knowledge_cutoff,
        conv.effort.as_str()
    )
}

fn push_message(out: &mut Vec<Piece>, m: &Message) {
    out.push(Piece::Special(Special::Start));
    let is_tool = matches!(m.author, Author::Tool(_));
    out.push(Piece::Text(
        match &m.author {
            Author::System => "system",
            Author::Developer => "developer",
            Author::User => "user",
            Author::Assistant => "assistant",
            Author::Tool(name) => name.as_str(),
        }
        .to_string(),
    ));
    // vLLM keeps the recipient of an assistant message before the channel (its legacy tool
    // call header) and the one of a tool result after it (oss-harmony 0.0.11).
    if let (Some(r), false) = (&m.recipient, is_tool) {
        out.push(Piece::Text(format!(" to={r}")));
    }
    if let Some(c) = m.channel {
        out.push(Piece::Special(Special::Channel));
        out.push(Piece::Text(c.to_string()));
    }
    if let (Some(r), true) = (&m.recipient, is_tool) {
        out.push(Piece::Text(format!(" to={r}")));
    }
    if let Some(t) = m.content_type {
        out.push(Piece::Text(format!(" {t}")));
    }
    out.push(Piece::Special(Special::Message));
    for c in &m.content {
        out.push(Piece::Text(c.clone()));
    }
    let end = if m.author == Author::Assistant && m.recipient.is_some() {
        Special::Call
    } else {
        Special::End
    };
    out.push(Piece::Special(end));
}

/// The pieces of the prompt vLLM renders for `conv` on `date` (`YYYY-MM-DD`).
pub(crate) fn pieces(conv: &Conversation, config: &HarmonyConfig, date: &str) -> Vec<Piece> {
    let mut out = Vec::new();
    let system = Message {
        author: Author::System,
        recipient: None,
        channel: None,
        content_type: None,
        content: vec![system_text(conv, config, date)],
    };
    push_message(&mut out, &system);
    if let Some((instr, tools)) = &conv.developer {
        let mut sections = Vec::new();
        if let Some(i) = instr {
            sections.push("# Instructions".to_string());
            sections.push(i.clone());
        }
        if let Some(t) = tools {
            sections.push(t.clone());
        }
        let dev = Message {
            author: Author::Developer,
            recipient: None,
            channel: None,
            content_type: None,
            content: vec![sections.join("\n\n")],
        };
        push_message(&mut out, &dev);
    }
    for m in &conv.messages {
        push_message(&mut out, m);
    }
    out.push(Piece::Special(Special::Start));
    out.push(Piece::Text("assistant".to_string()));
    out
}

/// The text form of `pieces` (what harmony's `decode_utf8` gives for the ids).
pub(crate) fn text_of(pieces: &[Piece]) -> String {
    let mut s = String::new();
    for p in pieces {
        match p {
            Piece::Special(t) => s.push_str(t.text()),
            Piece::Text(t) => s.push_str(t),
        }
    }
    s
}
