//! Safe local writes for the installer (docs/contracts/registry.md §6 installer side, §11):
//! install roots absolute without `..`; no symlink at or below a root (never written through); directories `0755`, files
//! `0644`, each file written to a temp file in the same directory, fsynced and renamed over the
//! destination, then the directory fsynced.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{Error, Result};
use crate::{refuse, RefusalCode};

/// Mode of every staged file.
pub const FILE_MODE: u32 = 0o644;
/// Mode of every directory the installer creates.
pub const DIR_MODE: u32 = 0o755;

/// `WRITE_FAILED` naming `path`.
pub(crate) fn write_failed(path: &Path, e: impl std::fmt::Display) -> Error {
    refuse(RefusalCode::WriteFailed, format!("{}: {e}", path.display()))
}

/// An install root: absolute, no `..` component; returned normalised (no `.`, no trailing `/`).
pub fn safe_root(path: &Path, label: &str) -> Result<PathBuf> {
    if !path.is_absolute() || path.components().any(|c| c == Component::ParentDir) {
        return Err(refuse(
            RefusalCode::UnsafePath,
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
fn check_relative(rel: &Path) -> Result<()> {
    let ok =
        rel.components().count() > 0 && rel.components().all(|c| matches!(c, Component::Normal(_)));
    if ok {
        Ok(())
    } else {
        Err(refuse(
            RefusalCode::UnsafePath,
            format!("{} is not a plain relative path", rel.display()),
        ))
    }
}

/// Refuses when the root itself or any existing component of `root/rel` is a symlink.
pub fn no_symlink_below(root: &Path, rel: &Path) -> Result<()> {
    check_relative(rel)?;
    let mut probe = root.to_path_buf();
    if fs::symlink_metadata(&probe).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(refuse(
            RefusalCode::UnsafePath,
            format!("{} is a symlink", probe.display()),
        ));
    }
    for comp in rel.components() {
        probe.push(comp);
        match fs::symlink_metadata(&probe) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(refuse(
                    RefusalCode::UnsafePath,
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
pub fn ensure_dir(root: &Path, rel_dir: &Path) -> Result<PathBuf> {
    match fs::symlink_metadata(root) {
        Ok(m) if m.file_type().is_symlink() => {
            return Err(refuse(
                RefusalCode::UnsafePath,
                format!("{} is a symlink", root.display()),
            ))
        }
        Ok(m) if !m.is_dir() => {
            return Err(refuse(
                RefusalCode::UnsafePath,
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
            return Err(refuse(
                RefusalCode::UnsafePath,
                format!("{} is not a plain relative path", rel_dir.display()),
            ));
        }
        dir.push(comp);
        match fs::symlink_metadata(&dir) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(refuse(
                    RefusalCode::UnsafePath,
                    format!("{} is a symlink", dir.display()),
                ))
            }
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(refuse(
                    RefusalCode::UnsafePath,
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
pub fn create_temp(dir: &Path, name: &str) -> Result<(PathBuf, File)> {
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
pub fn commit_temp(tmp: &Path, f: File, dest: &Path) -> Result<()> {
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
fn write_in_dir(dir: &Path, name: &str, bytes: &[u8]) -> Result<()> {
    let dest = dir.join(name);
    if fs::symlink_metadata(&dest).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(refuse(
            RefusalCode::UnsafePath,
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
pub fn stage_file(root: &Path, rel: &Path, bytes: &[u8]) -> Result<()> {
    no_symlink_below(root, rel)?;
    let name = rel.file_name().and_then(|n| n.to_str()).ok_or_else(|| {
        refuse(
            RefusalCode::UnsafePath,
            format!("{} has no file name", rel.display()),
        )
    })?;
    let parent = rel.parent().unwrap_or(Path::new(""));
    let dir = ensure_dir(root, parent)?;
    write_in_dir(&dir, name, bytes)
}

/// Writes a file atomically at an operator-given path (the rendered page); refuses a symlink at
/// the destination.
pub fn write_file_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let name = path.file_name().and_then(|n| n.to_str()).ok_or_else(|| {
        refuse(
            RefusalCode::UnsafePath,
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
pub fn remove_tree(root: &Path, rel: &Path) -> Result<()> {
    no_symlink_below(root, rel)?;
    let path = root.join(rel);
    match fs::symlink_metadata(&path) {
        Ok(m) if m.is_dir() => fs::remove_dir_all(&path).map_err(|e| write_failed(&path, e)),
        Ok(_) => Err(refuse(
            RefusalCode::UnsafePath,
            format!("{} is not a directory", path.display()),
        )),
        Err(_) => Ok(()),
    }
}

/// Free bytes for an unprivileged user on the filesystem holding `p` (nearest existing
/// ancestor); `None` when it cannot be told.
pub fn free_bytes(p: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let existing = p.ancestors().find(|a| a.exists())?;
    let c = std::ffi::CString::new(existing.as_os_str().as_bytes()).ok()?;
    // SAFETY: statvfs is plain old data; zeroed is a valid value for it.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a valid NUL-terminated path and `st` a valid, writable statvfs.
    let rc = unsafe { libc::statvfs(c.as_ptr(), &mut st) };
    if rc != 0 {
        return None;
    }
    #[allow(clippy::unnecessary_cast)]
    Some((st.f_bavail as u64).saturating_mul(st.f_frsize as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(p: &Path) -> u32 {
        fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn roots_are_absolute_without_parent_components() {
        assert_eq!(
            safe_root(Path::new("/a/./b/"), "--x").unwrap(),
            PathBuf::from("/a/b")
        );
        let e = safe_root(Path::new("a/b"), "--x").unwrap_err();
        assert_eq!(e.code(), "UNSAFE_PATH");
        assert_eq!(e.to_string(), "--x \"a/b\" must be absolute without '..'");
        assert!(safe_root(Path::new("/a/../b"), "--x").is_err());
    }

    #[test]
    fn staged_files_and_directories_have_fixed_modes() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        stage_file(&root, Path::new("a/b/c.txt"), b"hi").unwrap();
        assert_eq!(fs::read(root.join("a/b/c.txt")).unwrap(), b"hi");
        assert_eq!(mode(&root.join("a/b/c.txt")), FILE_MODE);
        assert_eq!(mode(&root.join("a/b")), DIR_MODE);
        assert_eq!(mode(&root), DIR_MODE);
        stage_file(&root, Path::new("a/b/c.txt"), b"again").unwrap();
        assert_eq!(fs::read(root.join("a/b/c.txt")).unwrap(), b"again");
        // No temp file is left behind.
        assert_eq!(fs::read_dir(root.join("a/b")).unwrap().count(), 1);
        for bad in ["", "../x", "/abs", "a/../b"] {
            let e = stage_file(&root, Path::new(bad), b"x");
            assert_eq!(e.unwrap_err().code(), "UNSAFE_PATH", "{bad:?}");
        }
    }

    #[test]
    fn nothing_is_written_through_a_symlink() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        let outside = dir.path().join("outside");
        fs::create_dir_all(root.join("a")).unwrap();
        fs::create_dir(&outside).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("a/link")).unwrap();
        let e = stage_file(&root, Path::new("a/link/f"), b"x").unwrap_err();
        assert_eq!(e.code(), "UNSAFE_PATH");
        assert_eq!(
            e.to_string(),
            format!("{} is a symlink", root.join("a/link").display())
        );
        assert!(remove_tree(&root, Path::new("a/link")).is_err());
        std::os::unix::fs::symlink(outside.join("f"), root.join("a/file")).unwrap();
        assert!(stage_file(&root, Path::new("a/file"), b"x").is_err());
        assert!(write_file_atomic(&root.join("a/file"), b"x").is_err());
        assert_eq!(fs::read_dir(&outside).unwrap().count(), 0);
        remove_tree(&root, Path::new("a")).unwrap();
        assert!(!root.join("a").exists());
        remove_tree(&root, Path::new("a")).unwrap();
    }

    #[test]
    fn free_space_of_an_existing_ancestor() {
        let dir = tempfile::tempdir().unwrap();
        assert!(free_bytes(&dir.path().join("not/yet/there")).is_some());
    }
}
