//! `kvexact models verify-weights PROFILE DIR` (`kvmodels::weights`,
//! docs/contracts/registry.md §10.2): `MISSING` / `MISMATCH` lines in index order, then the
//! summary; a progress bar on stderr only when stderr is a terminal.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;

use kvmodels::gb;
use kvmodels::weights::{verify_snapshot, FileCheck, IndexSource, Progress};

use super::{print_json, Common, Status};

/// Arguments of `kvexact models verify-weights`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    #[allow(missing_docs)]
    pub common: Common,
    /// Profile id (names the index `weights/<PROFILE>.index`).
    pub profile: String,
    /// The snapshot directory to check.
    pub dir: PathBuf,
    /// Use this index file instead of the catalog's (no catalog is read then).
    #[arg(long, value_name = "FILE")]
    pub index: Option<PathBuf>,
}

/// Draws one frame of the progress bar.
fn draw(err: &mut dyn Write, done: usize, n: usize, bytes: u64, total: u64) {
    const WIDTH: u64 = 30;
    let filled = bytes
        .saturating_mul(WIDTH)
        .checked_div(total)
        .unwrap_or(WIDTH);
    let bar: String = (0..WIDTH)
        .map(|i| if i < filled { '#' } else { '.' })
        .collect();
    let pct = bytes.saturating_mul(100).checked_div(total).unwrap_or(100);
    let _ = write!(
        err,
        "\r[{bar}] {pct:>3}%  {done}/{n} files  {} / {}",
        gb(bytes),
        gb(total)
    );
    let _ = err.flush();
}

/// Runs `kvexact models verify-weights`.
pub fn run(a: &Args) -> Result<Status, kvmodels::Error> {
    let source = match &a.index {
        Some(p) => IndexSource::File(p),
        None => IndexSource::Catalog {
            catalog: &a.common.catalog,
            profile_id: &a.profile,
        },
    };
    let threads = std::thread::available_parallelism().map_or(1, usize::from);
    let bar = std::io::stderr().is_terminal() && !a.common.json;
    let draw_bar = |p: Progress| {
        let mut err = std::io::stderr();
        draw(&mut err, p.done_files, p.files, p.bytes, p.total);
        if p.finished() {
            let _ = writeln!(err);
        }
    };
    let report = verify_snapshot(
        source,
        &a.dir,
        threads,
        bar.then_some(&draw_bar as &(dyn Fn(Progress) + Sync)),
    )?;
    let n = report.files.len();
    let matched = report.matched();
    if a.common.json {
        print_json(&serde_json::json!({
            "ok": report.ok(),
            "profileId": a.profile,
            "index": report.index,
            "files": n,
            "matched": matched,
            "missing": report.missing(),
            "mismatch": report.mismatch(),
        }));
    } else {
        for (name, r) in &report.files {
            match r {
                FileCheck::Match => {}
                FileCheck::Missing => println!("MISSING  {name}"),
                FileCheck::Mismatch => println!("MISMATCH {name}"),
            }
        }
        println!("{}: {matched}/{n} files match {}", a.profile, report.index);
    }
    Ok(if report.ok() {
        Status::Ok
    } else {
        Status::Failed
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_bar_line() {
        let mut buf = Vec::new();
        draw(&mut buf, 1, 2, 1_500_000_000, 3_000_000_000);
        assert_eq!(
            String::from_utf8(buf).unwrap(),
            "\r[###############...............]  50%  1/2 files  1.5 GB / 3.0 GB"
        );
        let mut buf = Vec::new();
        draw(&mut buf, 0, 0, 0, 0);
        assert!(String::from_utf8(buf)
            .unwrap()
            .starts_with("\r[##############################] 100%"));
    }
}
