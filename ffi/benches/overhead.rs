//! `ffi_overhead`: the cost of the C ABI boundary on the hash hot path.
//!
//! Hashes the same 4096 token ids (256 blocks of 16, vLLM `sha256_cbor`, seed "0") through
//! `kvexact_block_hashes_u64` and through the Rust call it wraps
//! (`kvhash::BlockHasher::block_hashes_u64`) in the same run; the difference is the per-call
//! overhead of the ABI (panic boundary, pointer checks, Arc deref). A 16-id (one block) pair
//! shows the overhead against a small call, and a NULL-hasher call measures the boundary alone.
//!
//! Run: `cargo bench -p kvexact-ffi --bench overhead`

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use kvexact::enums::KVEXACT_SHA256_CBOR;
use kvexact::hasher::{
    kvexact_block_hashes_u64, kvexact_hasher, kvexact_hasher_free, kvexact_hasher_new,
};
use kvhash::vllm::{HashAlgo, VllmHasher};
use kvhash::BlockHasher;

fn ids(n: usize) -> Vec<u32> {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % 152_000) as u32
        })
        .collect()
}

fn overhead(c: &mut Criterion) {
    let rust: BlockHasher = VllmHasher::new(HashAlgo::Sha256Cbor, 16, Some("0"))
        .expect("hasher")
        .into();
    let mut ffi: *mut kvexact_hasher = std::ptr::null_mut();
    // SAFETY: valid seed bytes and out pointer.
    let st = unsafe {
        kvexact_hasher_new(
            KVEXACT_SHA256_CBOR,
            16,
            b"0".as_ptr(),
            1,
            &mut ffi,
            std::ptr::null_mut(),
        )
    };
    assert_eq!(st, 0);

    for n in [4096usize, 16] {
        let ids = ids(n);
        let mut out = vec![0u64; 256];
        // Same answers first.
        let mut check = vec![0u64; 256];
        let a = rust.block_hashes_u64(&ids, &mut check).expect("hash");
        // SAFETY: buffers are valid for the given lengths.
        let b = unsafe {
            kvexact_block_hashes_u64(ffi, ids.as_ptr(), ids.len(), 1, out.as_mut_ptr(), out.len())
        };
        assert_eq!(b as usize, a);
        assert_eq!(out[..a], check[..a]);

        let mut g = c.benchmark_group(format!("ffi_overhead/{n}_ids"));
        g.throughput(Throughput::Elements(n as u64));
        g.bench_function("rust_kvhash", |bench| {
            bench.iter(|| {
                rust.block_hashes_u64(black_box(&ids), black_box(&mut out))
                    .expect("hash")
            })
        });
        g.bench_function("c_abi", |bench| {
            bench.iter(|| unsafe {
                // SAFETY: as above.
                kvexact_block_hashes_u64(
                    black_box(ffi),
                    black_box(ids.as_ptr()),
                    ids.len(),
                    1,
                    out.as_mut_ptr(),
                    out.len(),
                )
            })
        });
        g.finish();
    }
    c.bench_function("ffi_overhead/boundary_only_null_hasher", |bench| {
        bench.iter(|| unsafe {
            // SAFETY: a NULL hasher is a status, never dereferenced.
            kvexact_block_hashes_u64(
                black_box(std::ptr::null()),
                std::ptr::null(),
                0,
                1,
                std::ptr::null_mut(),
                0,
            )
        })
    });
    // SAFETY: the one reference from kvexact_hasher_new.
    unsafe { kvexact_hasher_free(ffi) };
}

criterion_group!(benches, overhead);
criterion_main!(benches);
