//! Runs the C test programs in `ffi/tests/c/` the way the gateway uses libkvexact: each is
//! compiled by the system C compiler (`cc`, or `$CC`) against `include/kvexact.h` and the
//! freshly built static library (`libkvexact.a` + `-lpthread -ldl -lm`), then run with the
//! repository root as its first argument (to find `testdata/`).
//! Environment for a program is passed explicitly (never `set_var` in the test process).

use std::path::{Path, PathBuf};
use std::process::Command;

const CRATE_DIR: &str = env!("CARGO_MANIFEST_DIR");

/// The profile directory (`target/debug` or `target/release`) this test binary was built into;
/// cargo builds the library's staticlib and cdylib there too.
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    // target/<profile>/deps/ffi-<hash> (the crate's test binary, tests/main.rs)
    exe.parent()
        .and_then(Path::parent)
        .expect("test binary lives in target/<profile>/deps")
        .to_path_buf()
}

/// The library this test binary was built with: `cargo test` writes it to `deps/`; a copy in
/// the profile dir (from an earlier `cargo build`) is used only when it is newer.
fn find_lib(file: &str) -> PathBuf {
    let dir = profile_dir();
    [dir.join("deps").join(file), dir.join(file)]
        .into_iter()
        .filter_map(|p| {
            let t = std::fs::metadata(&p).and_then(|m| m.modified()).ok()?;
            Some((t, p))
        })
        .max_by_key(|(t, _)| *t)
        .map(|(_, p)| p)
        .unwrap_or_else(|| panic!("{file} not found under {}", dir.display()))
}

fn repo_root() -> PathBuf {
    Path::new(CRATE_DIR).join("..")
}

/// Compiles `ffi/tests/c/<name>.c` (plus `extra` flags) into the profile dir as `exe_name`
/// and returns the executable's path.
fn compile(name: &str, exe_name: &str, link: &[&str], extra: &[&str]) -> PathBuf {
    let src = Path::new(CRATE_DIR)
        .join("tests/c")
        .join(format!("{name}.c"));
    compile_source(&src, exe_name, link, extra)
}

