//! The attack suite: every case is refused with the file named, and the previous generation
//! keeps serving. Each case runs twice: with `openat2` (when the kernel has it) and with the
//! `openat(O_NOFOLLOW)` walk the fallback uses.

use crate::common;

use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use common::*;
use kvprofile_core::{
    ArtifactValidator, LoadOptions, Registry, RegistryError, ResolveMode, StructuralValidator,
};

const MODES: [ResolveMode; 2] = [ResolveMode::Auto, ResolveMode::OpenatWalk];

/// Publishes the good small registry (generation 1), applies `mutate`, publishes again and
/// returns the refusal after checking that generation 1 is still served.
fn refused_with(
    mode: ResolveMode,
    validator: &dyn ArtifactValidator,
    tweak_opts: impl Fn(&mut LoadOptions),
    mutate: impl FnOnce(&Path, &Small),
) -> RegistryError {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("reg");
    let small = build_small(&root, 0);
    let mut o = opts(mode);
    let reg = Registry::new();
    let g1 = reg
        .publish(&root, &o, validator)
        .unwrap_or_else(|e| panic!("good registry refused: {} {e}", e.code()));
    assert_eq!(g1.number(), 1);
    assert_eq!(g1.len(), 2);
    mutate(&root, &small);
    tweak_opts(&mut o);
    let err = match reg.publish(&root, &o, validator) {
        Ok(g) => panic!("attack accepted as generation {}", g.number()),
        Err(e) => e,
    };
    let now = reg.current();
    assert!(
        Arc::ptr_eq(&now, &g1),
        "previous generation no longer served"
    );
    assert_eq!(now.set_digest(), g1.set_digest());
    assert!(now.profile_for_model("org/alpha").is_some());
    // The error names a path relative to the root, never the absolute temp path.
    assert!(
        !err.to_string().contains(tmp.path().to_str().unwrap()),
        "{err}"
    );
    err
}

fn attack(mutate: impl Fn(&Path, &Small)) -> Vec<RegistryError> {
    MODES
        .iter()
        .map(|&m| refused_with(m, &StructuralValidator, |_| {}, &mutate))
        .collect()
}

fn expect(errs: Vec<RegistryError>, code: &str, path: &str) {
    for e in errs {
        assert_eq!(e.code(), code, "{e}");
        assert_eq!(e.path(), path, "{e}");
    }
}

#[test]
fn symlinked_artifact_file() {
    let tmp = tempfile::tempdir().unwrap();
    let outside = tmp.path().join("outside");
    let errs = attack(|root, s| {
        fs::copy(root.join(&s.tok), &outside).unwrap();
        fs::remove_file(root.join(&s.tok)).unwrap();
        symlink(&outside, root.join(&s.tok)).unwrap();
    });
    let s_tok = errs[0].path().to_string();
    assert!(s_tok.starts_with("artifacts/sha256/"));
    expect(errs, "SYMLINK", &s_tok);
}

#[test]
fn symlink_inside_the_root_is_refused_too() {
    let errs = attack(|root, s| {
        fs::rename(root.join(&s.tpl_a), root.join("artifacts/moved")).unwrap();
        symlink("../moved", root.join(&s.tpl_a)).unwrap();
    });
    for e in &errs {
        assert_eq!(e.code(), "SYMLINK");
        assert!(e.path().starts_with("artifacts/sha256/"), "{e}");
    }
}

#[test]
fn symlinked_directory() {
    expect(
        attack(|root, _| {
            fs::rename(root.join("artifacts/sha256"), root.join("artifacts/real")).unwrap();
            symlink("real", root.join("artifacts/sha256")).unwrap();
        }),
        "SYMLINK",
        "artifacts/sha256",
    );
}

#[test]
fn symlinked_root() {
    for mode in MODES {
        let tmp = tempfile::tempdir().unwrap();
        build_small(&tmp.path().join("real"), 0);
        symlink("real", tmp.path().join("reg")).unwrap();
        let e = kvprofile_core::Generation::load(
            &tmp.path().join("reg"),
            1,
            &opts(mode),
            &StructuralValidator,
        )
        .unwrap_err();
        assert_eq!((e.code(), e.path()), ("SYMLINK", "."), "{e}");
    }
}

