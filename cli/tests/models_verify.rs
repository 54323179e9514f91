//! `kvexact models verify-weights`: synthetic snapshot directories checked against indexes
//! generated here, and the real llama32 index.

use crate::models_common;

use std::fs;

use models_common::*;

#[test]
fn gitblob_twin_matches_known_git_ids() {
    // `git hash-object` of "" and of "hello\n".
    assert_eq!(gitblob(b""), "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391");
    assert_eq!(
        gitblob(b"hello\n"),
        "ce013625030ba8dba906f756967f9e9ca394464a"
    );
}

/// A snapshot dir with three files and its index; returns (dir, index path).
fn snapshot(root: &std::path::Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let dir = root.join("snap");
    let files: Vec<(&str, Vec<u8>, bool)> = vec![
        ("config.json", b"{\"a\": 1}\n".to_vec(), false),
        ("empty.txt", Vec::new(), false),
        (
            "model-00001-of-00002.safetensors",
            bytes(1, 2_500_000),
            true,
        ),
        (
            "model-00002-of-00002.safetensors",
            bytes(2, 1_000_001),
            true,
        ),
        ("tokenizer.json", b"{}".to_vec(), true),
    ];
    let mut index = String::new();
    for (n, b, lfs) in &files {
        write(&dir.join(n), b);
        let d = if *lfs {
            format!("sha256:{}", sha(b))
        } else {
            format!("gitblob:{}", gitblob(b))
        };
        index += &format!("{d} {} {n}\n", b.len());
    }
    let idx = root.join("x.index");
    fs::write(&idx, index).unwrap();
    (dir, idx)
}

fn verify(idx: &std::path::Path, dir: &std::path::Path, json: bool) -> Run {
    let mut c = kvexact();
    c.args(["models", "verify-weights", "tiny-v1"])
        .arg(dir)
        .arg("--index")
        .arg(idx);
    if json {
        c.arg("--json");
    }
    run(c)
}

#[test]
fn a_complete_snapshot_verifies() {
    let t = tempfile::tempdir().unwrap();
    let (dir, idx) = snapshot(t.path());
    let r = verify(&idx, &dir, false);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert_eq!(
        r.stdout,
        format!("tiny-v1: 5/5 files match {}\n", idx.display())
    );
    assert_eq!(
        r.stderr, "",
        "no progress bar when stderr is not a terminal"
    );
    // An extra file in the directory is not the index's business.
    fs::write(dir.join("README.md"), b"x").unwrap();
    assert_eq!(verify(&idx, &dir, false).code, 0);
}

#[test]
fn missing_and_mismatching_files_are_named_in_index_order() {
    let t = tempfile::tempdir().unwrap();
    let (dir, idx) = snapshot(t.path());
    fs::remove_file(dir.join("config.json")).unwrap();
    // Same size, one byte changed: only the digest can tell.
    let p = dir.join("model-00002-of-00002.safetensors");
    let mut b = fs::read(&p).unwrap();
    b[500_000] ^= 1;
    fs::write(&p, b).unwrap();
    // A gitblob file with different bytes of the same length.
    fs::write(dir.join("tokenizer.json"), b"[]").unwrap();
    // A directory where a file should be counts as missing.
    fs::remove_file(dir.join("empty.txt")).unwrap();
    fs::create_dir(dir.join("empty.txt")).unwrap();
    let r = verify(&idx, &dir, false);
    assert_eq!(r.code, 1);
    assert_eq!(
        r.stdout,
        format!(
            "MISSING  config.json\nMISSING  empty.txt\nMISMATCH model-00002-of-00002.safetensors\nMISMATCH tokenizer.json\ntiny-v1: 1/5 files match {}\n",
            idx.display()
        )
    );
    let r = verify(&idx, &dir, true);
    assert_eq!(r.code, 1);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["ok"], false);
    assert_eq!(v["matched"], 1);
    assert_eq!(
        v["missing"],
        serde_json::json!(["config.json", "empty.txt"])
    );
    assert_eq!(
        v["mismatch"],
        serde_json::json!(["model-00002-of-00002.safetensors", "tokenizer.json"])
    );
    // A truncated file is a mismatch by size.
    let (dir2, idx2) = snapshot(&t.path().join("b"));
    let p = dir2.join("model-00001-of-00002.safetensors");
    let b = fs::read(&p).unwrap();
    fs::write(&p, &b[..b.len() - 1]).unwrap();
    let r = verify(&idx2, &dir2, false);
    assert!(
        r.stdout
            .starts_with("MISMATCH model-00001-of-00002.safetensors\n"),
        "{}",
        r.stdout
    );
}

