//! `kvexact models verify-weights PROFILE DIR`: every file of the model's weights index (§10.2)
//! must be in `DIR` with the indexed size and digest — `sha256` of the bytes, or `gitblob` (git's
//! SHA-1 of `"blob <size>\0" + bytes`). Read-only; symlinks inside `DIR` (a download cache) are
//! followed. Files are hashed in parallel on `available_parallelism` threads; a progress bar
//! goes to stderr only when stderr is a terminal.

use std::fs::File;
use std::io::{IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use kvprofile_core::catalog::{WeightsAlgo, WeightsEntry, WeightsIndex};
use sha1::Sha1;
use sha2::{Digest, Sha256};

use super::sources::{read_file, read_index_file, sha256_hex, SourceTree};
use super::{gb, print_json, Common, Refusal, Status};

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

/// What one file turned out to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileCheck {
    /// Size and digest match.
    Match,
    /// Not there (or not a regular file).
    Missing,
    /// Wrong size or digest, or unreadable.
    Mismatch,
}

/// Hex digest of a file by the index's algorithm; `progress` is advanced by every byte read.
pub fn hash_file(
    path: &Path,
    algo: WeightsAlgo,
    size: u64,
    progress: &AtomicU64,
) -> std::io::Result<String> {
    let mut f = File::open(path)?;
    let mut buf = vec![0u8; 1 << 20];
    enum H {
        S(Sha256),
        G(Sha1),
    }
    let mut h = match algo {
        WeightsAlgo::Sha256 => H::S(Sha256::new()),
        WeightsAlgo::Gitblob => {
            let mut s = Sha1::new();
            s.update(format!("blob {size}\0").as_bytes());
            H::G(s)
        }
    };
    loop {
        let n = match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let chunk = buf.get(..n).unwrap_or(&[]);
        match &mut h {
            H::S(s) => s.update(chunk),
            H::G(s) => s.update(chunk),
        }
        progress.fetch_add(n as u64, Ordering::Relaxed);
    }
    Ok(match h {
        H::S(s) => hex::encode(s.finalize()),
        H::G(s) => hex::encode(s.finalize()),
    })
}

/// Checks one file against its index line.
pub fn check_file(path: &Path, e: &WeightsEntry, progress: &AtomicU64) -> FileCheck {
    let meta = match std::fs::metadata(path) {
        Ok(m) if m.is_file() => m,
        _ => return FileCheck::Missing,
    };
    if meta.len() != e.size {
        progress.fetch_add(e.size, Ordering::Relaxed);
        return FileCheck::Mismatch;
    }
    match hash_file(path, e.algo, e.size, progress) {
        Ok(h) if h == e.hex => FileCheck::Match,
        _ => FileCheck::Mismatch,
    }
}