#[test]
fn group_and_world_writable_files() {
    expect(
        attack(|root, _| set_mode(&root.join("alpha.yaml"), 0o664)),
        "INSECURE_MODE",
        "alpha.yaml",
    );
    expect(
        attack(|root, _| set_mode(&root.join("beta.yaml"), 0o646)),
        "INSECURE_MODE",
        "beta.yaml",
    );
}

#[test]
fn executable_file_mode_0755() {
    let e = attack(|root, s| set_mode(&root.join(&s.tpl_b), 0o755));
    let p = e[0].path().to_string();
    assert!(p.starts_with("artifacts/sha256/"));
    expect(e, "INSECURE_MODE", &p);
}

#[test]
fn group_and_world_writable_directories() {
    expect(
        attack(|root, _| set_mode(&root.join("artifacts"), 0o775)),
        "WRITABLE_DIRECTORY",
        "artifacts",
    );
    expect(
        attack(|root, _| set_mode(&root.join("artifacts/sha256"), 0o757)),
        "WRITABLE_DIRECTORY",
        "artifacts/sha256",
    );
    expect(
        attack(|root, _| set_mode(root, 0o777)),
        "WRITABLE_DIRECTORY",
        ".",
    );
    expect(
        attack(|root, _| set_mode(&root.join("probefixtures/alpha-v1/sglang"), 0o775)),
        "WRITABLE_DIRECTORY",
        "probefixtures/alpha-v1/sglang",
    );
}

#[test]
fn foreign_owner() {
    if euid() == 0 {
        // As root: hand one artifact to `nobody`; that file is named.
        let errs = attack(|root, s| {
            std::os::unix::fs::chown(root.join(&s.tok), Some(65534), Some(65534)).unwrap();
        });
        let p = errs[0].path().to_string();
        assert!(p.starts_with("artifacts/sha256/"));
        expect(errs, "FOREIGN_OWNER", &p);
        let errs = attack(|root, _| {
            std::os::unix::fs::chown(root.join("manifests"), Some(65534), None).unwrap();
        });
        expect(errs, "FOREIGN_OWNER", "manifests");
    } else {
        // Not root: trust another uid, so that our own files count as foreign (the root is
        // the first thing opened, so it is the one named).
        let other = euid().wrapping_add(4242);
        for mode in MODES {
            let e = refused_with(
                mode,
                &StructuralValidator,
                |o| o.policy.trusted_uid = Some(other),
                |_, _| {},
            );
            assert_eq!((e.code(), e.path()), ("FOREIGN_OWNER", "."), "{e}");
        }
    }
}

#[test]
fn path_traversal_in_locator() {
    for loc in [
        "../../../etc/passwd",
        "sha256/../../x",
        "/etc/passwd",
        "a//b",
        "http://x/y",
    ] {
        let errs = attack(|root, s| {
            let hex = s.tok.rsplit('/').next().unwrap();
            let doc = alpha_yaml(hex, s.tpl_a.rsplit('/').next().unwrap()).replace(
                &format!("tokenizerArtifact: sha256/{hex}"),
                &format!("tokenizerArtifact: {loc}"),
            );
            put(root, "alpha.yaml", doc.as_bytes());
        });
        for e in errs {
            assert_eq!(
                (e.code(), e.path()),
                ("PROFILE_INVALID", "alpha.yaml"),
                "{loc}: {e}"
            );
            assert!(e.to_string().contains("tokenizerArtifact"), "{e}");
        }
    }
}

#[test]
fn unknown_key() {
    let errs = attack(|root, _| {
        let doc = fs::read_to_string(root.join("beta.yaml")).unwrap();
        put(
            root,
            "beta.yaml",
            format!("{doc}kvBlockSize: 16\n").as_bytes(),
        );
    });
    for e in &errs {
        assert!(e.to_string().contains("kvBlockSize"), "{e}");
    }
    expect(errs, "PROFILE_SCHEMA", "beta.yaml");
}

#[test]
fn digest_mismatch() {
    let errs = attack(|root, s| {
        let p = root.join(&s.tok);
        let mut b = fs::read(&p).unwrap();
        b[0] = b' ';
        fs::write(&p, b).unwrap();
    });
    let p = errs[0].path().to_string();
    expect(errs, "TOKENIZER_SHA_MISMATCH", &p);
    let errs =
        attack(|root, s| fs::write(root.join(&s.tpl_b), "{{ strftime_now('%d') }}").unwrap());
    let p = errs[0].path().to_string();
    expect(errs, "TEMPLATE_SHA_MISMATCH", &p);
}

