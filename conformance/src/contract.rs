//! The engine release a vector file names, resolved to its contract: the one step every
//! checker (`parity`, `cachehit`, …) shares, in a leaf module so that none of them needs
//! another.

/// The contract of the release a vector file names (`engine`, `engine_version`), or the
/// refusal line.
pub fn contract_of(engine: &str, version: &str) -> Result<kvprobe::contract::Contract, String> {
    let e = kvprobe::Engine::from_name(engine)
        .filter(|e| e.has_kv_plane())
        .ok_or_else(|| format!("REFUSED UNKNOWN_ENGINE: {engine:?}"))?;
    kvprobe::contract::resolve(e, version).map_err(|err| format!("REFUSED {}: {err}", err.code()))
}
