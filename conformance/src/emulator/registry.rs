//! A throw-away copy of a registry root for tests: copied with modes the trust policy accepts
//! (directories 0755, files 0644), editable (manifests for other engines, removed files), and
//! deleted on drop.

use kvprobe::Engine;
use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// A temporary registry root.
#[derive(Debug)]
pub struct TempRegistry {
    root: PathBuf,
}

impl TempRegistry {
    /// Copies `src` into a fresh directory under the system temp dir.
    pub fn copy_of(src: &Path) -> io::Result<TempRegistry> {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let root =
            std::env::temp_dir().join(format!("kvprobe-registry-{}-{n}", std::process::id()));
        if root.exists() {
            fs::remove_dir_all(&root)?;
        }
        copy_dir(src, &root)?;
        Ok(TempRegistry { root })
    }

    /// The root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Writes `manifests/<id>.yaml` staging the registry for `engine` (SGLang `0.5.18` with a
    /// `modelRevision`, TensorRT-LLM `1.3.0rc24`, vLLM `0.28.0`), keeping the image digest and
    /// revision of the existing manifest.
    pub fn stage_manifest(
        &self,
        profile_id: &str,
        engine: Engine,
        revision: Option<&str>,
    ) -> io::Result<()> {
        self.stage_manifest_version(profile_id, engine, None, revision)
    }

    /// [`TempRegistry::stage_manifest`] pinning engine version `version` (`None`: the default
    /// above).
    pub fn stage_manifest_version(
        &self,
        profile_id: &str,
        engine: Engine,
        version: Option<&str>,
        revision: Option<&str>,
    ) -> io::Result<()> {
        let (digest, default_version) = match engine {
            Engine::Vllm => (
                "sha256:61fc8a896b0a4fbbbdc063bc4b0dbc25ce98e02b5050c24aeb7830ac02039b14",
                "0.28.0",
            ),
            Engine::Sglang => (
                "sha256:9e148f5ac788e856a06166bd6347a831831eb9fcfab4d1770874823a7c29a1a1",
                "0.5.18",
            ),
            _ => (
                "sha256:a867619f00000000000000000000000000000000000000000000000000000000",
                "1.3.0rc24",
            ),
        };
        let version = version.unwrap_or(default_version);
        let mut text = format!(
            "profileId: {profile_id}\nimageDigest: \"{digest}\"\nengineVersion: \"{version}\"\n"
        );
        if let Some(r) = revision {
            text.push_str(&format!("modelRevision: \"{r}\"\n"));
        }
        self.write(&format!("manifests/{profile_id}.yaml"), text.as_bytes())
    }

    /// [`TempRegistry::stage_manifest_version`] with the endpoint's declared deployment
    /// (`deployment:`, a YAML or JSON flow mapping such as
    /// `{blockSize: 16, speculative: {method: eagle, numSpeculativeTokens: 2}}`).
    pub fn stage_manifest_deployment(
        &self,
        profile_id: &str,
        engine: Engine,
        version: &str,
        revision: Option<&str>,
        deployment: &str,
    ) -> io::Result<()> {
        self.stage_manifest_version(profile_id, engine, Some(version), revision)?;
        let rel = format!("manifests/{profile_id}.yaml");
        let mut text = fs::read_to_string(self.root.join(&rel))?;
        text.push_str(&format!("deployment: {deployment}\n"));
        self.write(&rel, text.as_bytes())
    }

    /// Writes a file (0644) beneath the root.
    pub fn write(&self, rel: &str, bytes: &[u8]) -> io::Result<()> {
        let p = self.root.join(rel);
        fs::write(&p, bytes)?;
        fs::set_permissions(&p, fs::Permissions::from_mode(0o644))
    }

    /// Removes a file or directory beneath the root.
    pub fn remove(&self, rel: &str) -> io::Result<()> {
        let p = self.root.join(rel);
        if p.is_dir() {
            fs::remove_dir_all(p)
        } else {
            fs::remove_file(p)
        }
    }
}

impl Drop for TempRegistry {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.root);
    }
}

fn copy_dir(src: &Path, dst: &Path) -> io::Result<()> {
    fs::create_dir_all(dst)?;
    fs::set_permissions(dst, fs::Permissions::from_mode(0o755))?;
    for entry in fs::read_dir(src)? {
        let entry = entry?;
        let ty = entry.file_type()?;
        let to = dst.join(entry.file_name());
        if ty.is_dir() {
            copy_dir(&entry.path(), &to)?;
        } else if ty.is_file() {
            fs::copy(entry.path(), &to)?;
            fs::set_permissions(&to, fs::Permissions::from_mode(0o644))?;
        }
    }
    Ok(())
}