#[test]
fn oversized_file() {
    // A profile document just over its 1 MiB cap.
    let errs = attack(|root, _| {
        let doc = fs::read_to_string(root.join("alpha.yaml")).unwrap();
        let pad = format!("# {}\n", "x".repeat(1 << 20));
        put(root, "alpha.yaml", format!("{doc}{pad}").as_bytes());
    });
    expect(errs, "FILE_TOO_LARGE", "alpha.yaml");
    // An artifact over a configured cap.
    for mode in MODES {
        let e = refused_with(
            mode,
            &StructuralValidator,
            |o| o.policy.caps.artifact = 64,
            |_, _| {},
        );
        assert_eq!(e.code(), "FILE_TOO_LARGE", "{e}");
        assert!(e.path().starts_with("artifacts/sha256/"), "{e}");
    }
    // A fixture over its cap.
    let errs = attack(|root, _| {
        let big = format!(
            r#"{{"model": "org/alpha", "prompt": "{}"}}"#,
            "a".repeat(300 << 10)
        );
        fixture(
            root,
            "probefixtures/alpha-v1",
            "basic",
            &big,
            &[1],
            "completions",
            None,
        );
    });
    expect(
        errs,
        "FILE_TOO_LARGE",
        "probefixtures/alpha-v1/basic.request.json",
    );
}

