//! `kvexact models render`: writes `docs/SUPPORTED-MODELS.md` from the catalog
//! (`kvmodels::page`, docs/contracts/registry.md §10.1).

use std::path::PathBuf;

use kvmodels::page::{render, write_page};
use kvmodels::source_tree::SourceTree;

use super::{print_json, Common, Status};

/// Arguments of `kvexact models render`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    #[allow(missing_docs)]
    pub common: Common,
    /// Where to write the page (default `<root>/docs/SUPPORTED-MODELS.md`).
    #[arg(long, value_name = "PATH")]
    pub doc: Option<PathBuf>,
    /// Print the page on stdout instead of writing it.
    #[arg(long, conflicts_with = "doc")]
    pub stdout: bool,
}

/// Runs `kvexact models render`.
pub fn run(a: &Args) -> Result<Status, kvmodels::Error> {
    let tree = SourceTree::load(&a.common.catalog)?;
    if a.stdout {
        print!("{}", render(&tree)?);
        return Ok(Status::Ok);
    }
    let path = a.doc.clone().unwrap_or_else(|| tree.doc_path());
    let written = write_page(&tree, &path)?;
    if a.common.json {
        print_json(&serde_json::json!({
            "ok": true,
            "path": written.path.display().to_string(),
            "sha256": written.sha256,
        }));
    } else {
        println!("wrote {}", tree.shown(&written.path));
    }
    Ok(Status::Ok)
}
