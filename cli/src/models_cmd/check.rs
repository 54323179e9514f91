//! `kvexact models check`: the catalog check, the gateway's "drift gate" (`kvmodels::check`, docs/contracts/registry.md
//! §10–11): one `DRIFT: …` line per disagreement, then the summary line.

use std::path::PathBuf;

use kvmodels::check::check;
use kvmodels::source_tree::SourceTree;

use super::{print_json, Common, Status};

/// Arguments of `kvexact models check`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    #[allow(missing_docs)]
    pub common: Common,
    /// The page to compare (default `<root>/docs/SUPPORTED-MODELS.md`).
    #[arg(long, value_name = "PATH")]
    pub doc: Option<PathBuf>,
}

/// Runs `kvexact models check`.
pub fn run(a: &Args) -> Result<Status, kvmodels::Error> {
    let tree = SourceTree::load(&a.common.catalog)?;
    let doc = a.doc.clone().unwrap_or_else(|| tree.doc_path());
    let errs = check(&tree, &doc);
    if a.common.json {
        print_json(&serde_json::json!({"ok": errs.is_empty(), "drift": errs}));
    } else {
        for e in &errs {
            println!("DRIFT: {e}");
        }
        if errs.is_empty() {
            println!(
                "supported-models: manifest, page, profiles, engine manifests, template provenance, \
                 weights indexes and support catalog agree"
            );
        } else {
            println!("supported-models: {} disagreement(s)", errs.len());
        }
    }
    Ok(if errs.is_empty() {
        Status::Ok
    } else {
        Status::Failed
    })
}
