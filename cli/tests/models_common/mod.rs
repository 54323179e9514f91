//! Shared helpers of the `kvexact models` tests: running the binary and a loopback HTTP server
//! standing in for the hub. The synthetic repository tree (catalog, profiles, manifests,
//! fixtures, templates, weights indexes) is kvmodels' test tree ([`kvmodels::testtree`], shape
//! [`Shape::Command`]), shared with that crate's own tests.
#![allow(dead_code, unused_imports)]

use std::collections::HashMap;
use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::ops::Deref;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub use kvmodels::testtree::{
    bytes, expect, gitblob, request, sha, write, Model, Shape, TestTree, SGLANG_DIGEST, TRT_DIGEST,
    VLLM_DIGEST,
};

pub fn testdata() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata"))
}

/// The real example tree (catalog at 08f5c5ca, page at 88d0efd4).
pub fn real_tree() -> PathBuf {
    testdata().join("registry-examples/loxilb-inference-gateway")
}

/// The binary, with no proxy or hub settings inherited from the environment.
pub fn kvexact() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_kvexact"));
    for v in [
        "http_proxy",
        "HTTP_PROXY",
        "https_proxy",
        "HTTPS_PROXY",
        "all_proxy",
        "ALL_PROXY",
        "HF_ENDPOINT",
        "HF_TOKEN_FILE",
    ] {
        c.env_remove(v);
    }
    c
}

pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

pub fn run(mut c: Command) -> Run {
    let Output {
        status,
        stdout,
        stderr,
    } = c.output().expect("run kvexact");
    Run {
        code: status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
    }
}

pub fn mode_of(p: &Path) -> u32 {
    fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
}

/// tiny-a of the command tests' tree.
pub fn model_a() -> Model {
    Shape::Command.model_a()
}

/// tiny-g of the command tests' tree.
pub fn model_g() -> Model {
    Shape::Command.model_g()
}

/// The command tests' synthetic repository tree in `root` ([`Shape::Command`]): tiny-a (vLLM
/// candidate, SGLang blocked, TRT-LLM candidate) and tiny-g (gated, vLLM candidate).
pub struct Tree(TestTree);

impl Tree {
    pub fn new(root: &Path) -> Tree {
        Tree(TestTree::command(root))
    }

    /// A tree of `models` (each gets a vLLM candidate row; tiny-a also its SGLang and
    /// TensorRT-LLM rows).
    pub fn with_models(root: &Path, models: Vec<Model>) -> Tree {
        Tree(TestTree::command_with_models(root, models))
    }
}

impl Deref for Tree {
    type Target = TestTree;

    fn deref(&self) -> &TestTree {
        &self.0
    }
}

/// One request the test hub saw.
#[derive(Debug, Clone)]
pub struct Seen {
    pub path: String,
    pub range: Option<String>,
    pub auth: Option<String>,
    pub status: u16,
}

/// Behaviour of the test hub.
#[derive(Default)]
pub struct HubConfig {
    pub files: HashMap<String, Vec<u8>>,
    /// path → (bytes to send before dropping the connection, how many requests to drop).
    pub drop_after: HashMap<String, (usize, usize)>,
    /// Token every request must carry (`Authorization: Bearer <token>`), else 401.
    pub token: Option<String>,
    /// Paths answered 403.
    pub forbidden: Vec<String>,
}

/// A loopback HTTP/1.1 server on an ephemeral port; it serves one request per connection and
/// stops when dropped or after 120 s.
pub struct TestHub {
    pub addr: SocketAddr,
    pub seen: Arc<Mutex<Vec<Seen>>>,
    stop: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl TestHub {
    pub fn start(cfg: HubConfig) -> TestHub {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (seen2, stop2) = (seen.clone(), stop.clone());
        let cfg = Arc::new(Mutex::new(cfg));
        let handle = std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(120);
            while !stop2.load(Ordering::Relaxed) && Instant::now() < deadline {
                match listener.accept() {
                    Ok((s, _)) => {
                        let _ = serve(s, &cfg, &seen2);
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        TestHub {
            addr,
            seen,
            stop,
            handle: Some(handle),
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for TestHub {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

fn serve(
    s: TcpStream,
    cfg: &Arc<Mutex<HubConfig>>,
    seen: &Arc<Mutex<Vec<Seen>>>,
) -> std::io::Result<()> {
    s.set_nonblocking(false)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut reader = BufReader::new(s.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
    let (mut range, mut auth) = (None, None);
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h)? == 0 || h == "\r\n" || h == "\n" {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            let v = v.trim().to_string();
            match k.trim().to_ascii_lowercase().as_str() {
                "range" => range = Some(v),
                "authorization" => auth = Some(v),
                _ => {}
            }
        }
    }
    let mut w = s;
    let mut cfg = cfg.lock().unwrap();
    let mut respond = |status: u16,
                       headers: &str,
                       body: &[u8],
                       cut: Option<usize>|
     -> std::io::Result<()> {
        seen.lock().unwrap().push(Seen {
            path: path.clone(),
            range: range.clone(),
            auth: auth.clone(),
            status,
        });
        let reason = match status {
            200 => "OK",
            206 => "Partial Content",
            401 => "Unauthorized",
            403 => "Forbidden",
            416 => "Range Not Satisfiable",
            _ => "Not Found",
        };
        write!(w, "HTTP/1.1 {status} {reason}\r\nContent-Length: {}\r\nConnection: close\r\n{headers}\r\n", body.len())?;
        match cut {
            Some(n) => {
                w.write_all(&body[..n.min(body.len())])?;
                w.flush()?;
                let _ = w.shutdown(std::net::Shutdown::Both);
            }
            None => w.write_all(body)?,
        }
        w.flush()
    };
    if let Some(t) = &cfg.token {
        if auth.as_deref() != Some(&format!("Bearer {t}")) {
            return respond(401, "", b"", None);
        }
    }
    if cfg.forbidden.contains(&path) {
        return respond(403, "", b"", None);
    }
    let Some(body) = cfg.files.get(&path).cloned() else {
        return respond(404, "", b"", None);
    };
    let start = range
        .as_deref()
        .and_then(|r| r.strip_prefix("bytes="))
        .and_then(|r| r.strip_suffix('-'))
        .and_then(|r| r.parse::<usize>().ok());
    let cut = match cfg.drop_after.get_mut(&path) {
        Some((n, left)) if *left > 0 => {
            *left -= 1;
            Some(*n)
        }
        _ => None,
    };
    drop(cfg);
    match start {
        Some(st) if st >= body.len() => respond(
            416,
            &format!("Content-Range: bytes */{}\r\n", body.len()),
            b"",
            None,
        ),
        Some(st) => respond(
            206,
            &format!(
                "Content-Range: bytes {st}-{}/{}\r\n",
                body.len() - 1,
                body.len()
            ),
            &body[st..],
            cut,
        ),
        None => respond(200, "", &body, cut),
    }
}

/// Reads a whole file.
pub fn read(p: &Path) -> Vec<u8> {
    let mut v = Vec::new();
    fs::File::open(p).unwrap().read_to_end(&mut v).unwrap();
    v
}
