//! What a chat template's source says about itself, computed once per encoder: the facts the
//! strict scan (docs/contracts/registry.md §9.2) and vLLM's content-format detector look for.

/// Facts about one template source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateFacts {
    /// The template tests content with `is none` / `is defined` / `is undefined`
    /// (regex `content['"]?\]?\s+is\s+(not\s+)?(none|defined|undefined)`).
    pub tests_content_none: bool,
    /// The template loops over message content parts (`openai` content format).
    pub loops_over_content: bool,
    /// The source mentions `image`, `audio`, `video` or `vision` (SGLang's heuristic).
    pub mentions_media: bool,
    /// The source calls `strftime_now`.
    pub uses_strftime_now: bool,
}

/// How engines hand message content to the template (profile `templateContentFormat`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ContentFormat {
    /// Content is a string (text parts joined).
    #[default]
    String,
    /// Content is the list of parts (the template loops over it).
    OpenAi,
}

impl ContentFormat {
    /// Parses `string` / `openai`.
    pub fn parse(s: &str) -> Option<ContentFormat> {
        match s {
            "string" => Some(ContentFormat::String),
            "openai" => Some(ContentFormat::OpenAi),
            _ => None,
        }
    }
}

impl TemplateFacts {
    /// Scans `source`.
    pub fn scan(source: &str) -> TemplateFacts {
        TemplateFacts {
            tests_content_none: tests_content_none(source),
            loops_over_content: loops_over_content(source),
            mentions_media: ["image", "audio", "video", "vision"]
                .iter()
                .any(|w| source.contains(w)),
            uses_strftime_now: source.contains("strftime_now"),
        }
    }

    /// The content format vLLM's detector would pick.
    pub fn detected_format(&self) -> ContentFormat {
        if self.loops_over_content {
            ContentFormat::OpenAi
        } else {
            ContentFormat::String
        }
    }
}

fn is_go_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | b'\x0c')
}

fn skip_spaces(b: &[u8], mut i: usize) -> Option<usize> {
    let start = i;
    while b.get(i).copied().is_some_and(is_go_space) {
        i += 1;
    }
    (i > start).then_some(i)
}

fn tests_content_none(source: &str) -> bool {
    let b = source.as_bytes();
    let mut from = 0;
    while let Some(off) = source.get(from..).and_then(|s| s.find("content")) {
        let mut i = from + off + "content".len();
        from = from + off + 1;
        if matches!(b.get(i), Some(b'\'') | Some(b'"')) {
            i += 1;
        }
        if b.get(i) == Some(&b']') {
            i += 1;
        }
        let Some(j) = skip_spaces(b, i) else { continue };
        if !b.get(j..).is_some_and(|s| s.starts_with(b"is")) {
            continue;
        }
        let Some(mut k) = skip_spaces(b, j + 2) else {
            continue;
        };
        if b.get(k..).is_some_and(|s| s.starts_with(b"not")) {
            if let Some(k2) = skip_spaces(b, k + 3) {
                k = k2;
            }
        }
        let rest = b.get(k..).unwrap_or(&[]);
        if rest.starts_with(b"none")
            || rest.starts_with(b"defined")
            || rest.starts_with(b"undefined")
        {
            return true;
        }
    }
    false
}

/// vLLM-style detection of templates that iterate over `message['content']` / `content`.
fn loops_over_content(source: &str) -> bool {
    let mut from = 0;
    while let Some(off) = source.get(from..).and_then(|s| s.find("for ")) {
        let start = from + off;
        from = start + 4;
        let tail = source.get(start..).unwrap_or("");
        let stmt_end = tail.find("%}").unwrap_or(tail.len());
        let stmt = tail.get(..stmt_end).unwrap_or("");
        if let Some((_, iter)) = stmt.split_once(" in ") {
            let iter = iter.trim().trim_end_matches(['-', '+']).trim_end();
            if iter.ends_with("['content']")
                || iter.ends_with("[\"content\"]")
                || iter.ends_with(".content")
                || iter == "content"
            {
                return true;
            }
        }
    }
    false
}

fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Go regexp `\b` + QuoteMeta(word) + `\b` over `source` (ASCII word boundaries).
pub fn mentions_whole_word(source: &str, word: &str) -> bool {
    let s = source.as_bytes();
    let w = word.as_bytes();
    let boundary = |i: usize| -> bool {
        let before = i
            .checked_sub(1)
            .and_then(|j| s.get(j))
            .copied()
            .is_some_and(is_word);
        let after = s.get(i).copied().is_some_and(is_word);
        before != after
    };
    if w.is_empty() {
        return (0..=s.len()).any(boundary);
    }
    let mut from = 0;
    while let Some(off) = source.get(from..).and_then(|t| t.find(word)) {
        let at = from + off;
        if boundary(at) && boundary(at + w.len()) {
            return true;
        }
        from = at + 1;
        while from < s.len() && !source.is_char_boundary(from) {
            from += 1;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_none_regex() {
        assert!(tests_content_none("{% if message['content'] is none %}"));
        assert!(tests_content_none("{% if message.content is not none %}"));
        assert!(tests_content_none("{% if content is defined %}"));
        assert!(tests_content_none(
            "{%if message[\"content\"]  is\tundefined%}"
        ));
        assert!(!tests_content_none("{% if content is string %}"));
        assert!(!tests_content_none("{% if contentis none %}"));
        assert!(!tests_content_none("{{ message['content'] }}"));
    }

    #[test]
    fn whole_words() {
        assert!(mentions_whole_word("{{ message.name }}", "name"));
        assert!(!mentions_whole_word("{{ message.names }}", "name"));
        assert!(!mentions_whole_word("{{ rename }}", "name"));
        assert!(mentions_whole_word("x tool_call_id y", "tool_call_id"));
        assert!(!mentions_whole_word("x tool_call_ids y", "tool_call_id"));
        assert!(!mentions_whole_word("a -x b", "-x"));
        assert!(mentions_whole_word("a b-x b", "-x"));
        assert!(!mentions_whole_word("a é", "é"));
    }

    #[test]
    fn content_loops() {
        assert!(loops_over_content("{% for part in message['content'] %}"));
        assert!(loops_over_content("{%- for c in message.content -%}"));
        assert!(!loops_over_content(
            "{% for message in messages %}{{ message['content'] }}"
        ));
    }
}