/// Checks every entry of `idx` under `dir` on up to `threads` threads; results in index order.
pub fn check_all(dir: &Path, idx: &WeightsIndex, threads: usize, bar: bool) -> Vec<FileCheck> {
    let n = idx.entries.len();
    let results: Mutex<Vec<FileCheck>> = Mutex::new(vec![FileCheck::Missing; n]);
    let next = AtomicUsize::new(0);
    let done_files = AtomicUsize::new(0);
    let bytes = AtomicU64::new(0);
    let total = idx.total_size();
    let threads = threads.clamp(1, n.max(1));
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(e) = idx.entries.get(i) else { break };
                let r = check_file(&dir.join(&e.name), e, &bytes);
                if let Ok(mut v) = results.lock() {
                    if let Some(slot) = v.get_mut(i) {
                        *slot = r;
                    }
                }
                done_files.fetch_add(1, Ordering::Relaxed);
            });
        }
        if bar {
            s.spawn(|| {
                let mut err = std::io::stderr();
                loop {
                    let d = done_files.load(Ordering::Relaxed);
                    let b = bytes.load(Ordering::Relaxed).min(total);
                    draw(&mut err, d, n, b, total);
                    if d >= n {
                        let _ = writeln!(err);
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            });
        }
    });
    results.into_inner().unwrap_or_default()
}

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
pub fn run(a: &Args) -> Result<Status, Refusal> {
    let (shown, idx) = match &a.index {
        Some(p) => {
            let shown = p.display().to_string();
            let idx = read_index_file(p, &shown)?;
            (shown, idx)
        }
        None => {
            let tree = SourceTree::load(&a.common.catalog)?;
            let model = tree
                .catalog
                .models
                .iter()
                .find(|m| m.profile_id == a.profile)
                .ok_or_else(|| {
                    Refusal::new(
                        "UNKNOWN_MODEL",
                        format!("{} is not in the catalog (see list)", a.profile),
                    )
                })?;
            let (path, idx) = tree.read_index(&a.profile)?;
            let shown = tree.shown(&path);
            let bytes = read_file(&path)
                .map_err(|e| Refusal::new("INDEX_INVALID", format!("{shown}: {e}")))?;
            if sha256_hex(&bytes) != model.weights_index_sha256 {
                return Err(Refusal::new(
                    "INDEX_SHA_MISMATCH",
                    format!(
                        "{shown}: sha256 is not the catalog's weightsIndexSha256 {}",
                        model.weights_index_sha256
                    ),
                ));
            }
            (shown, idx)
        }
    };
    if !a.dir.is_dir() {
        return Err(Refusal::new(
            "UNSAFE_PATH",
            format!("{} is not a directory", a.dir.display()),
        ));
    }
    let threads = std::thread::available_parallelism().map_or(1, usize::from);
    let bar = std::io::stderr().is_terminal() && !a.common.json;
    let results = check_all(&a.dir, &idx, threads, bar);
    let mut missing = Vec::new();
    let mut mismatch = Vec::new();
    for (e, r) in idx.entries.iter().zip(&results) {
        match r {
            FileCheck::Match => {}
            FileCheck::Missing => missing.push(e.name.clone()),
            FileCheck::Mismatch => mismatch.push(e.name.clone()),
        }
    }
    let n = idx.entries.len();
    let matched = n - missing.len() - mismatch.len();
    if a.common.json {
        print_json(&serde_json::json!({
            "ok": missing.is_empty() && mismatch.is_empty(),
            "profileId": a.profile,
            "index": shown,
            "files": n,
            "matched": matched,
            "missing": missing,
            "mismatch": mismatch,
        }));
    } else {
        for (e, r) in idx.entries.iter().zip(&results) {
            match r {
                FileCheck::Match => {}
                FileCheck::Missing => println!("MISSING  {}", e.name),
                FileCheck::Mismatch => println!("MISMATCH {}", e.name),
            }
        }
        println!("{}: {matched}/{n} files match {shown}", a.profile);
    }
    Ok(if matched == n {
        Status::Ok
    } else {
        Status::Failed
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The obvious twin: whole-buffer digests.
    fn slow_digest(bytes: &[u8], algo: WeightsAlgo) -> String {
        match algo {
            WeightsAlgo::Sha256 => hex::encode(Sha256::digest(bytes)),
            WeightsAlgo::Gitblob => {
                let mut v = format!("blob {}\0", bytes.len()).into_bytes();
                v.extend_from_slice(bytes);
                hex::encode(Sha1::digest(&v))
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        #[test]
        fn streaming_and_parallel_checks_equal_the_slow_twin(
            sizes in proptest::collection::vec(0usize..(2 << 20) + 7, 1..6),
            corrupt in proptest::collection::vec(any::<bool>(), 6),
            seed in any::<u8>(),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let mut entries = Vec::new();
            for (i, n) in sizes.iter().enumerate() {
                let bytes: Vec<u8> = (0..*n).map(|j| (j as u8).wrapping_mul(31).wrapping_add(seed ^ i as u8)).collect();
                let algo = if i % 2 == 0 { WeightsAlgo::Sha256 } else { WeightsAlgo::Gitblob };
                let name = format!("f{i}");
                let hex = slow_digest(&bytes, algo);
                let on_disk = if corrupt[i] && !bytes.is_empty() {
                    let mut b = bytes.clone();
                    b[n / 2] ^= 0x80;
                    b
                } else {
                    bytes.clone()
                };
                std::fs::write(dir.path().join(&name), &on_disk).unwrap();
                let sink = AtomicU64::new(0);
                prop_assert_eq!(hash_file(&dir.path().join(&name), algo, *n as u64, &sink).unwrap(), slow_digest(&on_disk, algo));
                prop_assert_eq!(sink.load(Ordering::Relaxed), *n as u64);
                entries.push(WeightsEntry { algo, hex, size: *n as u64, name });
            }
            let idx = WeightsIndex { entries, sha256: String::new() };
            let one = check_all(dir.path(), &idx, 1, false);
            let many = check_all(dir.path(), &idx, 4, false);
            prop_assert_eq!(&one, &many);
            for (i, r) in one.iter().enumerate() {
                let bad = corrupt[i] && sizes[i] > 0;
                prop_assert_eq!(*r, if bad { FileCheck::Mismatch } else { FileCheck::Match });
            }
        }
    }

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