/// Compiles the C file `src` (plus `extra` flags) into the profile dir as `exe_name` and
/// returns the executable's path.
fn compile_source(src: &Path, exe_name: &str, link: &[&str], extra: &[&str]) -> PathBuf {
    let out_dir = profile_dir().join("kvexact-ctests");
    std::fs::create_dir_all(&out_dir).expect("create output dir");
    let exe = out_dir.join(exe_name);
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let output = Command::new(&cc)
        .args([
            "-std=c11",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-pedantic",
            "-g",
            "-O1",
        ])
        .arg("-I")
        .arg(repo_root().join("include"))
        .args(extra)
        .arg(src)
        .arg("-o")
        .arg(&exe)
        .args(link)
        .output()
        .unwrap_or_else(|e| panic!("run {cc}: {e}"));
    assert!(
        output.status.success(),
        "compiling {} failed:\n{}",
        src.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    exe
}

fn run(exe: &Path, envs: &[(&str, &str)]) {
    let output = Command::new(exe)
        .arg(repo_root())
        .envs(envs.iter().copied())
        .output()
        .unwrap_or_else(|e| panic!("run {}: {e}", exe.display()));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    print!("{stdout}");
    eprint!("{stderr}");
    assert!(
        output.status.success(),
        "{} failed ({}):\n{stdout}\n{stderr}",
        exe.display(),
        output.status
    );
}

/// Compile against the static library and run.
fn run_static(name: &str, envs: &[(&str, &str)]) {
    let lib = find_lib("libkvexact.a");
    let lib = lib.to_str().expect("UTF-8 path");
    let exe = compile(
        name,
        name,
        &[lib, "-lpthread", "-ldl", "-lm"],
        &["-pthread"],
    );
    run(&exe, envs);
}

#[test]
fn c_abi_basics() {
    run_static("abi_basics", &[]);
}

/// kvexact's own subscriber from C, both paths: a publisher nothing listens on (the rank
/// marked lost, as under ASan and valgrind), and the loopback emulator's ZMQ PUB, whose
/// prefix-cache reset this test posts (every 100 ms, until the program exits) so that the
/// program's own subscription sees an `AllBlocksCleared` batch whenever it reaches the
/// publisher.
#[cfg(feature = "subscriber")]
#[test]
fn c_subscriber() {
    use kvexact_conformance::emulator::{Emulator, EmulatorConfig, TempRegistry};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::Duration;
    run_static("subscriber", &[]);
    let reg = TempRegistry::copy_of(&repo_root().join("testdata/registry")).unwrap();
    let cfg =
        EmulatorConfig::from_registry(reg.root(), "qwen3-06b-default-v1", kvprobe::Engine::Vllm)
            .unwrap();
    let emu = Emulator::start(cfg).unwrap();
    let publisher = emu.events_endpoint().unwrap().to_string();
    let http = kvprobe::transport::HttpClient::new(emu.endpoint(), Duration::from_secs(5), 4096);
    let done = Arc::new(AtomicBool::new(false));
    let d = done.clone();
    let resets = std::thread::spawn(move || {
        while !d.load(Ordering::Relaxed) {
            let _ = http.post_json("/reset_prefix_cache", b"{}");
            std::thread::sleep(Duration::from_millis(100));
        }
    });
    let lib = find_lib("libkvexact.a");
    let exe = compile(
        "subscriber",
        "subscriber",
        &[
            lib.to_str().expect("UTF-8 path"),
            "-lpthread",
            "-ldl",
            "-lm",
        ],
        &["-pthread"],
    );
    run(&exe, &[("KVEXACT_TEST_PUBLISHER", &publisher)]);
    done.store(true, Ordering::Relaxed);
    resets.join().unwrap();
}

/// The same program linked against the shared library, to check the exported symbols, the way
/// an installed library is laid out (scripts/ffi-install.sh): the link step sees
/// `libkvexact.so`, the program runs from a directory that holds only `libkvexact.so.0`. It
/// loads only when the library's soname (what the link recorded as NEEDED) is
/// `libkvexact.so.<KVEXACT_ABI_VERSION>` (ffi/build.rs).
#[test]
fn c_abi_basics_shared() {
    let so = find_lib("libkvexact.so");
    let base = profile_dir().join("kvexact-ctests").join("shared");
    let (link_dir, run_dir) = (base.join("link"), base.join("run"));
    for dir in [&link_dir, &run_dir] {
        let _ = std::fs::remove_dir_all(dir);
        std::fs::create_dir_all(dir).expect("create lib dir");
    }
    std::fs::copy(&so, link_dir.join("libkvexact.so")).expect("copy libkvexact.so");
    let soname = format!("libkvexact.so.{}", kvexact::KVEXACT_ABI_VERSION);
    std::fs::copy(&so, run_dir.join(&soname)).expect("copy libkvexact.so.<abi>");
    let (link, run_at) = (
        link_dir.to_str().expect("UTF-8 path"),
        run_dir.to_str().expect("UTF-8 path"),
    );
    let exe = compile(
        "abi_basics",
        "abi_basics_shared",
        &["-L", link, "-lkvexact", &format!("-Wl,-rpath,{run_at}")],
        &[],
    );
    run(&exe, &[]);
}

/// The shared library's soname carries the ABI major: `readelf -d` (or `objdump -p`) shows
/// `SONAME libkvexact.so.0`. Skipped, with a message, where neither tool is installed.
#[test]
fn shared_library_soname_carries_the_abi_major() {
    if !cfg!(target_os = "linux") {
        eprintln!("skipped: the soname is set on Linux only");
        return;
    }
    let so = find_lib("libkvexact.so");
    let dump = [("readelf", ["-d"]), ("objdump", ["-p"])]
        .into_iter()
        .find_map(|(tool, args)| Command::new(tool).args(args).arg(&so).output().ok());
    let Some(output) = dump else {
        eprintln!("skipped: neither readelf nor objdump is installed");
        return;
    };
    assert!(output.status.success(), "dumping {} failed", so.display());
    let text = String::from_utf8_lossy(&output.stdout);
    let sonames: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("SONAME"))
        .filter_map(|l| l.split_whitespace().last())
        .map(|s| s.trim_matches(|c| c == '[' || c == ']'))
        .collect();
    assert_eq!(
        sonames,
        [format!("libkvexact.so.{}", kvexact::KVEXACT_ABI_VERSION)],
        "{}",
        so.display()
    );
}

