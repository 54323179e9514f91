//! `kvexact registry verify|show`: load a registry directory exactly as the gateway would and
//! report the generation, or the refusal naming the file.
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use kvprofile_core::{
    ArtifactValidator, AttestationCheck, Generation, LoadOptions, LoadedProfile, RegistryError,
    TrustPolicy,
};
use kvtemplate::KvtemplateValidator;

/// `kvexact registry` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Load a registry directory as the gateway would (trust policy, strict parse, digests,
    /// manifests and probe fixtures); print its profiles and setDigest, or `REFUSED <code>:
    /// <path>: <detail>` and exit 2.
    Verify {
        /// Registry root.
        dir: PathBuf,
        /// Owner uid trusted besides root (default: the current effective uid, as the gateway).
        #[arg(long, value_name = "UID")]
        trusted_uid: Option<u32>,
        /// Print the discovery document as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Show one profile of a registry with its resolved artifacts' digests and sizes.
    Show {
        /// Registry root.
        dir: PathBuf,
        /// Profile id.
        profile_id: String,
        /// Owner uid trusted besides root (default: the current effective uid).
        #[arg(long, value_name = "UID")]
        trusted_uid: Option<u32>,
        /// Print JSON instead of YAML.
        #[arg(long)]
        json: bool,
    },
}

/// The validator the CLI publishes with: kvtemplate's, so every template is compiled with the
/// very environment the encoder renders with and every tokenizer is built (docs/contracts/registry.md §2, §7).
fn validator() -> (&'static dyn ArtifactValidator, &'static str) {
    static KVTEMPLATE: KvtemplateValidator = KvtemplateValidator;
    (
        &KVTEMPLATE,
        "kvtemplate (templates compiled with the rendering environment, tokenizers built, \
         completionsBos ids resolved)",
    )
}

fn options(trusted_uid: Option<u32>, attestation: AttestationCheck) -> LoadOptions {
    let policy = match trusted_uid {
        Some(uid) => TrustPolicy::with_trusted_uid(uid),
        None => TrustPolicy::for_current_user(),
    };
    LoadOptions {
        policy,
        attestation,
    }
}

fn refused(e: &RegistryError) -> ExitCode {
    eprintln!("REFUSED {}: {}: {}", e.code(), e.path(), e.detail());
    ExitCode::from(2)
}

fn load(
    dir: &Path,
    trusted_uid: Option<u32>,
    att: AttestationCheck,
) -> Result<Generation, ExitCode> {
    let (v, _) = validator();
    Generation::load(dir, 1, &options(trusted_uid, att), v).map_err(|e| refused(&e))
}

