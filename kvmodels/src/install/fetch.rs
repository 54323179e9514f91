//! The tokenizer and its upstream `tokenizer_config.json`: already staged, taken from a
//! snapshot or downloaded, and verified against their pins.

use super::*;

/// `TOKENIZER_SHA_MISMATCH` for `pid`.
pub(super) fn tokenizer_mismatch(pid: &str, got: &str, want: &str, from: &str) -> Error {
    refuse(
        RefusalCode::TokenizerShaMismatch,
        format!("{pid}: {from} tokenizer.json hashes to {got}, pinned {want}"),
    )
}

/// Reads the tokenizer at `path` (`unreadable` when it cannot be read) and checks it against
/// its pin (`TOKENIZER_SHA_MISMATCH`, naming where it came `from`).
fn read_pinned_tokenizer(
    path: &Path,
    unreadable: RefusalCode,
    pid: &str,
    want: &str,
    from: &str,
) -> Result<Vec<u8>> {
    let b = read_file(path).map_err(|e| refuse(unreadable, format!("{}: {e}", path.display())))?;
    let got = sha256_hex(&b);
    if got != want {
        return Err(tokenizer_mismatch(pid, &got, want, from));
    }
    Ok(b)
}

/// Finds the tokenizer bytes: already staged, from the snapshot, or downloaded (`None` in a dry
/// run that would download).
pub(super) fn tokenizer(ctx: &Ctx, m: &ModelEntry, ev: Events<'_>) -> Result<Option<Vec<u8>>> {
    let pid = &m.profile_id;
    let want = &m.tokenizer_sha256;
    let art_rel = Path::new("artifacts/sha256").join(want);
    no_symlink_below(&ctx.reg, &art_rel)?;
    let staged = ctx.reg.join(&art_rel);
    if fs::symlink_metadata(&staged).is_ok_and(|md| md.is_file()) {
        if let Ok(b) = read_file(&staged) {
            if sha256_hex(&b) == *want {
                ev(&InstallEvent::TokenizerStaged {
                    sha256: want.clone(),
                });
                return Ok(Some(b));
            }
        }
    }
    if let Some(snap) = &ctx.snapshot {
        let src = snap
            .join(slug(&m.repo))
            .join(&m.revision)
            .join("tokenizer.json");
        let b = read_pinned_tokenizer(&src, RefusalCode::SnapshotMissing, pid, want, "snapshot")?;
        ev(&InstallEvent::TokenizerFromSnapshot {
            sha256: want.clone(),
        });
        return Ok(Some(b));
    }
    let url = ctx.hub.resolve_url(&m.repo, &m.revision, "tokenizer.json");
    if ctx.opts.dry_run {
        ev(&InstallEvent::WouldDownload { url });
        return Ok(None);
    }
    let dest = ctx.work.0.join(format!("{pid}.tokenizer.json"));
    ctx.hub.download(&url, &dest, None, &mut |s: &str| {
        ev(&InstallEvent::DownloadNote {
            file: "tokenizer.json".into(),
            weights: false,
            note: s.to_string(),
        })
    })?;
    let b = read_pinned_tokenizer(&dest, RefusalCode::DownloadFailed, pid, want, "downloaded")?;
    ev(&InstallEvent::TokenizerDownloaded {
        sha256: want.clone(),
    });
    Ok(Some(b))
}

/// Finds the `tokenizer_config.json` bytes the plan pins: already staged beside the tokenizer,
/// from the snapshot, or downloaded (bounded by the indexed size); each checked against both
/// pins before anything is staged. `None`: the repository has none, or a dry run that would
/// download it.
pub(super) fn tokenizer_config(
    ctx: &Ctx,
    m: &ModelEntry,
    plan: &ConfigPlan,
    ev: Events<'_>,
) -> Result<Option<(Vec<u8>, String)>> {
    let pid = &m.profile_id;
    let (entry, want) = match plan {
        ConfigPlan::NoneUpstream { declared } => {
            ev(&InstallEvent::NoTokenizerConfig {
                declared: *declared,
            });
            return Ok(None);
        }
        ConfigPlan::Pinned { entry, sha256 } => (entry, sha256.as_deref()),
    };
    let found = |b: Vec<u8>, from: &str, source: ConfigSource, ev: Events<'_>| {
        let sha = tcfg::verify(pid, entry, want, &b, from)?;
        ev(&InstallEvent::TokenizerConfig {
            source,
            sha256: sha.clone(),
        });
        Ok(Some((b, sha)))
    };
    let staged_rel = Path::new(&slug(&m.repo)).join(tcfg::FILE);
    no_symlink_below(&ctx.tokdir, &staged_rel)?;
    let staged = ctx.tokdir.join(&staged_rel);
    if fs::symlink_metadata(&staged).is_ok_and(|md| md.is_file() && md.len() == entry.size) {
        if let Ok(b) = read_file(&staged) {
            if tcfg::verify(pid, entry, want, &b, "staged").is_ok() {
                return found(b, "staged", ConfigSource::Staged, ev);
            }
        }
    }
    if let Some(snap) = &ctx.snapshot {
        let src = snap.join(slug(&m.repo)).join(&m.revision).join(tcfg::FILE);
        let b = read_file(&src).map_err(|e| {
            refuse(
                RefusalCode::SnapshotMissing,
                format!("{}: {e}", src.display()),
            )
        })?;
        return found(b, "snapshot", ConfigSource::Snapshot, ev);
    }
    let url = ctx.hub.resolve_url(&m.repo, &m.revision, tcfg::FILE);
    if ctx.opts.dry_run {
        ev(&InstallEvent::WouldDownload { url });
        return Ok(None);
    }
    let dest = ctx.work.0.join(format!("{pid}.{}", tcfg::FILE));
    ctx.hub
        .download(&url, &dest, Some(entry.size), &mut |s: &str| {
            ev(&InstallEvent::DownloadNote {
                file: tcfg::FILE.into(),
                weights: false,
                note: s.to_string(),
            })
        })?;
    let b = read_file(&dest).map_err(|e| {
        refuse(
            RefusalCode::DownloadFailed,
            format!("{}: {e}", dest.display()),
        )
    })?;
    found(b, "downloaded", ConfigSource::Downloaded, ev)
}

/// Copies a snapshot file into `dir/name` atomically (the digest is checked by the caller).
pub(super) fn copy_from_snapshot(src: &Path, dir: &Path, name: &str) -> Result<()> {
    let mut input = fs::File::open(src).map_err(|e| {
        refuse(
            RefusalCode::SnapshotMissing,
            format!("{}: {e}", src.display()),
        )
    })?;
    let (tmp, mut f) = create_temp(dir, name)?;
    if let Err(e) = std::io::copy(&mut input, &mut f) {
        let _ = fs::remove_file(&tmp);
        return Err(refuse(
            RefusalCode::WriteFailed,
            format!("{}: {e}", dir.join(name).display()),
        ));
    }
    commit_temp(&tmp, f, &dir.join(name))
}
