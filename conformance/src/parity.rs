//! One vector file of any known format, checked under the contract of the engine release it
//! names: what `kvexact parity FILE...` reports.
//!
//! Each format has a checker with `detect` (does this document look like my format?) and a
//! check (recompute every case): block hashes ([`crate::hashes`]), KV events
//! ([`crate::events`]) and templates ([`crate::templates`]). Every file names its engine and
//! engine version; the checkers apply the contract of exactly that release ([`contract_of`]:
//! `kvprobe::contract::resolve`). A file naming a version no release covers is refused
//! (`UNKNOWN_ENGINE_VERSION`), never checked under other rules. The gateway's block-hash
//! fixtures name no engine version: they are plain blocks from a given parent, which hash the
//! same under every release's rules.

pub use crate::contract::contract_of;
use crate::{cachehit, events, hashes, nonjinja, templates, FileReport};
use serde_json::Value;
use std::path::Path;

/// What a check needs besides the file.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options<'a> {
    /// Folder of `<org>__<name>/` model directories (tokenizer.json, chat template), needed
    /// for template vectors.
    pub models: Option<&'a Path>,
    /// Template vectors: send each chat case through the strict encoder with the refusal
    /// codes it hits lifted (as far as the file's release lists them as liftable)
    /// ([`templates::check_file_lifted`]); the per-engine counts become notes.
    pub lifted: bool,
}

/// Reads `path` and checks every case of it, whatever its format; `Err` when the file cannot
/// be read, is of no known format, or names a release that cannot be resolved.
pub fn check_path(path: &Path, opts: Options<'_>) -> Result<FileReport, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read: {e}"))?;
    check_bytes(&bytes, opts)
}

/// [`check_path`] on a file's bytes.
pub fn check_bytes(bytes: &[u8], opts: Options<'_>) -> Result<FileReport, String> {
    let doc: Value = serde_json::from_slice(bytes).map_err(|e| format!("not JSON: {e}"))?;
    if cachehit::detect(&doc) {
        let r = cachehit::check(&doc)?;
        Ok(FileReport {
            cases: r.cases,
            notes: r.notes,
            unknown: r.unknown,
        })
    } else if hashes::detect(&doc).is_some() {
        check_hashes(&doc)
    } else if events::is_kv_events_file(&doc) {
        check_events(&doc)
    } else if nonjinja::detect(&doc) {
        check_nonjinja(bytes, opts)
    } else if templates::detect(&doc).is_some() {
        check_templates(bytes, &doc, opts)
    } else {
        Err("not a vector file of a known format".to_string())
    }
}

fn check_hashes(doc: &Value) -> Result<FileReport, String> {
    let mut rules = hashes::FileRules::default();
    let mut notes = Vec::new();
    match hashes::engine_version(doc) {
        Some((engine, version)) => {
            let c = contract_of(engine, version)?;
            rules.default_block_size = c.default_block_size().map(|b| b as usize);
            match engine {
                "vllm" => rules.vllm = c.vllm_rules().map_err(|e| e.to_string())?,
                "sglang" => rules.sglang = c.sglang_rules().map_err(|e| e.to_string())?,
                _ => {}
            }
            notes.push(format!("rules of {} ({engine} {version})", c.release_id()));
        }
        None if hashes::detect(doc) == Some(hashes::VectorFormat::Gateway) => {
            notes.push(
                "gateway fixtures: plain blocks from given parents (release-independent)".into(),
            );
        }
        None => return Err("the file names no engine_version".to_string()),
    }
    let cases = hashes::check_document(doc, &rules)?;
    Ok(FileReport {
        cases,
        notes,
        unknown: Vec::new(),
    })
}

fn check_events(doc: &Value) -> Result<FileReport, String> {
    let (engine, version) = events::engine_version(doc)?;
    let contract = contract_of(engine, version)?;
    let schema = contract
        .events()
        .ok_or_else(|| format!("{} has no KV events", contract.release_id()))?;
    let cases = events::check_file(doc, schema)?;
    Ok(FileReport {
        cases,
        unknown: Vec::new(),
        notes: vec![format!(
            "decoded with {} ({}, {engine} {version})",
            contract.release_id(),
            schema.format()
        )],
    })
}

