//! Safe local writes for the installer (docs/contracts/registry.md §6 installer side): install roots absolute without
//! `..`; no symlink at or below a root (never written through); directories `0755`, files
//! `0644`, each file written to a temp file in the same directory, fsynced and renamed over the
//! destination, then the directory fsynced.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::Refusal;

/// Mode of every staged file.
pub const FILE_MODE: u32 = 0o644;
/// Mode of every directory the installer creates.
pub const DIR_MODE: u32 = 0o755;

fn write_failed(path: &Path, e: impl std::fmt::Display) -> Refusal {
    Refusal::new("WRITE_FAILED", format!("{}: {e}", path.display()))
}

/// An install root: absolute, no `..` component; returned normalised (no `.`, no trailing `/`).
pub fn safe_root(path: &Path, label: &str) -> Result<PathBuf, Refusal> {
    if !path.is_absolute() || path.components().any(|c| c == Component::ParentDir) {
        return Err(Refusal::new(
            "UNSAFE_PATH",
            format!(
                "{label} {:?} must be absolute without '..'",
                path.display().to_string()
            ),
        ));
    }
    Ok(path
        .components()
        .filter(|c| *c != Component::CurDir)
        .collect())
}

/// A relative destination beneath a root: plain `Normal` components only.
fn check_relative(rel: &Path) -> Result<(), Refusal> {
    let ok =
        rel.components().count() > 0 && rel.components().all(|c| matches!(c, Component::Normal(_)));
    if ok {
        Ok(())
    } else {
        Err(Refusal::new(
            "UNSAFE_PATH",
            format!("{} is not a plain relative path", rel.display()),
        ))
    }
}

/// Refuses when the root itself or any existing component of `root/rel` is a symlink.
pub fn no_symlink_below(root: &Path, rel: &Path) -> Result<(), Refusal> {
    check_relative(rel)?;
    let mut probe = root.to_path_buf();
    if fs::symlink_metadata(&probe).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(Refusal::new(
            "UNSAFE_PATH",
            format!("{} is a symlink", probe.display()),
        ));
    }
    for comp in rel.components() {
        probe.push(comp);
        match fs::symlink_metadata(&probe) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(Refusal::new(
                    "UNSAFE_PATH",
                    format!("{} is a symlink", probe.display()),
                ))
            }
            Ok(_) => {}
            Err(_) => break,
        }
    }
    Ok(())
}

/// Creates `root` (if missing) and every directory of `root/rel_dir`, each `0755`, refusing a
/// symlink or a non-directory anywhere on the way.
pub fn ensure_dir(root: &Path, rel_dir: &Path) -> Result<PathBuf, Refusal> {
    match fs::symlink_metadata(root) {
        Ok(m) if m.file_type().is_symlink() => {
            return Err(Refusal::new(
                "UNSAFE_PATH",
                format!("{} is a symlink", root.display()),
            ))
        }
        Ok(m) if !m.is_dir() => {
            return Err(Refusal::new(
                "UNSAFE_PATH",
                format!("{} is not a directory", root.display()),
            ))
        }
        Ok(_) => {}
        Err(_) => {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(DIR_MODE)
                .create(root)
                .map_err(|e| write_failed(root, e))?;
            fs::set_permissions(root, fs::Permissions::from_mode(DIR_MODE))
                .map_err(|e| write_failed(root, e))?;
        }
    }
    let mut dir = root.to_path_buf();
    for comp in rel_dir.components() {
        if !matches!(comp, Component::Normal(_)) {
            return Err(Refusal::new(
                "UNSAFE_PATH",
                format!("{} is not a plain relative path", rel_dir.display()),
            ));
        }
        dir.push(comp);
        match fs::symlink_metadata(&dir) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(Refusal::new(
                    "UNSAFE_PATH",
                    format!("{} is a symlink", dir.display()),
                ))
            }
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(Refusal::new(
                    "UNSAFE_PATH",
                    format!("{} is not a directory", dir.display()),
                ))
            }
            Err(_) => {
                match fs::DirBuilder::new().mode(DIR_MODE).create(&dir) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                    Err(e) => return Err(write_failed(&dir, e)),
                }
                // The process umask may have cleared bits; directories are 0755 exactly.
                fs::set_permissions(&dir, fs::Permissions::from_mode(DIR_MODE))
                    .map_err(|e| write_failed(&dir, e))?;
            }
        }
    }
    Ok(dir)
}

