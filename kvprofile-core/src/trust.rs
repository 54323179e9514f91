//! The file trust policy (docs/contracts/registry.md §6): every file the registry reads is opened strictly beneath the
//! root with no symbolic link at any component, from directories and files owned by root or the
//! trusted uid, with safe modes, regular files only, and size caps enforced while reading.
//!
//! Each component is opened relative to its verified parent descriptor with `openat2`
//! (`RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`, `O_NOFOLLOW`); where the kernel lacks `openat2`
//! (`ENOSYS`) the same walk uses `openat(O_NOFOLLOW)`. Every descriptor is `fstat`ed and checked
//! before the next component is opened, and a file's bytes are read from the very descriptor
//! that was checked.

use std::ffi::{CStr, CString};
use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicU8, Ordering};

use crate::error::{Error, Result};
use crate::locator::is_safe_segment;

/// Size caps per kind of file (docs/contracts/registry.md §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SizeCaps {
    /// Profile document cap (default 1 MiB).
    pub profile: u64,
    /// Artifact cap (default 64 MiB).
    pub artifact: u64,
    /// Engine manifest cap (default 64 KiB).
    pub manifest: u64,
    /// Fixture file cap (default 256 KiB).
    pub fixture: u64,
}

impl Default for SizeCaps {
    fn default() -> Self {
        SizeCaps {
            profile: 1 << 20,
            artifact: 64 << 20,
            manifest: 64 << 10,
            fixture: 256 << 10,
        }
    }
}

/// How path components are resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ResolveMode {
    /// `openat2` when the kernel has it, else the `openat(O_NOFOLLOW)` walk.
    #[default]
    Auto,
    /// Always the `openat(O_NOFOLLOW)` walk (what kernels without `openat2` get; for tests).
    OpenatWalk,
}

/// Who may own registry files and how big they may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TrustPolicy {
    /// Owner accepted besides uid 0 (the gateway passes its effective uid).
    pub trusted_uid: Option<u32>,
    /// Size caps.
    pub caps: SizeCaps,
    /// Component resolution.
    pub resolve: ResolveMode,
}

impl TrustPolicy {
    /// Policy trusting root and `uid`, default caps.
    pub fn with_trusted_uid(uid: u32) -> Self {
        TrustPolicy {
            trusted_uid: Some(uid),
            ..TrustPolicy::default()
        }
    }

    /// Policy trusting root and this process's effective uid (what the gateway does).
    pub fn for_current_user() -> Self {
        // SAFETY: geteuid has no preconditions and cannot fail.
        let euid = unsafe { libc::geteuid() };
        Self::with_trusted_uid(euid)
    }

    fn owner_ok(&self, uid: u32) -> bool {
        uid == 0 || self.trusted_uid == Some(uid)
    }
}

/// What the checked descriptor's `fstat` said about a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileMeta {
    /// Size in bytes (as read).
    pub size: u64,
    /// Permission bits (`st_mode & 0o7777`).
    pub mode: u32,
    /// Owner.
    pub uid: u32,
    /// Inode number.
    pub inode: u64,
    /// Device number.
    pub dev: u64,
}

/// Kind of a directory entry as listed (without following links).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    /// Regular file.
    File,
    /// Directory.
    Dir,
    /// Symbolic link.
    Symlink,
    /// Anything else (FIFO, socket, device).
    Other,
}

/// One listed directory entry (UTF-8 names only; other names are skipped).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    /// File name.
    pub name: String,
    /// Its type, not following links.
    pub kind: EntryKind,
}

const OPENAT2_UNKNOWN: u8 = 0;
const OPENAT2_YES: u8 = 1;
const OPENAT2_NO: u8 = 2;
static OPENAT2: AtomicU8 = AtomicU8::new(OPENAT2_UNKNOWN);

/// Kernel `RESOLVE_NO_SYMLINKS`.
const RESOLVE_NO_SYMLINKS: u64 = 0x04;
/// Kernel `RESOLVE_BENEATH`.
const RESOLVE_BENEATH: u64 = 0x08;

/// `struct open_how` of `openat2(2)`.
#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