fn print_json(v: &impl serde::Serialize) -> ExitCode {
    match serde_json::to_string_pretty(v) {
        Ok(s) => {
            println!("{s}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}

fn attestation_summary(p: &LoadedProfile) -> String {
    let Some(a) = &p.attestation else {
        return String::new();
    };
    let manifest = match &a.manifest {
        Some(m) => format!("engine {} ({})", m.manifest.engine_version, m.path),
        None => "none".into(),
    };
    let sets: Vec<String> = a
        .fixture_sets
        .iter()
        .map(|s| format!("{} {}", s.engine, s.fixtures.len()))
        .collect();
    let sets = if sets.is_empty() {
        "none".into()
    } else {
        sets.join(", ")
    };
    format!("  manifest: {manifest}\n  fixtures: {sets}\n")
}

/// The warning of a profile that pins no `tokenizer_config.json` while its tokenizer has added
/// tokens an engine's loader may keep or not (docs/contracts/registry.md §9.2
/// `ambiguous_added_token`): texts holding one are refused under every release whose loader
/// reads the config (every reference release).
fn loader_warning(p: &LoadedProfile) -> Option<String> {
    if p.artifacts.tokenizer_config.is_some() {
        return None;
    }
    let parsed = kvtemplate::ParsedTokenizer::of(p)?;
    let doubt = kvtemplate::LoaderAmbiguity::of(&parsed.encoder)?;
    let shown: Vec<String> = doubt
        .tokens()
        .iter()
        .take(6)
        .map(|(id, c)| format!("{id} {c:?}"))
        .collect();
    Some(format!(
        "WARNING {}: no tokenizerConfigArtifact, and {} added token(s) ({}{}) are ones an \
         engine's tokenizer loader keeps or not as the model's tokenizer_config.json says: \
         texts holding one are refused (ambiguous_added_token) under every release whose loader \
         reads the config; pin tokenizerConfigArtifact",
        p.profile.profile_id,
        doubt.tokens().len(),
        shown.join(", "),
        if doubt.tokens().len() > shown.len() {
            ", …"
        } else {
            ""
        }
    ))
}

fn verify(dir: &Path, trusted_uid: Option<u32>, json: bool) -> ExitCode {
    let (_, vname) = validator();
    let g = match load(dir, trusted_uid, AttestationCheck::AtPublish) {
        Ok(g) => g,
        Err(code) => return code,
    };
    if json {
        eprintln!("validator: {vname}");
        for p in g.profiles() {
            if let Some(w) = loader_warning(p) {
                eprintln!("{w}");
            }
        }
        return print_json(&g.discovery());
    }
    println!("validator: {vname}");
    println!("generation {}: {} profile(s)", g.number(), g.len());
    for p in g.profiles() {
        let e = p.discovery_entry();
        let apis: Vec<String> = e
            .supported_apis
            .iter()
            .map(|a| format!("{a:?}").to_lowercase())
            .collect();
        println!("{}", e.profile_id);
        println!("  baseModel: {}", e.base_model);
        if !e.allowed_aliases.is_empty() {
            println!("  aliases: {}", e.allowed_aliases.join(", "));
        }
        println!("  apis: {}", apis.join(", "));
        println!("  tokenizerSha256: {}", e.tokenizer_sha256);
        if !e.template_sha256.is_empty() {
            println!(
                "  templateSha256: {} ({})",
                e.template_sha256, e.template_content_format
            );
        }
        if let Some(bos) = p.artifacts.bos_token_id {
            println!("  completionsBos id: {bos}");
        }
        print!("{}", attestation_summary(p));
        if let Some(w) = loader_warning(p) {
            println!("  {w}");
        }
    }
    println!("setDigest: {}", g.set_digest());
    ExitCode::SUCCESS
}

#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct ShowArtifact<'a> {
    role: &'static str,
    path: &'a str,
    sha256: &'a str,
    size: u64,
}

#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Show<'a> {
    profile: &'a kvprofile_core::Profile,
    document: &'a str,
    document_sha256: &'a str,
    artifacts: Vec<ShowArtifact<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    bos_token_id: Option<u32>,
}

fn show(dir: &Path, id: &str, trusted_uid: Option<u32>, json: bool) -> ExitCode {
    let g = match load(dir, trusted_uid, AttestationCheck::Deferred) {
        Ok(g) => g,
        Err(code) => return code,
    };
    let Some(p) = g.profile(id) else {
        return refused(&RegistryError::UnknownProfile {
            path: id.to_string(),
        });
    };
    let a = &p.artifacts;
    let mut artifacts = vec![ShowArtifact {
        role: "tokenizer",
        path: &a.tokenizer.receipt.relative_path,
        sha256: &a.tokenizer.receipt.sha256,
        size: a.tokenizer.receipt.size,
    }];
    if let Some(t) = &a.template {
        artifacts.push(ShowArtifact {
            role: "template",
            path: &t.receipt.relative_path,
            sha256: &t.receipt.sha256,
            size: t.receipt.size,
        });
    }
    let out = Show {
        profile: &p.profile,
        document: &p.document_path,
        document_sha256: &p.document_sha256,
        artifacts,
        bos_token_id: a.bos_token_id,
    };
    if json {
        return print_json(&out);
    }
    match serde_yaml::to_string(&out) {
        Ok(s) => {
            print!("{s}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}

/// Runs the subcommand.
pub fn run(cmd: &Command) -> ExitCode {
    match cmd {
        Command::Verify {
            dir,
            trusted_uid,
            json,
        } => verify(dir, *trusted_uid, *json),
        Command::Show {
            dir,
            profile_id,
            trusted_uid,
            json,
        } => show(dir, profile_id, *trusted_uid, *json),
    }
}