#[test]
fn fifo_instead_of_a_file() {
    let errs = attack(|root, s| {
        let p = root.join(&s.tpl_a);
        fs::remove_file(&p).unwrap();
        let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
        // SAFETY: valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    });
    let p = errs[0].path().to_string();
    assert!(p.starts_with("artifacts/sha256/"));
    expect(errs, "NOT_REGULAR_FILE", &p);
    expect(
        attack(|root, _| {
            fs::create_dir(root.join("manifests/alpha-v1.yaml.d"))
                .map(|_| ())
                .and_then(|_| {
                    fs::remove_file(root.join("manifests/alpha-v1.yaml"))?;
                    fs::rename(
                        root.join("manifests/alpha-v1.yaml.d"),
                        root.join("manifests/alpha-v1.yaml"),
                    )
                })
                .unwrap()
        }),
        "NOT_REGULAR_FILE",
        "manifests/alpha-v1.yaml",
    );
}

#[test]
fn file_growing_while_read() {
    // A 6 MiB artifact appended to by a thread while loads run: every load is refused, and at
    // least one sees the growth during its own read (stat size vs read size).
    for mode in MODES {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("reg");
        let small = build_small(&root, 6 << 20);
        let o = opts(mode);
        let reg = Registry::new();
        let g1 = reg.publish(&root, &o, &StructuralValidator).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let path = root.join(&small.tok);
        let started = Arc::new(std::sync::Barrier::new(2));
        let writer = {
            let (stop, started) = (Arc::clone(&stop), Arc::clone(&started));
            std::thread::spawn(move || {
                use std::io::Write;
                let mut f = fs::OpenOptions::new().append(true).open(path).unwrap();
                f.write_all(b" ").unwrap();
                started.wait();
                while !stop.load(Ordering::Relaxed) {
                    f.write_all(b" ").unwrap();
                }
            })
        };
        started.wait();
        let mut saw_growth = false;
        for _ in 0..200 {
            let e = match reg.publish(&root, &o, &StructuralValidator) {
                Ok(g) => panic!("growing file accepted as generation {}", g.number()),
                Err(e) => e,
            };
            assert_eq!(e.path(), small.tok, "{e}");
            match e.code() {
                "FILE_CHANGED" => {
                    saw_growth = true;
                    break;
                }
                "TOKENIZER_SHA_MISMATCH" => {}
                other => panic!("unexpected {other}: {e}"),
            }
        }
        stop.store(true, Ordering::Relaxed);
        writer.join().unwrap();
        assert!(saw_growth, "no load observed the growth");
        assert!(Arc::ptr_eq(&reg.current(), &g1));
    }
}

#[test]
fn duplicate_profile_id() {
    let errs = attack(|root, _| {
        let doc = fs::read(root.join("alpha.yaml")).unwrap();
        put(root, "alpha2.yaml", &doc);
    });
    for e in &errs {
        assert!(
            e.to_string().contains("alpha.yaml"),
            "names both files: {e}"
        );
    }
    expect(errs, "DUPLICATE_PROFILE", "alpha2.yaml");
}

#[test]
fn alias_collision() {
    for alias in ["org/alpha", "org__alpha"] {
        let errs = attack(|root, _| {
            let doc = fs::read_to_string(root.join("beta.yaml")).unwrap();
            put(
                root,
                "beta.yaml",
                doc.replace("  - beta\n", &format!("  - {alias}\n"))
                    .as_bytes(),
            );
        });
        for e in &errs {
            assert!(
                e.to_string().contains("alpha-v1"),
                "names the other profile: {e}"
            );
        }
        expect(errs, "ALIAS_COLLISION", "beta.yaml");
    }
}

#[test]
fn missing_artifact() {
    let errs = attack(|root, s| fs::remove_file(root.join(&s.tpl_a)).unwrap());
    let p = errs[0].path().to_string();
    assert!(p.starts_with("artifacts/sha256/"));
    expect(errs, "MISSING", &p);
}

#[test]
fn template_that_does_not_compile() {
    let broken = "{% if messages %}{{ strftime_now('%Y') }}";
    for mode in MODES {
        let e = refused_with(
            mode,
            &BalancedBlocksValidator,
            |_| {},
            |root, s| {
                let h = sha(broken.as_bytes());
                put(root, &format!("artifacts/sha256/{h}"), broken.as_bytes());
                let tok = s.tok.rsplit('/').next().unwrap();
                put(root, "beta.yaml", beta_yaml(tok, &h).as_bytes());
            },
        );
        assert_eq!(
            (e.code(), e.path()),
            ("ARTIFACT_REJECTED", "beta.yaml"),
            "{e}"
        );
        assert!(e.to_string().contains("does not compile"), "{e}");
    }
}

#[test]
fn bos_token_that_does_not_resolve() {
    let errs = attack(|root, _| {
        let doc = fs::read_to_string(root.join("alpha.yaml")).unwrap();
        put(
            root,
            "alpha.yaml",
            doc.replace("bosToken: \"<s>\"", "bosToken: \"<bos>\"")
                .as_bytes(),
        );
    });
    expect(errs, "BOS_UNRESOLVED", "alpha.yaml");
}

#[test]
fn clock_policy_both_ways() {
    let errs = attack(|root, _| {
        let doc = fs::read_to_string(root.join("beta.yaml")).unwrap();
        put(
            root,
            "beta.yaml",
            doc.replace("  clockPolicy: utc-date\n", "").as_bytes(),
        );
    });
    expect(errs, "CLOCK_POLICY", "beta.yaml");
    let errs = attack(|root, _| {
        let doc = fs::read_to_string(root.join("alpha.yaml")).unwrap();
        put(
            root,
            "alpha.yaml",
            doc.replace("  eosToken", "  clockPolicy: utc-date\n  eosToken")
                .as_bytes(),
        );
    });
    expect(errs, "CLOCK_POLICY", "alpha.yaml");
}

#[test]
fn empty_fixture_set() {
    expect(
        attack(|root, _| fs::create_dir(root.join("probefixtures/beta-v1/trtllm")).unwrap()),
        "PROBE_FIXTURES_MISSING",
        "probefixtures/beta-v1/trtllm",
    );
    expect(
        attack(|root, _| {
            for n in ["basic", "chat-user-only"] {
                fs::remove_file(
                    root.join(format!("probefixtures/alpha-v1/sglang/{n}.expect.json")),
                )
                .unwrap();
            }
        }),
        "PROBE_FIXTURES_MISSING",
        "probefixtures/alpha-v1/sglang",
    );
}

#[test]
fn request_sha_drift() {
    expect(
        attack(|root, _| {
            put(
                root,
                "probefixtures/alpha-v1/trtllm/basic.request.json",
                br#"{"model": "org/alpha", "prompt": "a a "}"#,
            );
        }),
        "PROBE_FIXTURE_DRIFT",
        "probefixtures/alpha-v1/trtllm/basic.request.json",
    );
}

#[test]
fn fixture_clock_pairing_and_model() {
    expect(
        attack(|root, _| {
            let c = r#"{"model": "beta", "messages": [{"role": "user", "content": "a"}]}"#;
            fixture(
                root,
                "probefixtures/beta-v1",
                "chat-user-only",
                c,
                &[3],
                "chat",
                None,
            );
        }),
        "FIXTURE_INVALID",
        "probefixtures/beta-v1/chat-user-only.expect.json",
    );
    expect(
        attack(|root, _| {
            let c = r#"{"model": "org/gamma", "prompt": "a"}"#;
            fixture(
                root,
                "probefixtures/alpha-v1",
                "basic",
                c,
                &[3],
                "completions",
                None,
            );
        }),
        "FIXTURE_INVALID",
        "probefixtures/alpha-v1/basic.request.json",
    );
}

#[test]
fn manifest_for_another_profile() {
    expect(
        attack(|root, _| {
            let m = fs::read_to_string(root.join("manifests/alpha-v1.yaml")).unwrap();
            put(
                root,
                "manifests/alpha-v1.yaml",
                m.replace("alpha-v1", "beta-v1").as_bytes(),
            );
        }),
        "ENGINE_MANIFEST_INVALID",
        "manifests/alpha-v1.yaml",
    );
}

#[test]
fn a_profile_that_is_not_a_regular_file_is_refused() {
    // The gateway's loader skips such an entry (docs/contracts/registry.md §6); kvexact refuses it, naming the file,
    // and keeps the previous generation (QUIRKS.md, "Registry").
    expect(
        attack(|root, _| {
            let tmp = root.parent().unwrap().join("outside-beta.yaml");
            fs::rename(root.join("beta.yaml"), &tmp).unwrap();
            symlink(&tmp, root.join("beta.yaml")).unwrap();
        }),
        "SYMLINK",
        "beta.yaml",
    );
    expect(
        attack(|root, _| {
            fs::remove_file(root.join("beta.yaml")).unwrap();
            let c = std::ffi::CString::new(root.join("beta.yaml").to_str().unwrap()).unwrap();
            // SAFETY: valid NUL-terminated path.
            assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        }),
        "NOT_REGULAR_FILE",
        "beta.yaml",
    );
    expect(
        attack(|root, _| fs::create_dir(root.join("gamma.yaml")).unwrap()),
        "NOT_REGULAR_FILE",
        "gamma.yaml",
    );
}

#[test]
fn a_root_whose_only_profile_is_a_symlink_never_publishes_an_empty_generation() {
    for mode in MODES {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("reg");
        build_small(&root, 0);
        fs::remove_file(root.join("beta.yaml")).unwrap();
        fs::rename(root.join("alpha.yaml"), tmp.path().join("alpha.yaml")).unwrap();
        symlink(tmp.path().join("alpha.yaml"), root.join("alpha.yaml")).unwrap();
        let e = kvprofile_core::Generation::load(&root, 1, &opts(mode), &StructuralValidator)
            .unwrap_err();
        assert_eq!((e.code(), e.path()), ("SYMLINK", "alpha.yaml"));
    }
}

#[test]
fn deferred_publish_checks_the_type_of_every_staged_file() {
    // The C ABI publishes with deferred attestation: a FIFO manifest or fixture is refused at
    // load, as `kvexact registry verify` (which reads them) refuses it.
    for (rel, code) in [
        ("manifests/alpha-v1.yaml", "NOT_REGULAR_FILE"),
        (
            "probefixtures/alpha-v1/basic.request.json",
            "NOT_REGULAR_FILE",
        ),
    ] {
        let errs: Vec<_> = MODES
            .iter()
            .map(|&m| {
                refused_with(
                    m,
                    &StructuralValidator,
                    |o| o.attestation = kvprofile_core::AttestationCheck::Deferred,
                    |root, _| {
                        fs::remove_file(root.join(rel)).unwrap();
                        let c = std::ffi::CString::new(root.join(rel).to_str().unwrap()).unwrap();
                        // SAFETY: valid NUL-terminated path.
                        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
                    },
                )
            })
            .collect();
        expect(errs, code, rel);
    }
}

#[test]
fn deferred_attestation_files_do_not_block_publish() {
    // The gateway reads manifests and fixtures on demand (docs/contracts/registry.md §1): a drifted fixture does not
    // refuse the publish, but loading that set reports the drift.
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("reg");
    build_small(&root, 0);
    put(&root, "probefixtures/alpha-v1/basic.request.json", b"{}");
    let mut o = opts(ResolveMode::Auto);
    o.attestation = kvprofile_core::AttestationCheck::Deferred;
    let g = kvprofile_core::Generation::load(&root, 1, &o, &StructuralValidator).unwrap();
    let e = g
        .load_fixtures("alpha-v1", kvprofile_core::Engine::Vllm)
        .unwrap_err();
    assert_eq!(
        (e.code(), e.path()),
        (
            "PROBE_FIXTURE_DRIFT",
            "probefixtures/alpha-v1/basic.request.json"
        )
    );
    assert_eq!(
        g.load_fixtures("alpha-v1", kvprofile_core::Engine::Sglang)
            .unwrap()
            .fixtures
            .len(),
        2
    );
    assert!(g.load_manifest("beta-v1").unwrap().is_none());
    assert_eq!(
        g.load_manifest("alpha-v1")
            .unwrap()
            .unwrap()
            .manifest
            .engine_version,
        "0.28.0"
    );
}

#[test]
fn drift_check_rereads_receipts() {
    for mode in MODES {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("reg");
        let s = build_small(&root, 0);
        let g =
            kvprofile_core::Generation::load(&root, 1, &opts(mode), &StructuralValidator).unwrap();
        g.verify_disk("alpha-v1").unwrap();
        g.verify_disk("beta-v1").unwrap();
        // Same size, different bytes.
        let b = fs::read_to_string(root.join(&s.tpl_b)).unwrap();
        fs::write(root.join(&s.tpl_b), b.replace("%Y", "%y")).unwrap();
        let e = g.verify_disk("beta-v1").unwrap_err();
        assert_eq!(
            (e.code(), e.path()),
            ("PROFILE_DRIFT", s.tpl_b.as_str()),
            "{e}"
        );
        g.verify_disk("alpha-v1").unwrap();
        // A trust failure is reported as such.
        set_mode(&root.join(&s.tpl_a), 0o666);
        let e = g.verify_disk("alpha-v1").unwrap_err();
        assert_eq!(
            (e.code(), e.path()),
            ("INSECURE_MODE", s.tpl_a.as_str()),
            "{e}"
        );
        // The profile document is covered too.
        set_mode(&root.join(&s.tpl_a), 0o644);
        let doc = fs::read_to_string(root.join("alpha.yaml")).unwrap();
        put(
            &root,
            "alpha.yaml",
            doc.replace("modelType: llama", "modelType: llamb")
                .as_bytes(),
        );
        let e = g.verify_disk("alpha-v1").unwrap_err();
        assert_eq!((e.code(), e.path()), ("PROFILE_DRIFT", "alpha.yaml"), "{e}");
        assert_eq!(g.verify_disk("nope").unwrap_err().code(), "UNKNOWN_PROFILE");
    }
}

#[test]
fn missing_root_is_its_own_error() {
    let tmp = tempfile::tempdir().unwrap();
    let reg = Registry::new();
    let e = reg
        .publish(
            &tmp.path().join("absent"),
            &opts(ResolveMode::Auto),
            &StructuralValidator,
        )
        .unwrap_err();
    assert_eq!(e.code(), "ROOT_MISSING");
    assert_eq!(reg.current().number(), 0);
    assert!(reg.current().is_empty());
}

#[test]
fn openat2_was_exercised_or_reported_unavailable() {
    let tmp = tempfile::tempdir().unwrap();
    build_small(tmp.path(), 0);
    kvprofile_core::Generation::load(
        tmp.path(),
        1,
        &opts(ResolveMode::Auto),
        &StructuralValidator,
    )
    .unwrap();
    // Either the kernel served openat2 or it answered ENOSYS and the walk took over.
    let avail = kvprofile_core::trust::openat2_available();
    assert!(avail.is_some());
    eprintln!("openat2 available: {avail:?}");
}
