//! The pinned weights of a model: files that verify are skipped, the rest downloaded (resumed)
//! and verified.

use super::*;

/// Verifies, fetches and verifies the weights of `m` under `wroot`.
pub(super) fn weights(
    ctx: &Ctx,
    m: &ModelEntry,
    idx: &WeightsIndex,
    wroot: &Path,
    ev: Events<'_>,
) -> Result<WeightsOutcome> {
    let pid = &m.profile_id;
    let wrel = Path::new(&slug(&m.repo)).join(&m.revision);
    let wdir = wroot.join(&wrel);
    let sink = AtomicU64::new(0);
    let mut todo = Vec::new();
    for e in &idx.entries {
        let rel = wrel.join(&e.name);
        no_symlink_below(wroot, &rel)?;
        no_symlink_below(wroot, &part_path(&rel))?;
        let dest = wroot.join(&rel);
        let present = fs::symlink_metadata(&dest).is_ok_and(|md| md.is_file());
        if present && check_file(&dest, e, &sink) == FileCheck::Match {
            continue;
        }
        todo.push(e);
    }
    let need: u64 = todo.iter().map(|e| e.size).sum();
    let n = idx.entries.len();
    ev(&InstallEvent::WeightsPlan {
        verified: n - todo.len(),
        files: n,
        bytes: need,
        copy: ctx.snapshot.is_some(),
        dir: wdir.clone(),
    });
    let mut fetched = Vec::new();
    if !ctx.opts.dry_run && !todo.is_empty() {
        ensure_dir(wroot, &wrel)?;
        let partial: u64 = todo
            .iter()
            .filter_map(|e| fs::symlink_metadata(part_path(&wdir.join(&e.name))).ok())
            .map(|md| md.len())
            .sum();
        let remaining = need.saturating_sub(partial);
        if let Some(free) = (ctx.opts.free_bytes)(&wdir) {
            if free < remaining.saturating_add(SPACE_MARGIN) {
                return Err(refuse(
                    RefusalCode::DiskSpace,
                    format!(
                        "{}: {} free, {} needed plus 1 GiB margin",
                        wdir.display(),
                        gb(free),
                        gb(remaining)
                    ),
                ));
            }
        }
        for e in &todo {
            let dest = wdir.join(&e.name);
            match &ctx.snapshot {
                Some(snap) => copy_from_snapshot(
                    &snap.join(slug(&m.repo)).join(&m.revision).join(&e.name),
                    &wdir,
                    &e.name,
                )?,
                None => {
                    let url = ctx.hub.resolve_url(&m.repo, &m.revision, &e.name);
                    ctx.hub
                        .download(&url, &dest, Some(e.size), &mut |s: &str| {
                            ev(&InstallEvent::DownloadNote {
                                file: e.name.clone(),
                                weights: true,
                                note: s.to_string(),
                            })
                        })?;
                }
            }
            if check_file(&dest, e, &sink) != FileCheck::Match {
                let mut rejected = dest.clone().into_os_string();
                rejected.push(".rejected");
                let _ = fs::rename(&dest, &rejected);
                return Err(refuse(
                    RefusalCode::WeightShaMismatch,
                    format!(
                        "{pid}: {} does not match the index (kept as {}.rejected)",
                        e.name, e.name
                    ),
                ));
            }
            ev(&InstallEvent::WeightVerified {
                name: e.name.clone(),
                size: e.size,
            });
            fetched.push(e.name.clone());
        }
    }
    Ok(WeightsOutcome {
        dir: wdir.display().to_string(),
        files: n,
        already_verified: n - todo.len(),
        bytes_to_fetch: need,
        fetched,
    })
}