#[test]
fn symlinks_into_a_download_cache_are_followed() {
    let t = tempfile::tempdir().unwrap();
    let (dir, idx) = snapshot(t.path());
    let blobs = t.path().join("blobs");
    fs::create_dir(&blobs).unwrap();
    fs::rename(dir.join("tokenizer.json"), blobs.join("abc")).unwrap();
    std::os::unix::fs::symlink(blobs.join("abc"), dir.join("tokenizer.json")).unwrap();
    assert_eq!(verify(&idx, &dir, false).code, 0);
}

#[test]
fn bad_indexes_and_directories_are_refused() {
    let t = tempfile::tempdir().unwrap();
    let (dir, idx) = snapshot(t.path());
    let good = fs::read_to_string(&idx).unwrap();
    for (bad, code) in [
        (
            good.replace(" config.json", " ../config.json"),
            "INDEX_UNSAFE_PATH",
        ),
        (
            good.replace(" config.json", " -config.json"),
            "INDEX_UNSAFE_PATH",
        ),
        (good.trim_end().to_string(), "INDEX_INVALID"),
        (good.replace("gitblob:", "md5:"), "INDEX_INVALID"),
    ] {
        fs::write(&idx, bad).unwrap();
        let r = verify(&idx, &dir, false);
        assert_eq!(r.code, 2);
        assert!(
            r.stderr.starts_with(&format!("REFUSED {code}: ")),
            "{}",
            r.stderr
        );
    }
    fs::write(&idx, good).unwrap();
    let r = verify(&idx, &t.path().join("nope"), false);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.starts_with("REFUSED UNSAFE_PATH: "),
        "{}",
        r.stderr
    );
}

#[test]
fn the_catalog_names_the_index_and_pins_it() {
    let t = tempfile::tempdir().unwrap();
    let tree = Tree::new(&t.path().join("repo"));
    let snap = t.path().join("snap");
    tree.write_snapshot(&snap);
    let a = model_a();
    let dir = snap.join(a.slug()).join(&a.rev);
    let mut c = kvexact();
    c.args(["models", "verify-weights", "tiny-a-v1"])
        .arg(&dir)
        .arg("--catalog")
        .arg(tree.catalog());
    let r = run(c);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        r.stdout,
        "tiny-a-v1: 3/3 files match scripts/models/weights/tiny-a-v1.index\n"
    );

    let mut c = kvexact();
    c.args(["models", "verify-weights", "nope-v1"])
        .arg(&dir)
        .arg("--catalog")
        .arg(tree.catalog());
    let r = run(c);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.starts_with("REFUSED UNKNOWN_MODEL: "),
        "{}",
        r.stderr
    );

    // An index that is not the pinned one is refused before any file is read.
    let idx = tree.root.join("scripts/models/weights/tiny-a-v1.index");
    let text = fs::read_to_string(&idx).unwrap();
    fs::write(&idx, text.replace(" config.json", " config.jso")).unwrap();
    let mut c = kvexact();
    c.args(["models", "verify-weights", "tiny-a-v1"])
        .arg(&dir)
        .arg("--catalog")
        .arg(tree.catalog());
    let r = run(c);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.starts_with("REFUSED INDEX_SHA_MISMATCH: "),
        "{}",
        r.stderr
    );
}

#[test]
fn the_real_llama_index_against_an_empty_directory() {
    let t = tempfile::tempdir().unwrap();
    let mut c = kvexact();
    c.current_dir(real_tree())
        .args(["models", "verify-weights", "llama32-1b-v1"])
        .arg(t.path());
    let r = run(c);
    assert_eq!(r.code, 1, "{}", r.stderr);
    let lines: Vec<&str> = r.stdout.lines().collect();
    let index =
        fs::read_to_string(real_tree().join("scripts/models/weights/llama32-1b-v1.index")).unwrap();
    let n = index.lines().count();
    assert!(n >= 5);
    assert_eq!(lines.len(), n + 1);
    for (line, entry) in lines.iter().zip(index.lines()) {
        let name = entry.splitn(3, ' ').nth(2).unwrap();
        assert_eq!(*line, format!("MISSING  {name}"));
    }
    assert_eq!(
        lines[n],
        format!("llama32-1b-v1: 0/{n} files match scripts/models/weights/llama32-1b-v1.index")
    );
}

#[test]
fn a_terminal_gets_a_progress_bar() {
    // util-linux `script` gives the command a pseudo-terminal; skip where it is absent.
    if std::process::Command::new("script")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("script(1) not available; skipped");
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let (dir, idx) = snapshot(t.path());
    let cmd = format!(
        "{} models verify-weights tiny-v1 {} --index {}",
        env!("CARGO_BIN_EXE_kvexact"),
        dir.display(),
        idx.display()
    );
    let out = std::process::Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("\r[##############################] 100%  5/5 files"),
        "{text:?}"
    );
    assert!(text.contains("tiny-v1: 5/5 files match"));
}