/// Non-Jinja template vectors: each engine path through the renderer its release's catalog
/// entry names for the model's catalog key (`chat.renderers`: its checkpoint layout or
/// `model_type`), Jinja otherwise.
fn check_nonjinja(bytes: &[u8], opts: Options<'_>) -> Result<FileReport, String> {
    let models = opts
        .models
        .ok_or("template vectors need --models DIR (folders of <org>__<name>/ model files)")?;
    let resolve = |engine: kvtemplate::Engine, version: &str, model_type: Option<&str>| {
        let c = contract_of(engine.as_str(), version)?;
        let rules = c.chat().copied();
        let renderer = match (c.chat_renderer(model_type), rules) {
            (Ok(Some("harmony")), _) => nonjinja::PathRenderer::Harmony,
            (Ok(Some("mistral-tekken-v3")), _) => nonjinja::PathRenderer::MistralTekken,
            (Ok(Some("mistral-text-tekken-v3")), _) => nonjinja::PathRenderer::MistralTekkenText,
            (Ok(Some("mistral-spm-v7")), _) => nonjinja::PathRenderer::MistralSpmV7,
            (Ok(Some(_)), _) => nonjinja::PathRenderer::Unsupported("a renderer kvexact lacks"),
            (Err(_), _) => nonjinja::PathRenderer::Unsupported(
                "no vectors prove this release's renderer for the model type",
            ),
            (Ok(None), Some(r)) => nonjinja::PathRenderer::Jinja(r),
            (Ok(None), None) => {
                nonjinja::PathRenderer::Unsupported("no chat rules proven for this release")
            }
        };
        Ok((renderer, rules))
    };
    nonjinja::check_file(bytes, models, &resolve)
}

/// Template vectors must be read from the bytes with key order kept (tool schemas are
/// re-serialised in document order), so `bytes` is parsed again by the template checker.
fn check_templates(bytes: &[u8], doc: &Value, opts: Options<'_>) -> Result<FileReport, String> {
    let models = opts
        .models
        .ok_or("template vectors need --models DIR (folders of <org>__<name>/ model files)")?;
    let resolve = |engine: kvtemplate::Engine, version: &str| {
        let c = contract_of(engine.as_str(), version)?;
        c.chat().copied().ok_or_else(|| {
            format!(
                "{} ({} {version}) has no chat-path rules proven by vectors",
                c.release_id(),
                engine.as_str()
            )
        })
    };
    let is_template_file = matches!(
        templates::detect(doc),
        Some(templates::VectorKind::Templates | templates::VectorKind::ReleaseTemplates)
    );
    if opts.lifted && is_template_file {
        let resolve_lifts = |engine: kvtemplate::Engine, version: &str| {
            let c = contract_of(engine.as_str(), version)?;
            let rules = resolve(engine, version)?;
            Ok((rules, c.liftable()))
        };
        let lifted = templates::check_file_lifted(bytes, models, &resolve_lifts)?;
        let mut report = lifted.report;
        for (e, version, tally) in &lifted.engines {
            if tally.cases > 0 {
                report
                    .notes
                    .push(format!("lifted {} {version}: {tally}", e.as_str()));
            }
        }
        return Ok(report);
    }
    templates::check_file_with(bytes, models, &resolve)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_engine_and_version_are_refused() {
        let e = contract_of("llamacpp", "1.0").unwrap_err();
        assert!(e.starts_with("REFUSED UNKNOWN_ENGINE:"), "{e}");
        let e = contract_of("vllm", "0.0.1").unwrap_err();
        assert!(e.starts_with("REFUSED UNKNOWN_ENGINE_VERSION"), "{e}");
    }

    #[test]
    fn unknown_formats_are_errors() {
        let o = Options::default();
        assert_eq!(
            check_bytes(b"[", o).unwrap_err().split(':').next(),
            Some("not JSON")
        );
        let e = check_bytes(br#"{"engine":"vllm","cases":[]}"#, o).unwrap_err();
        assert_eq!(e, "not a vector file of a known format");
    }

    #[test]
    fn template_files_need_models() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../testdata/vectors/gateway/kv_chat_template_parity.json"
        );
        let e = check_path(Path::new(path), Options::default()).unwrap_err();
        assert!(e.contains("--models"), "{e}");
    }
}