#[cfg(target_os = "linux")]
fn openat2(dirfd: RawFd, name: &CStr, flags: libc::c_int) -> io::Result<OwnedFd> {
    let how = OpenHow {
        flags: flags as u64,
        mode: 0,
        resolve: RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS,
    };
    // SAFETY: `name` is NUL-terminated and `how` is a valid open_how of the size passed; the
    // kernel only reads them. A non-negative result is a fresh descriptor we now own.
    let r = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dirfd,
            name.as_ptr(),
            &how as *const OpenHow,
            std::mem::size_of::<OpenHow>(),
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    let fd = RawFd::try_from(r).map_err(|_| io::Error::other("descriptor out of range"))?;
    // SAFETY: see above.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

#[cfg(not(target_os = "linux"))]
fn openat2(_dirfd: RawFd, _name: &CStr, _flags: libc::c_int) -> io::Result<OwnedFd> {
    Err(io::Error::from_raw_os_error(libc::ENOSYS))
}

fn openat(dirfd: RawFd, name: &CStr, flags: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: `name` is NUL-terminated; a non-negative result is a fresh descriptor we own.
    let fd = unsafe { libc::openat(dirfd, name.as_ptr(), flags | libc::O_NOFOLLOW) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: see above.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn open_component(
    dirfd: RawFd,
    name: &CStr,
    flags: libc::c_int,
    mode: ResolveMode,
) -> io::Result<OwnedFd> {
    let flags = flags | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    if mode == ResolveMode::Auto && OPENAT2.load(Ordering::Relaxed) != OPENAT2_NO {
        match openat2(dirfd, name, flags) {
            Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => {
                OPENAT2.store(OPENAT2_NO, Ordering::Relaxed);
            }
            other => {
                if other.is_ok() {
                    OPENAT2.store(OPENAT2_YES, Ordering::Relaxed);
                }
                return other;
            }
        }
    }
    openat(dirfd, name, flags)
}

/// Whether this process has seen `openat2` work (`Some(true)`), fail with ENOSYS
/// (`Some(false)`), or not tried yet (`None`).
pub fn openat2_available() -> Option<bool> {
    match OPENAT2.load(Ordering::Relaxed) {
        OPENAT2_YES => Some(true),
        OPENAT2_NO => Some(false),
        _ => None,
    }
}

fn fstat(fd: RawFd) -> io::Result<libc::stat> {
    // SAFETY: an all-zero `stat` is a valid value to be overwritten by fstat.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `fd` is an open descriptor and `st` a valid out-pointer.
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st)
}

fn lstat_at(dirfd: RawFd, name: &CStr) -> Option<libc::stat> {
    // SAFETY: as in `fstat`.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `name` NUL-terminated, `st` a valid out-pointer.
    let r = unsafe { libc::fstatat(dirfd, name.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) };
    (r == 0).then_some(st)
}

fn kind_of(mode: libc::mode_t) -> EntryKind {
    match mode & libc::S_IFMT {
        libc::S_IFREG => EntryKind::File,
        libc::S_IFDIR => EntryKind::Dir,
        libc::S_IFLNK => EntryKind::Symlink,
        _ => EntryKind::Other,
    }
}

fn kind_name(mode: libc::mode_t) -> &'static str {
    match mode & libc::S_IFMT {
        libc::S_IFREG => "regular file",
        libc::S_IFDIR => "directory",
        libc::S_IFLNK => "symbolic link",
        libc::S_IFIFO => "FIFO",
        libc::S_IFSOCK => "socket",
        libc::S_IFCHR => "character device",
        libc::S_IFBLK => "block device",
        _ => "unknown file type",
    }
}

fn io_err(path: &str, e: &io::Error) -> Error {
    Error::Io {
        path: path.to_string(),
        detail: e.to_string(),
    }
}

/// Reads at most `cap + 1` bytes and refuses a file over `cap` or whose length differs from
/// `stat_size` (it grew or shrank between `fstat` and the end of the read).
pub fn read_capped(mut r: impl Read, stat_size: u64, cap: u64, path: &str) -> Result<Vec<u8>> {
    if stat_size > cap {
        return Err(Error::TooLarge {
            path: path.to_string(),
            size: stat_size,
            cap,
        });
    }
    let mut buf = Vec::with_capacity(usize::try_from(stat_size).unwrap_or(0));
    (&mut r)
        .take(cap.saturating_add(1))
        .read_to_end(&mut buf)
        .map_err(|e| io_err(path, &e))?;
    let read = buf.len() as u64;
    if read > cap {
        return Err(Error::TooLarge {
            path: path.to_string(),
            size: read,
            cap,
        });
    }
    if read != stat_size {
        return Err(Error::SizeChanged {
            path: path.to_string(),
            expected: stat_size,
            read,
        });
    }
    Ok(buf)
}

/// An opened, verified registry root.
#[derive(Debug)]
pub struct TrustedRoot {
    fd: OwnedFd,
    policy: TrustPolicy,
}

fn split_rel(rel: &str) -> Result<Vec<CString>> {
    if rel.is_empty() || rel == "." {
        return Ok(Vec::new());
    }
    rel.split('/')
        .map(|seg| {
            if !is_safe_segment(seg) {
                return Err(Error::UnsafePath {
                    path: rel.to_string(),
                    detail: format!("unsafe segment {seg:?}"),
                });
            }
            CString::new(seg).map_err(|_| Error::UnsafePath {
                path: rel.to_string(),
                detail: "NUL in path".into(),
            })
        })
        .collect()
}

impl TrustedRoot {
    /// Opens `root` as a directory without following a symlink at its last component and checks
    /// owner and mode. A missing root is [`Error::RootMissing`].
    pub fn open(root: &Path, policy: TrustPolicy) -> Result<Self> {
        let c = CString::new(root.as_os_str().as_bytes()).map_err(|_| Error::UnsafePath {
            path: ".".into(),
            detail: "NUL in root path".into(),
        })?;
        let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        // SAFETY: `c` is NUL-terminated; a non-negative result is a descriptor we own.
        let fd = unsafe { libc::open(c.as_ptr(), flags) };
        if fd < 0 {
            let e = io::Error::last_os_error();
            return Err(match e.raw_os_error() {
                Some(libc::ENOENT) => Error::RootMissing {
                    path: root.display().to_string(),
                },
                Some(libc::ELOOP) => Error::Symlink { path: ".".into() },
                Some(libc::ENOTDIR) => {
                    // Either a symlink (O_NOFOLLOW|O_DIRECTORY) or a plain non-directory.
                    let is_link = std::fs::symlink_metadata(root)
                        .map(|m| m.file_type().is_symlink())
                        .unwrap_or(false);
                    if is_link {
                        Error::Symlink { path: ".".into() }
                    } else {
                        Error::NotRegularFile {
                            path: ".".into(),
                            kind: "not a directory",
                        }
                    }
                }
                _ => io_err(".", &e),
            });
        }
        // SAFETY: fd >= 0 was just returned by open.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let root = TrustedRoot { fd, policy };
        root.check_dir(root.fd.as_raw_fd(), ".")?;
        Ok(root)
    }

    /// The policy this root was opened with.
    pub fn policy(&self) -> &TrustPolicy {
        &self.policy
    }

    fn check_dir(&self, fd: RawFd, path: &str) -> Result<()> {
        let st = fstat(fd).map_err(|e| io_err(path, &e))?;
        if st.st_mode & libc::S_IFMT != libc::S_IFDIR {
            return Err(Error::NotRegularFile {
                path: path.into(),
                kind: kind_name(st.st_mode),
            });
        }
        self.check_owner(&st, path)?;
        let mode = st.st_mode & 0o7777;
        if mode & 0o022 != 0 {
            return Err(Error::WritableDirectory {
                path: path.into(),
                mode,
            });
        }
        Ok(())
    }

    fn check_owner(&self, st: &libc::stat, path: &str) -> Result<()> {
        if !self.policy.owner_ok(st.st_uid) {
            return Err(Error::ForeignOwner {
                path: path.into(),
                uid: st.st_uid,
                trusted: self
                    .policy
                    .trusted_uid
                    .map(|u| format!(" {u}"))
                    .unwrap_or_default(),
            });
        }
        Ok(())
    }

    fn open_err(&self, dirfd: RawFd, name: &CStr, path: &str, e: &io::Error) -> Error {
        let st = lstat_at(dirfd, name);
        if st.is_some_and(|s| s.st_mode & libc::S_IFMT == libc::S_IFLNK) {
            return Error::Symlink { path: path.into() };
        }
        match e.raw_os_error() {
            Some(libc::ENOENT) => Error::Missing { path: path.into() },
            Some(libc::ELOOP) => Error::Symlink { path: path.into() },
            Some(libc::EXDEV) => Error::UnsafePath {
                path: path.into(),
                detail: "resolves outside the root".into(),
            },
            Some(libc::ENOTDIR) | Some(libc::ENXIO) => Error::NotRegularFile {
                path: path.into(),
                kind: st
                    .map(|s| kind_name(s.st_mode))
                    .unwrap_or("not a directory"),
            },
            _ => io_err(path, e),
        }
    }

    /// Walks `comps` as directories from the root, checking each; returns the last descriptor
    /// (`None` = the root itself).
    fn walk_dirs(&self, comps: &[CString]) -> Result<Option<OwnedFd>> {
        let mut cur: Option<OwnedFd> = None;
        let mut done = String::new();
        for c in comps {
            if !done.is_empty() {
                done.push('/');
            }
            done.push_str(&c.to_string_lossy());
            let dirfd = cur.as_ref().map_or(self.fd.as_raw_fd(), AsRawFd::as_raw_fd);
            let flags = libc::O_RDONLY | libc::O_DIRECTORY;
            let fd = open_component(dirfd, c, flags, self.policy.resolve)
                .map_err(|e| self.open_err(dirfd, c, &done, &e))?;
            self.check_dir(fd.as_raw_fd(), &done)?;
            cur = Some(fd);
        }
        Ok(cur)
    }

    /// Opens and verifies the directory `rel` (`"."` for the root) and lists its entries.
    pub fn list_dir(&self, rel: &str) -> Result<Vec<DirEntry>> {
        let comps = split_rel(rel)?;
        let dir = self.walk_dirs(&comps)?;
        let fd = dir.as_ref().map_or(self.fd.as_raw_fd(), AsRawFd::as_raw_fd);
        list_fd(fd, rel)
    }

    /// Does `rel` exist as a directory that passes the policy? `Ok(false)` when it is missing.
    pub fn dir_exists(&self, rel: &str) -> Result<bool> {
        let comps = split_rel(rel)?;
        match self.walk_dirs(&comps) {
            Ok(_) => Ok(true),
            Err(Error::Missing { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Opens `rel` beneath the root under the policy and reads it whole, refusing anything over
    /// `cap` or changing size during the read.
    pub fn read_file(&self, rel: &str, cap: u64) -> Result<(Vec<u8>, FileMeta)> {
        let comps = split_rel(rel)?;
        let Some((last, dirs)) = comps.split_last() else {
            return Err(Error::NotRegularFile {
                path: ".".into(),
                kind: "directory",
            });
        };
        let parent = self.walk_dirs(dirs)?;
        let dirfd = parent
            .as_ref()
            .map_or(self.fd.as_raw_fd(), AsRawFd::as_raw_fd);
        let flags = libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY;
        let fd = open_component(dirfd, last, flags, self.policy.resolve)
            .map_err(|e| self.open_err(dirfd, last, rel, &e))?;
        let st = fstat(fd.as_raw_fd()).map_err(|e| io_err(rel, &e))?;
        if st.st_mode & libc::S_IFMT != libc::S_IFREG {
            return Err(Error::NotRegularFile {
                path: rel.into(),
                kind: kind_name(st.st_mode),
            });
        }
        self.check_owner(&st, rel)?;
        let mode = st.st_mode & 0o7777;
        if mode & !0o644 != 0 {
            return Err(Error::InsecureMode {
                path: rel.into(),
                mode,
            });
        }
        let size = u64::try_from(st.st_size).unwrap_or(u64::MAX);
        let file = std::fs::File::from(fd);
        let bytes = read_capped(file, size, cap, rel)?;
        Ok((
            bytes,
            FileMeta {
                size,
                mode,
                uid: st.st_uid,
                inode: st.st_ino,
                dev: st.st_dev,
            },
        ))
    }
}

/// Lists a directory descriptor (a duplicate is consumed by `fdopendir`).
fn list_fd(fd: RawFd, rel: &str) -> Result<Vec<DirEntry>> {
    struct Dir(*mut libc::DIR);
    impl Drop for Dir {
        fn drop(&mut self) {
            // SAFETY: the pointer came from a successful fdopendir and is closed once.
            unsafe { libc::closedir(self.0) };
        }
    }
    // SAFETY: dup of an open descriptor.
    let dup = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
    if dup < 0 {
        return Err(io_err(rel, &io::Error::last_os_error()));
    }
    // SAFETY: `dup` is a fresh directory descriptor; on success the DIR owns it.
    let dirp = unsafe { libc::fdopendir(dup) };
    if dirp.is_null() {
        let e = io::Error::last_os_error();
        // SAFETY: fdopendir failed, so we still own `dup`.
        unsafe { libc::close(dup) };
        return Err(io_err(rel, &e));
    }
    let dir = Dir(dirp);
    // SAFETY: rewind so a descriptor shared with an earlier listing starts at the beginning.
    unsafe { libc::rewinddir(dir.0) };
    let mut out = Vec::new();
    loop {
        // SAFETY: `dir.0` is a valid DIR*; readdir returns NULL at the end or on error.
        let ent = unsafe { libc::readdir(dir.0) };
        if ent.is_null() {
            break;
        }
        // SAFETY: a non-null dirent from readdir holds a NUL-terminated d_name, valid until the
        // next readdir on this DIR.
        let (name, d_type) = unsafe { (CStr::from_ptr((*ent).d_name.as_ptr()), (*ent).d_type) };
        let bytes = name.to_bytes();
        if bytes == b"." || bytes == b".." {
            continue;
        }
        let Ok(s) = std::str::from_utf8(bytes) else {
            continue;
        };
        let kind = match d_type {
            libc::DT_REG => EntryKind::File,
            libc::DT_DIR => EntryKind::Dir,
            libc::DT_LNK => EntryKind::Symlink,
            libc::DT_UNKNOWN => lstat_at(fd, name)
                .map(|st| kind_of(st.st_mode))
                .unwrap_or(EntryKind::Other),
            _ => EntryKind::Other,
        };
        out.push(DirEntry {
            name: s.to_string(),
            kind,
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader that returns more bytes than `fstat` promised (a file growing during the read).
    struct Growing {
        left: usize,
    }
    impl Read for Growing {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = buf.len().min(self.left).min(7);
            buf.iter_mut().take(n).for_each(|b| *b = b'x');
            self.left -= n;
            Ok(n)
        }
    }

    #[test]
    fn read_capped_catches_growth_and_shrink() {
        let ok = read_capped(&b"hello"[..], 5, 10, "f").unwrap();
        assert_eq!(ok, b"hello");
        let e = read_capped(Growing { left: 50 }, 20, 100, "f").unwrap_err();
        assert!(
            matches!(
                e,
                Error::SizeChanged {
                    expected: 20,
                    read: 50,
                    ..
                }
            ),
            "{e}"
        );
        let e = read_capped(Growing { left: 500 }, 20, 100, "f").unwrap_err();
        assert!(matches!(e, Error::TooLarge { size: 101, .. }), "{e}");
        let e = read_capped(&b"abc"[..], 5, 10, "f").unwrap_err();
        assert_eq!(e.code(), "FILE_CHANGED");
        let e = read_capped(&b""[..], 11, 10, "f").unwrap_err();
        assert_eq!(e.code(), "FILE_TOO_LARGE");
        // Exactly at the cap is fine.
        assert_eq!(
            read_capped(&b"0123456789"[..], 10, 10, "f").unwrap().len(),
            10
        );
    }

    #[test]
    fn unsafe_relative_paths() {
        for bad in ["../x", "a//b", "/abs", "a/./b", "a\\b"] {
            assert!(split_rel(bad).is_err(), "{bad}");
        }
        assert!(split_rel(".").unwrap().is_empty());
    }

    proptest::proptest! {
        /// `read_capped` against the obvious rule: accept exactly when the bytes fit the cap
        /// and equal the size `fstat` promised.
        #[test]
        fn read_capped_matches_the_rule(len in 0usize..64, stat in 0u64..64, cap in 0u64..64) {
            let data = vec![7u8; len];
            let got = read_capped(&data[..], stat, cap, "f");
            let ok = stat <= cap && (len as u64) <= cap && len as u64 == stat;
            proptest::prop_assert_eq!(got.is_ok(), ok);
            if let Ok(b) = got {
                proptest::prop_assert_eq!(b, data);
            }
        }
    }
}
