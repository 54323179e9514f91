//! Shared helpers for kvexact's criterion benches (workload loading).

/// Deterministic pseudo-random token ids below `vocab` (xorshift64*, fixed seed), so that
/// every bench run hashes the same input.
pub fn pseudo_random_ids(n: usize, vocab: u32, seed: u64) -> Vec<u32> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            (x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 32) as u32 % vocab
        })
        .collect()
}
