//! Arbitrary bytes as a deployment document (`kvprofile_core::deployment::Deployment::parse`),
//! resolved against every engine release of the built-in catalog and built into its hasher
//! (`kvprobe::deployment::DeploymentKeys`), and as a request body whose `cache_salt` and
//! adapter that deployment keys (`body_keys`, `request_hasher`), and as the engine evidence
//! the deployment is checked against (vLLM's `/metrics` text, `/v1/models` and SGLang's
//! `/get_server_info` JSON: `kvprobe::deployment_check`): each returns Ok or Err (or a list
//! of mismatches), never panics, and a resolved deployment hashes a short id list.
#![no_main]

use kvprobe::deployment::DeploymentKeys;
use kvprofile_core::deployment::Deployment;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The document and the body share the input: split at the first NUL.
    let (doc, body) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &b"{}"[..]),
    };
    let Ok(d) = Deployment::parse(doc, "<fuzz>") else {
        return;
    };
    let Ok(all) = kvprobe::contract::all() else {
        return;
    };
    for c in all.iter().filter(|c| c.hash().is_some()).take(32) {
        let Ok(keys) = DeploymentKeys::new(c.clone(), &d, "<fuzz>") else {
            continue;
        };
        let ids: Vec<u32> = (0..40).collect();
        let mut out = [0u64; 8];
        let _ = keys.hasher().block_hashes_u64(&ids, &mut out);
        if let Ok(k) = keys.body_keys(body) {
            if let Ok(h) = keys.request_hasher(k.as_keys()) {
                let _ = h.block_hashes_u64(&ids, &mut out);
            }
        }
        let _ =
            kvprobe::deployment_check::check_vllm_metrics(&keys, &String::from_utf8_lossy(body));
        if let Ok(v) = serde_json::from_slice::<serde_json::Value>(body) {
            let _ = kvprobe::deployment_check::check_vllm_models(&keys, &v);
            let _ = kvprobe::deployment_check::check_sglang_server_info(&keys, &v);
        }
    }
});
