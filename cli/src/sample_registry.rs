//! The sample registry compiled into the binary (`testdata/registry`, see `build.rs`):
//! `kvexact demo`'s default works from any directory and after `cargo install`, because it no
//! longer depends on the source tree being where it was built.
//!
//! The registry loader reads a directory and applies the trust policy to it, so the embedded
//! files are written out to a fresh private directory (mode 0700 under the system temporary
//! directory, files 0644) and loaded from there exactly as the gateway loads a real root; the
//! directory is removed when the [`SampleRoot`] is dropped.

use std::io;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

include!(concat!(env!("OUT_DIR"), "/sample_registry.rs"));

/// A private copy of the embedded sample registry on disk; removed on drop.
#[derive(Debug)]
pub struct SampleRoot {
    dir: PathBuf,
}

impl SampleRoot {
    /// Writes the embedded registry out to a fresh directory.
    pub fn materialize() -> io::Result<SampleRoot> {
        let base = std::env::temp_dir();
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let mut last = None;
        for attempt in 0..16u32 {
            let dir = base.join(format!(
                "kvexact-sample-registry-{}-{nanos:08x}-{attempt}",
                std::process::id()
            ));
            // `create` (not `create_all`) fails if the name exists: never write into a
            // directory somebody else made.
            match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
                Ok(()) => {
                    let root = SampleRoot { dir };
                    root.write_files()?;
                    return Ok(root);
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| io::Error::other("no free directory name")))
    }

    fn write_files(&self) -> io::Result<()> {
        for (rel, bytes) in FILES {
            let path = self.dir.join(rel);
            if let Some(parent) = path.parent() {
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o755)
                    .create(parent)?;
                // The umask may have narrowed it; the trust policy wants no group/world write.
                std::fs::set_permissions(parent, std::fs::Permissions::from_mode(0o755))?;
            }
            std::fs::write(&path, bytes)?;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644))?;
        }
        std::fs::set_permissions(&self.dir, std::fs::Permissions::from_mode(0o700))
    }

    /// The registry root.
    pub fn path(&self) -> &Path {
        &self.dir
    }
}

impl Drop for SampleRoot {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The embedded copy is the checked-in registry, file for file and byte for byte.
    #[test]
    fn embedded_registry_equals_the_source_tree() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/registry");
        let root = SampleRoot::materialize().expect("materialize");
        let mut n = 0;
        for (rel, bytes) in FILES {
            assert_eq!(
                std::fs::read(src.join(rel)).expect("source file"),
                *bytes,
                "{rel}"
            );
            assert_eq!(std::fs::read(root.path().join(rel)).expect("copy"), *bytes);
            n += 1;
        }
        assert!(FILES.iter().any(|(r, _)| *r == "qwen3-06b-default-v1.yaml"));
        assert!(n > 10, "{n} files");
        let dir = root.path().to_path_buf();
        drop(root);
        assert!(!dir.exists(), "removed on drop");
    }
}
