//! SGLang's KV-event hash namespaces (0.5.22 `--kv-events-config` format `dynamo`, 0.5.23's
//! default format for LoRA traffic): a stored page's published hash is re-hashed under a seed
//! made of the request's radix extra key (its LoRA adapter's id, after any caller-given
//! extra key) and its `cache_salt`, so that pages of different adapters or tenants are told
//! apart in the events (`kv_event_namespace_seed`, `namespaced_block_hash`; the rule and the
//! engine's own outputs: `testdata/vectors/kit/sglang-0.5.2{2,3}-namespaces.json`).
//!
//! * seed = SHA-256(`sglang-kv-event-namespace-v1` ‖ part(extra key) ‖ part(salt)), where
//!   part(none) = `00` and part(s) = `01` ‖ u64le(len(utf8 s)) ‖ utf8 s;
//! * published = the first 8 bytes, as a signed big-endian int64, of SHA-256(seed ‖ the page
//!   hash as an 8-byte big-endian signed integer); parents are namespaced the same way.
//!
//! An adapter launched with `--lora-paths name=path` has the id
//! `uuid5(NAMESPACE_URL, name + "\0" + path)` in lowercase hex without dashes
//! (`LoRARef.deterministic_id`, [`lora_id`]); one loaded at run time has a random id no
//! gateway can know.

use sha1::Digest as _;
use sha2::Sha256;

/// The domain tag of the seed.
const DOMAIN: &[u8] = b"sglang-kv-event-namespace-v1";

/// RFC 4122's URL namespace UUID, `6ba7b811-9dad-11d1-80b4-00c04fd430c8`.
const NAMESPACE_URL: [u8; 16] = [
    0x6b, 0xa7, 0xb8, 0x11, 0x9d, 0xad, 0x11, 0xd1, 0x80, 0xb4, 0x00, 0xc0, 0x4f, 0xd4, 0x30, 0xc8,
];

fn part(h: &mut Sha256, s: Option<&str>) {
    match s {
        None => h.update([0u8]),
        Some(s) => {
            h.update([1u8]);
            h.update((s.len() as u64).to_le_bytes());
            h.update(s.as_bytes());
        }
    }
}

/// The namespace seed of a request with radix extra key `extra_key` and `cache_salt`.
pub fn namespace_seed(extra_key: Option<&str>, cache_salt: Option<&str>) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(DOMAIN);
    part(&mut h, extra_key);
    part(&mut h, cache_salt);
    h.finalize().into()
}

/// The published hash of a page whose own hash is `page_hash` (SGLang's signed int64) under
/// `seed`.
pub fn namespaced_block_hash(seed: &[u8; 32], page_hash: i64) -> i64 {
    let mut h = Sha256::new();
    h.update(seed);
    h.update(page_hash.to_be_bytes());
    let d: [u8; 32] = h.finalize().into();
    i64::from_be_bytes([d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7]])
}

/// [`namespaced_block_hash`] on the `u64` bit pattern kvexact carries hashes in.
pub fn namespaced_u64(seed: &[u8; 32], page_hash: u64) -> u64 {
    namespaced_block_hash(seed, page_hash as i64) as u64
}

/// The id SGLang gives an adapter launched with `--lora-paths name=path` (a bare `path`
/// is `name` = `path`): `uuid5(NAMESPACE_URL, name + "\0" + path)`, 32 lowercase hex digits.
pub fn lora_id(name: &str, path: &str) -> String {
    let mut h = sha1::Sha1::new();
    sha1::Digest::update(&mut h, NAMESPACE_URL);
    sha1::Digest::update(&mut h, name.as_bytes());
    sha1::Digest::update(&mut h, [0u8]);
    sha1::Digest::update(&mut h, path.as_bytes());
    let d = sha1::Digest::finalize(h);
    let mut u = [0u8; 16];
    u.copy_from_slice(&d[..16]);
    u[6] = (u[6] & 0x0f) | 0x50; // version 5
    u[8] = (u[8] & 0x3f) | 0x80; // RFC 4122 variant
    u.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lora_id_is_uuid5_of_name_nul_path() {
        // Python: uuid.uuid5(uuid.NAMESPACE_URL, "sql-lora\0/adapters/sql-lora").hex
        assert_eq!(
            lora_id("sql-lora", "/adapters/sql-lora"),
            "b6929e6f70255da988f96d21061e2558"
        );
        assert_eq!(
            lora_id("chat-lora", "/adapters/chat-lora"),
            "1be637a233bf520e9d4b72f22d3b8499"
        );
    }
}