/// The header compiles on its own as C89-compatible C99 and as C++.
#[test]
fn header_compiles_standalone_in_c_and_cpp() {
    let include = repo_root().join("include");
    for (compiler, std) in [("cc", "-std=c99"), ("c++", "-std=c++11")] {
        let output = Command::new(compiler)
            .args([
                std,
                "-Wall",
                "-Wextra",
                "-Werror",
                "-pedantic",
                "-fsyntax-only",
            ])
            .args(["-x", if compiler == "cc" { "c" } else { "c++" }])
            .arg(include.join("kvexact.h"))
            .output()
            .unwrap_or_else(|e| panic!("run {compiler}: {e}"));
        assert!(
            output.status.success(),
            "{compiler} {std}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

#[test]
fn c_hash_vectors() {
    run_static("hash_vectors", &[]);
}

/// 8 threads share handles while a publisher replaces them. Debug builds (plain `cargo test`)
/// run 8,000 calls; release builds (`cargo test --release`) the full 100,000.
#[test]
fn c_concurrency() {
    let iterations = if cfg!(debug_assertions) {
        "8000"
    } else {
        "100000"
    };
    run_static("concurrency", &[("KVEXACT_TEST_ITERATIONS", iterations)]);
}

#[test]
fn c_gateway_flow() {
    run_static("gateway_flow", &[]);
}

#[test]
fn c_events_trtllm() {
    run_static("events_trtllm", &[]);
}

#[test]
fn c_contracts() {
    run_static("contracts", &[]);
}

#[test]
fn c_drift() {
    run_static("drift", &[]);
}

/// Hostile input: a 512 MB body, 5000 messages, a 4 MiB word, a 62 MB event batch — typed
/// refusals within their memory bounds (ffi/tests/c/hostile.c).
#[test]
fn c_hostile() {
    run_static("hostile", &[]);
}

#[test]
fn c_route_keys() {
    run_static("route_keys", &[]);
}

/// A lifted tool request from C gives each engine's own ids (ffi/tests/c/lifted.c).
#[test]
fn c_lifted() {
    run_static("lifted", &[]);
}

/// The prefix index from C: a cache-hit replay's frames fed, every prediction equal to the
/// engine's own count, its error paths (ffi/tests/c/index.c).
#[test]
fn c_index() {
    run_static("index", &[]);
}

/// Deployments from C: look-ahead keys and a keyed adapter + salt equal vLLM 0.33.0's own
/// hashes, refusals name the option (ffi/tests/c/deployment.c).
#[test]
fn c_deployment() {
    run_static("deployment", &[]);
}

/// The C example (examples/c/encode_and_hash.c: resolve the release, encoder and hasher for
/// it, `kvexact_route_keys`) prints, for its default arguments, exactly
/// examples/encode_and_hash.out, as the Rust and Go examples do.
#[test]
fn c_example_prints_the_expected_keys() {
    let lib = find_lib("libkvexact.a");
    let lib = lib.to_str().expect("UTF-8 path");
    let src = repo_root().join("examples/c/encode_and_hash.c");
    let exe = compile_source(
        &src,
        "encode_and_hash",
        &[lib, "-lpthread", "-ldl", "-lm"],
        &["-pthread"],
    );
    let output = Command::new(&exe)
        .arg(repo_root().join("testdata/registry"))
        .arg("Qwen/Qwen3-0.6B")
        .output()
        .unwrap_or_else(|e| panic!("run {}: {e}", exe.display()));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{} failed ({}):\n{stdout}\n{}",
        exe.display(),
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let expected = std::fs::read_to_string(repo_root().join("examples/encode_and_hash.out"))
        .expect("read examples/encode_and_hash.out");
    assert_eq!(stdout, expected);
}

/// The C routing example (examples/c/route_subscribed.c) against two loopback emulators:
/// kvexact's own subscribers follow both engines' ZMQ PUBs (no ZMQ code in the program); the
/// engines are joined midway, so this test posts their prefix-cache resets until the program
/// says every stream is in step; then it sends a chat request to the second engine and hands
/// the program the same body: the program routes it there, with every full block cached.
#[cfg(feature = "subscriber")]
#[test]
fn c_example_routes_through_the_subscriber() {
    use kvexact_conformance::emulator::{Emulator, EmulatorConfig, TempRegistry};
    use std::io::{BufRead, BufReader, Write};
    use std::process::Stdio;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::Duration;
    let reg = TempRegistry::copy_of(&repo_root().join("testdata/registry")).unwrap();
    let start = || {
        let mut cfg = EmulatorConfig::from_registry(
            reg.root(),
            "qwen3-06b-default-v1",
            kvprobe::Engine::Vllm,
        )
        .unwrap();
        cfg.prefix_cache = Some(4096);
        Emulator::start(cfg).unwrap()
    };
    let (a, b) = (start(), start());
    let (model, version) = {
        let cfg = EmulatorConfig::from_registry(
            reg.root(),
            "qwen3-06b-default-v1",
            kvprobe::Engine::Vllm,
        )
        .unwrap();
        (cfg.model, cfg.version)
    };
    let http = |e: &Emulator| {
        kvprobe::transport::HttpClient::new(e.endpoint(), Duration::from_secs(5), 1 << 20)
    };
    let lib = find_lib("libkvexact.a");
    let exe = compile_source(
        &repo_root().join("examples/c/route_subscribed.c"),
        "route_subscribed",
        &[
            lib.to_str().expect("UTF-8 path"),
            "-lpthread",
            "-ldl",
            "-lm",
        ],
        &["-pthread"],
    );
    let mut child = Command::new(&exe)
        .arg(repo_root().join("testdata/registry"))
        .arg(&model)
        .arg(&version)
        .arg(a.events_endpoint().unwrap())
        .arg(b.events_endpoint().unwrap())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("run {}: {e}", exe.display()));
    // Resets until the program is ready (each engine's next AllBlocksCleared puts it in step).
    let done = Arc::new(AtomicBool::new(false));
    let resets = {
        let (d, ha, hb) = (done.clone(), http(&a), http(&b));
        std::thread::spawn(move || {
            while !d.load(Ordering::Relaxed) {
                let _ = ha.post_json("/reset_prefix_cache", b"{}");
                let _ = hb.post_json("/reset_prefix_cache", b"{}");
                std::thread::sleep(Duration::from_millis(100));
            }
        })
    };
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    out.read_line(&mut line).expect("read the program's output");
    done.store(true, Ordering::Relaxed);
    resets.join().unwrap();
    assert_eq!(line, "ready\n", "the program's first line");
    let body = serde_json::json!({
        "model": model,
        "messages": [
            {"role": "system", "content": "You are a terse assistant. ".repeat(8)},
            {"role": "user", "content": "Which replica already holds the KV cache for this conversation prefix?"}
        ],
        "max_tokens": 1
    });
    let body = serde_json::to_string(&body).unwrap();
    let r = http(&b)
        .post_json("/v1/chat/completions", body.as_bytes())
        .unwrap();
    assert_eq!(r.status, 200);
    {
        let mut stdin = child.stdin.take().expect("stdin");
        writeln!(stdin, "{body}").unwrap();
    } // closed: the program ends after this request
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
    let status = child.wait().unwrap();
    print!("{line}{rest}");
    assert!(status.success(), "{status}:\n{rest}");
    assert!(rest.contains("engine-a: 0 cached tokens"), "{rest}");
    assert!(rest.ends_with("route: engine-b\n"), "{rest}");
}
