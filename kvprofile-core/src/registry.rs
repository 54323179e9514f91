//! The registry holder: the currently served generation behind a pointer swap (docs/contracts/registry.md §7).

use std::path::Path;
use std::sync::{Arc, Mutex, RwLock};

use crate::error::Result;
use crate::generation::{Generation, LoadOptions};
use crate::validator::ArtifactValidator;

/// Holds the served generation. Readers take an `Arc<Generation>` snapshot (the lock is held
/// only for the pointer clone); a publish loads the next generation outside the lock and swaps
/// it in only when the whole load succeeded, so a refused load leaves the previous generation
/// serving unchanged.
#[derive(Debug)]
pub struct Registry {
    current: RwLock<Arc<Generation>>,
    publish: Mutex<()>,
}

impl Default for Registry {
    fn default() -> Self {
        Self::new()
    }
}

impl Registry {
    /// A registry serving generation 0 (nothing published).
    pub fn new() -> Self {
        Registry {
            current: RwLock::new(Arc::new(Generation::empty())),
            publish: Mutex::new(()),
        }
    }

    /// The generation served now.
    pub fn current(&self) -> Arc<Generation> {
        let guard = self.current.read().unwrap_or_else(|p| p.into_inner());
        Arc::clone(&guard)
    }

    /// Loads `root` as generation `current + 1` and publishes it; on any error nothing changes
    /// and the error (naming the file) is returned. Publishes are serialised.
    pub fn publish(
        &self,
        root: &Path,
        opts: &LoadOptions,
        validator: &dyn ArtifactValidator,
    ) -> Result<Arc<Generation>> {
        let _one_at_a_time = self.publish.lock().unwrap_or_else(|p| p.into_inner());
        let next_number = self.current().number() + 1;
        let next = Arc::new(Generation::load(root, next_number, opts, validator)?);
        let mut guard = self.current.write().unwrap_or_else(|p| p.into_inner());
        *guard = Arc::clone(&next);
        Ok(next)
    }
}
