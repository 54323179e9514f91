//! `kvexact models list`: the `install-models.sh --list` lines (docs/contracts/registry.md §11).

use kvmodels::catalog::{ModelEntry, SupportedModels};
use kvmodels::source_tree::SourceTree;
use kvmodels::{rev12, state_str, yes_no};

use super::{print_json, Common, Status};

/// Arguments of `kvexact models list`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    #[allow(missing_docs)]
    pub common: Common,
}

/// One `--list` line: id left-justified to 28 columns, `repo@rev12`, gated, state per engine.
pub fn line(m: &ModelEntry) -> String {
    let states: Vec<String> = m
        .tuples
        .iter()
        .map(|t| format!("{}={}", t.engine, state_str(t.state)))
        .collect();
    format!(
        "{:<28} {}@{}  gated={}  {}",
        m.profile_id,
        m.repo,
        rev12(&m.revision),
        yes_no(m.gated),
        states.join(", ")
    )
}

/// The JSON form of the list.
pub fn json(c: &SupportedModels) -> serde_json::Value {
    let models: Vec<serde_json::Value> = c
        .models
        .iter()
        .map(|m| {
            let tuples: Vec<serde_json::Value> = m
                .tuples
                .iter()
                .map(|t| {
                    serde_json::json!({
                        "engine": t.engine.as_str(),
                        "engineVersion": t.engine_version,
                        "state": state_str(t.state),
                    })
                })
                .collect();
            serde_json::json!({
                "profileId": m.profile_id,
                "repo": m.repo,
                "revision": m.revision,
                "gated": m.gated,
                "tuples": tuples,
            })
        })
        .collect();
    serde_json::Value::Array(models)
}

/// Prints the list (human or JSON).
pub fn print(c: &SupportedModels, as_json: bool) {
    if as_json {
        print_json(&json(c));
    } else {
        for m in &c.models {
            println!("{}", line(m));
        }
    }
}

/// Runs `kvexact models list`.
pub fn run(a: &Args) -> Result<Status, kvmodels::Error> {
    let tree = SourceTree::load(&a.common.catalog)?;
    print(&tree.catalog, a.common.json);
    Ok(Status::Ok)
}
