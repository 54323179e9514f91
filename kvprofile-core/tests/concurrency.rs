//! Readers keep using generation N while N+1 publishes and N+2 is refused.

use crate::common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;

use common::*;
use kvprofile_core::{Generation, Registry, ResolveMode, StructuralValidator};

/// Everything a reader checks on a snapshot: lookups agree with the snapshot's own contents and
/// the verified bytes still hash to their receipts.
fn check_snapshot(g: &Generation) {
    let alpha = g.profile_for_model("org/alpha").unwrap();
    assert_eq!(alpha.generation, g.number());
    for p in g.profiles() {
        assert_eq!(p.generation, g.number());
        for r in p.artifacts.receipts() {
            let bytes = if r.relative_path == p.artifacts.tokenizer.receipt.relative_path {
                &p.artifacts.tokenizer.bytes
            } else {
                &p.artifacts.template.as_ref().unwrap().bytes
            };
            assert_eq!(sha(bytes), r.sha256);
        }
    }
    assert_eq!(g.discovery().set_digest, g.set_digest());
}

#[test]
fn readers_keep_their_generation_across_publish_and_refusal() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b, c) = (
        tmp.path().join("a"),
        tmp.path().join("b"),
        tmp.path().join("c"),
    );
    build_small(&a, 0);
    build_small(&b, 0);
    // N+1 differs: beta gains an alias (different document → different setDigest).
    let beta = std::fs::read_to_string(b.join("beta.yaml")).unwrap();
    put(
        &b,
        "beta.yaml",
        beta.replace("  - beta\n", "  - beta\n  - beta-2\n")
            .as_bytes(),
    );
    // N+2 is refused: an alias collision.
    build_small(&c, 0);
    let beta = std::fs::read_to_string(c.join("beta.yaml")).unwrap();
    put(
        &c,
        "beta.yaml",
        beta.replace("  - beta\n", "  - org/alpha\n").as_bytes(),
    );

    let o = opts(ResolveMode::Auto);
    let reg = Arc::new(Registry::new());
    let gn = reg.publish(&a, &o, &StructuralValidator).unwrap();
    let digest_n = gn.set_digest().to_string();

    const READERS: usize = 6;
    let start = Arc::new(Barrier::new(READERS + 1));
    let held = Arc::new(Barrier::new(READERS + 1));
    let stop = Arc::new(AtomicBool::new(false));
    let max_seen = Arc::new(AtomicU64::new(0));
    let mut handles = Vec::new();
    for _ in 0..READERS {
        let (reg, start, held, stop, max_seen) = (
            Arc::clone(&reg),
            Arc::clone(&start),
            Arc::clone(&held),
            Arc::clone(&stop),
            Arc::clone(&max_seen),
        );
        let digest_n = digest_n.clone();
        handles.push(thread::spawn(move || {
            start.wait();
            // Take generation N and hold it across the publishes.
            let mine = reg.current();
            assert_eq!(mine.number(), 1);
            held.wait();
            let mut last = 1;
            while !stop.load(Ordering::Relaxed) {
                check_snapshot(&mine);
                assert_eq!(mine.set_digest(), digest_n);
                assert!(mine.profile_for_model("beta-2").is_none());
                // Fresh snapshots only move forward and are always consistent.
                let now = reg.current();
                assert!(now.number() >= last);
                last = now.number();
                check_snapshot(&now);
                max_seen.fetch_max(last, Ordering::Relaxed);
            }
            mine.number()
        }));
    }
    start.wait();
    held.wait();
    let g2 = reg.publish(&b, &o, &StructuralValidator).unwrap();
    assert_eq!(g2.number(), 2);
    assert_ne!(g2.set_digest(), digest_n);
    assert!(g2.profile_for_model("beta-2").is_some());
    let e = reg.publish(&c, &o, &StructuralValidator).unwrap_err();
    assert_eq!((e.code(), e.path()), ("ALIAS_COLLISION", "beta.yaml"));
    // Let the readers observe generation 2 for a while, then stop.
    while max_seen.load(Ordering::Relaxed) < 2 {
        thread::yield_now();
    }
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        assert_eq!(h.join().unwrap(), 1);
    }
    let now = reg.current();
    assert!(Arc::ptr_eq(&now, &g2));
    assert_eq!(now.number(), 2);
    // Generation N is still intact for whoever holds it.
    check_snapshot(&gn);
    assert_eq!(gn.set_digest(), digest_n);
    // The next successful publish is numbered 3 (refusals consume no number).
    assert_eq!(
        reg.publish(&a, &o, &StructuralValidator).unwrap().number(),
        3
    );
}
