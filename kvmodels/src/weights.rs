//! Checking a snapshot directory against a model's weights index (docs/contracts/registry.md
//! §10.2, §11 `verify-weights`): every indexed file must be in the directory with the indexed
//! size and digest — `sha256` of the bytes, or `gitblob` (git's SHA-1 of
//! `"blob <size>\0" + bytes`). Read-only; symlinks inside the directory (a download cache) are
//! followed. Files are hashed in parallel.

use std::fs::File;
use std::io::Read;
use std::path::Path;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use sha1::Sha1;
use sha2::{Digest, Sha256};

use crate::catalog::{WeightsAlgo, WeightsEntry, WeightsIndex};
use crate::error::Result;
use crate::source_tree::{read_file, read_index_file, SourceTree};
use crate::{refuse, RefusalCode};
use kvprofile_core::ids::sha256_hex;

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

/// How far a [`check_all`] run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// Files checked so far.
    pub done_files: usize,
    /// Files in the index.
    pub files: usize,
    /// Bytes hashed (or skipped on a size mismatch) so far, at most `total`.
    pub bytes: u64,
    /// Sum of the indexed sizes.
    pub total: u64,
}

impl Progress {
    /// Whether every file has been checked (the last report of a run).
    pub fn finished(&self) -> bool {
        self.done_files >= self.files
    }
}

/// Checks every entry of `idx` under `dir` on up to `threads` threads; results in index order.
/// With `progress`, a reporter thread calls it every 100 ms and once more when every file has
/// been checked ([`Progress::finished`]).
pub fn check_all(
    dir: &Path,
    idx: &WeightsIndex,
    threads: usize,
    progress: Option<&(dyn Fn(Progress) + Sync)>,
) -> Vec<FileCheck> {
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
        if let Some(report) = progress {
            s.spawn(|| loop {
                let p = Progress {
                    done_files: done_files.load(Ordering::Relaxed),
                    files: n,
                    bytes: bytes.load(Ordering::Relaxed).min(total),
                    total,
                };
                report(p);
                if p.finished() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            });
        }
    });
    results.into_inner().unwrap_or_default()
}

/// Which weights index to verify against.
#[derive(Debug, Clone, Copy)]
pub enum IndexSource<'a> {
    /// An index file given directly (no catalog is read; no pin is checked).
    File(&'a Path),
    /// The catalog's `weights/<profileId>.index`, which must hash to the model's
    /// `weightsIndexSha256`.
    Catalog {
        /// The catalog file.
        catalog: &'a Path,
        /// The model.
        profile_id: &'a str,
    },
}

/// What [`verify_snapshot`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WeightsReport {
    /// The index as messages name it (catalog-relative, or the file as given).
    pub index: String,
    /// Every indexed file name with its result, in index order.
    pub files: Vec<(String, FileCheck)>,
}

impl WeightsReport {
    /// Files that match.
    pub fn matched(&self) -> usize {
        self.files
            .iter()
            .filter(|(_, r)| *r == FileCheck::Match)
            .count()
    }

    /// Names of the missing files, in index order.
    pub fn missing(&self) -> Vec<String> {
        self.with(FileCheck::Missing)
    }

    /// Names of the files with a wrong size or digest, in index order.
    pub fn mismatch(&self) -> Vec<String> {
        self.with(FileCheck::Mismatch)
    }

    /// Whether every file matches.
    pub fn ok(&self) -> bool {
        self.matched() == self.files.len()
    }

    fn with(&self, want: FileCheck) -> Vec<String> {
        self.files
            .iter()
            .filter(|(_, r)| *r == want)
            .map(|(n, _)| n.clone())
            .collect()
    }
}

/// Loads the index of `source`: `INDEX_INVALID` / `INDEX_UNSAFE_PATH`, and with
/// [`IndexSource::Catalog`] the catalog's refusals, `UNKNOWN_MODEL` and `INDEX_SHA_MISMATCH`.
/// Returns the index as messages name it and the parsed index.
pub fn load_index(source: IndexSource<'_>) -> Result<(String, WeightsIndex)> {
    match source {
        IndexSource::File(p) => {
            let shown = p.display().to_string();
            let idx = read_index_file(p, &shown)?;
            Ok((shown, idx))
        }
        IndexSource::Catalog {
            catalog,
            profile_id,
        } => {
            let tree = SourceTree::load(catalog)?;
            let model = tree
                .catalog
                .models
                .iter()
                .find(|m| m.profile_id == profile_id)
                .ok_or_else(|| {
                    refuse(
                        RefusalCode::UnknownModel,
                        format!("{profile_id} is not in the catalog (see list)"),
                    )
                })?;
            let (path, idx) = tree.read_index(profile_id)?;
            let shown = tree.shown(&path);
            let bytes = read_file(&path)
                .map_err(|e| refuse(RefusalCode::IndexInvalid, format!("{shown}: {e}")))?;
            if sha256_hex(&bytes) != model.weights_index_sha256 {
                return Err(refuse(
                    RefusalCode::IndexShaMismatch,
                    format!(
                        "{shown}: sha256 is not the catalog's weightsIndexSha256 {}",
                        model.weights_index_sha256
                    ),
                ));
            }
            Ok((shown, idx))
        }
    }
}