static TMP_SEQ: AtomicU64 = AtomicU64::new(0);

/// A temp file in `dir`, created exclusively (`O_EXCL|O_NOFOLLOW`) with mode `0644`.
pub fn create_temp(dir: &Path, name: &str) -> Result<(PathBuf, File), Refusal> {
    let seq = TMP_SEQ.fetch_add(1, Ordering::Relaxed);
    let tmp = dir.join(format!(".{name}.kvexact-tmp-{}-{seq}", std::process::id()));
    let f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(FILE_MODE)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&tmp)
        .map_err(|e| write_failed(&tmp, e))?;
    f.set_permissions(fs::Permissions::from_mode(FILE_MODE))
        .map_err(|e| write_failed(&tmp, e))?;
    Ok((tmp, f))
}

/// fsyncs `f`, renames `tmp` over `dest` and fsyncs the directory; removes `tmp` on failure.
pub fn commit_temp(tmp: &Path, f: File, dest: &Path) -> Result<(), Refusal> {
    let res = f
        .sync_all()
        .and_then(|()| {
            drop(f);
            fs::rename(tmp, dest)
        })
        .map_err(|e| write_failed(dest, e));
    if res.is_err() {
        let _ = fs::remove_file(tmp);
        return res;
    }
    if let Some(dir) = dest.parent() {
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
    }
    Ok(())
}

/// Writes `bytes` to `dir/name` atomically (temp + fsync + rename), mode `0644`.
fn write_in_dir(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), Refusal> {
    let dest = dir.join(name);
    if fs::symlink_metadata(&dest).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(Refusal::new(
            "UNSAFE_PATH",
            format!("{} is a symlink", dest.display()),
        ));
    }
    let (tmp, mut f) = create_temp(dir, name)?;
    if let Err(e) = f.write_all(bytes) {
        let _ = fs::remove_file(&tmp);
        return Err(write_failed(&dest, e));
    }
    commit_temp(&tmp, f, &dest)
}

/// Stages `bytes` at `root/rel`: no symlink at or below `root`, parents created `0755`,
/// the file written atomically with mode `0644`.
pub fn stage_file(root: &Path, rel: &Path, bytes: &[u8]) -> Result<(), Refusal> {
    no_symlink_below(root, rel)?;
    let name = rel.file_name().and_then(|n| n.to_str()).ok_or_else(|| {
        Refusal::new("UNSAFE_PATH", format!("{} has no file name", rel.display()))
    })?;
    let parent = rel.parent().unwrap_or(Path::new(""));
    let dir = ensure_dir(root, parent)?;
    write_in_dir(&dir, name, bytes)
}

/// Writes a file atomically at an operator-given path (the rendered page); refuses a symlink at
/// the destination.
pub fn write_file_atomic(path: &Path, bytes: &[u8]) -> Result<(), Refusal> {
    let name = path.file_name().and_then(|n| n.to_str()).ok_or_else(|| {
        Refusal::new(
            "UNSAFE_PATH",
            format!("{} has no file name", path.display()),
        )
    })?;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    write_in_dir(dir, name, bytes)
}

/// Removes `root/rel` (a directory tree) if present, refusing symlinks on the way
/// (`remove_dir_all` itself never follows symlinks inside the tree).
pub fn remove_tree(root: &Path, rel: &Path) -> Result<(), Refusal> {
    no_symlink_below(root, rel)?;
    let path = root.join(rel);
    match fs::symlink_metadata(&path) {
        Ok(m) if m.is_dir() => fs::remove_dir_all(&path).map_err(|e| write_failed(&path, e)),
        Ok(_) => Err(Refusal::new(
            "UNSAFE_PATH",
            format!("{} is not a directory", path.display()),
        )),
        Err(_) => Ok(()),
    }
}