/// Verifies the snapshot directory `dir` against the index of `source` on up to `threads`
/// threads ([`load_index`]'s refusals; `UNSAFE_PATH` when `dir` is not a directory).
/// `progress` is as for [`check_all`].
pub fn verify_snapshot(
    source: IndexSource<'_>,
    dir: &Path,
    threads: usize,
    progress: Option<&(dyn Fn(Progress) + Sync)>,
) -> Result<WeightsReport> {
    let (shown, idx) = load_index(source)?;
    if !dir.is_dir() {
        return Err(refuse(
            RefusalCode::UnsafePath,
            format!("{} is not a directory", dir.display()),
        ));
    }
    let results = check_all(dir, &idx, threads, progress);
    Ok(WeightsReport {
        index: shown,
        files: idx
            .entries
            .iter()
            .map(|e| e.name.clone())
            .zip(results)
            .collect(),
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
            let one = check_all(dir.path(), &idx, 1, None);
            let many = check_all(dir.path(), &idx, 4, None);
            prop_assert_eq!(&one, &many);
            for (i, r) in one.iter().enumerate() {
                let bad = corrupt[i] && sizes[i] > 0;
                prop_assert_eq!(*r, if bad { FileCheck::Mismatch } else { FileCheck::Match });
            }
        }
    }
}

#[cfg(test)]
mod report_tests {
    use super::*;
    use crate::testtree::{write, TestTree};

    #[test]
    fn missing_and_mismatched_files_in_index_order() {
        let t = TestTree::new();
        let a = &t.models[0];
        let snap = tempfile::tempdir().unwrap();
        for (n, b, _) in a.snapshot() {
            if n == "config.json" {
                continue;
            }
            let mut b = b.clone();
            if n == "tokenizer.json" {
                b[0] ^= 1;
            }
            write(&snap.path().join(n), &b);
        }
        let cat = t.catalog();
        let src = IndexSource::Catalog {
            catalog: &cat,
            profile_id: "tiny-a-v1",
        };
        let r = verify_snapshot(src, snap.path(), 2, None).unwrap();
        assert_eq!(r.index, "scripts/models/weights/tiny-a-v1.index");
        assert_eq!(
            r.files,
            [
                ("config.json".to_string(), FileCheck::Missing),
                ("model.safetensors".to_string(), FileCheck::Match),
                ("tokenizer.json".to_string(), FileCheck::Mismatch),
            ]
        );
        assert_eq!(r.matched(), 1);
        assert_eq!(r.missing(), ["config.json"]);
        assert_eq!(r.mismatch(), ["tokenizer.json"]);
        assert!(!r.ok());
        let calls = std::sync::Mutex::new(Vec::new());
        let record = |p: Progress| calls.lock().unwrap().push(p);
        let idx = t.root.join("scripts/models/weights/tiny-a-v1.index");
        let r = verify_snapshot(IndexSource::File(&idx), snap.path(), 1, Some(&record)).unwrap();
        assert_eq!(r.index, idx.display().to_string());
        let last = *calls.lock().unwrap().last().unwrap();
        assert!(last.finished());
        assert_eq!((last.done_files, last.files), (3, 3));
    }

    #[test]
    fn refusals() {
        let t = TestTree::new();
        let cat = t.catalog();
        let dir = tempfile::tempdir().unwrap();
        let src = |id| IndexSource::Catalog {
            catalog: &cat,
            profile_id: id,
        };
        let e = verify_snapshot(src("nope-v1"), dir.path(), 1, None).unwrap_err();
        assert_eq!(e.code(), "UNKNOWN_MODEL");
        let e = verify_snapshot(src("tiny-a-v1"), &dir.path().join("none"), 1, None).unwrap_err();
        assert_eq!(e.code(), "UNSAFE_PATH");
        let idx = t.root.join("scripts/models/weights/tiny-a-v1.index");
        let text = std::fs::read_to_string(&idx)
            .unwrap()
            .replace(" config.json", " config.jsonx");
        write(&idx, text.as_bytes());
        let e = verify_snapshot(src("tiny-a-v1"), dir.path(), 1, None).unwrap_err();
        assert_eq!(e.code(), "INDEX_SHA_MISMATCH");
        assert!(e.to_string().ends_with(&format!(
            "sha256 is not the catalog's weightsIndexSha256 {}",
            crate::testtree::sha(t.models[0].index().as_bytes())
        )));
        // Given directly, an index is not checked against a pin.
        assert!(verify_snapshot(IndexSource::File(&idx), dir.path(), 1, None).is_ok());
    }
}
