//! Downloads from the Hugging Face hub (`HF_ENDPOINT`, default `https://huggingface.co`):
//! `<hub>/<repo>/resolve/<rev>/<file>` into `<dest>.part`, resumed with `Range: bytes=N-`
//! (within one run up to [`ATTEMPTS`] times after a dropped connection, and across runs since
//! the `.part` file stays), then renamed to `<dest>`; the caller verifies the digest.
//!
//! The token is read from a file that must not be group/other-accessible (`mode & 0o077 == 0`),
//! and is sent only as `Authorization: Bearer …` to the hub itself (ureq never forwards it on a
//! redirect to another host, e.g. the hub's CDN).

use std::fs::{self, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::fsops::FILE_MODE;
use super::Refusal;

/// Attempts per file within one run (the first one plus resumes).
pub const ATTEMPTS: u32 = 4;

/// Reads an access token (`TOKEN_FILE_MODE`, `TOKEN_FILE_EMPTY`).
pub fn read_token(path: &Path) -> Result<String, Refusal> {
    let shown = path.display();
    let meta = fs::metadata(path)
        .map_err(|e| Refusal::new("TOKEN_FILE_EMPTY", format!("{shown}: {e}")))?;
    if meta.permissions().mode() & 0o077 != 0 {
        return Err(Refusal::new(
            "TOKEN_FILE_MODE",
            format!("{shown} must not be readable by group or others (chmod 600)"),
        ));
    }
    let text = fs::read_to_string(path)
        .map_err(|e| Refusal::new("TOKEN_FILE_EMPTY", format!("{shown}: {e}")))?;
    let tok = text.trim();
    if tok.is_empty() {
        return Err(Refusal::new("TOKEN_FILE_EMPTY", shown.to_string()));
    }
    Ok(tok.to_string())
}

/// The hub client.
pub struct Hub {
    endpoint: String,
    token: Option<String>,
    agent: ureq::Agent,
}

/// `<dest>.part`.
pub fn part_path(dest: &Path) -> PathBuf {
    let mut s = dest.as_os_str().to_owned();
    s.push(".part");
    PathBuf::from(s)
}

impl Hub {
    /// A client for `HF_ENDPOINT` (trailing `/` removed) with an optional token.
    pub fn new(token: Option<String>) -> Self {
        let endpoint = std::env::var("HF_ENDPOINT")
            .ok()
            .filter(|s| !s.trim().is_empty())
            .unwrap_or_else(|| "https://huggingface.co".into())
            .trim_end_matches('/')
            .to_string();
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_connect(Some(Duration::from_secs(30)))
            .timeout_recv_response(Some(Duration::from_secs(120)))
            .max_redirects(10)
            .user_agent(concat!("kvexact/", env!("CARGO_PKG_VERSION")))
            .build()
            .into();
        Hub {
            endpoint,
            token,
            agent,
        }
    }

    /// `<hub>/<repo>/resolve/<rev>/<name>`.
    pub fn resolve_url(&self, repo: &str, rev: &str, name: &str) -> String {
        format!("{}/{repo}/resolve/{rev}/{name}", self.endpoint)
    }

    /// Downloads `url` to `dest` through `dest.part`, resuming a partial file. `size` (when
    /// known) bounds the download and lets a complete `.part` skip the request. `log` receives
    /// progress lines (resumes, retries).
    pub fn fetch(
        &self,
        url: &str,
        dest: &Path,
        size: Option<u64>,
        log: &dyn Fn(&str),
    ) -> Result<(), Refusal> {
        let part = part_path(dest);
        let mut last = String::new();
        let mut done = false;
        for attempt in 1..=ATTEMPTS {
            if attempt > 1 {
                std::thread::sleep(Duration::from_millis(200 * u64::from(attempt - 1)));
            }
            let mut start = match fs::symlink_metadata(&part) {
                Ok(m) if m.is_file() => m.len(),
                Ok(_) => {
                    return Err(Refusal::new(
                        "UNSAFE_PATH",
                        format!("{} is not a regular file", part.display()),
                    ))
                }
                Err(_) => 0,
            };
            if let Some(sz) = size {
                if start > sz {
                    fs::remove_file(&part).map_err(|e| io_fail(&part, e))?;
                    start = 0;
                }
                if start == sz && (sz > 0 || part.exists()) {
                    done = true;
                    break;
                }
            }
            let mut req = self.agent.get(url);
            if let Some(t) = &self.token {
                req = req.header("Authorization", &format!("Bearer {t}"));
            }
            if start > 0 {
                log(&format!("resuming at byte {start}"));
                req = req.header("Range", &format!("bytes={start}-"));
            }
            let resp = match req.call() {
                Ok(r) => r,
                Err(e) => {
                    last = e.to_string();
                    continue;
                }
            };
            let status = resp.status().as_u16();
            let append = match status {
                200 => false,
                206 => {
                    let ok = resp
                        .headers()
                        .get("content-range")
                        .and_then(|v| v.to_str().ok())
                        .is_some_and(|v| v.starts_with(&format!("bytes {start}-")));
                    if !ok {
                        last = "206 with an unexpected Content-Range".into();
                        let _ = fs::remove_file(&part);
                        continue;
                    }
                    true
                }
                401 | 403 => {
                    return Err(Refusal::new(
                        "DOWNLOAD_DENIED",
                        format!("HTTP {status} for {url} (gated repository or bad token)"),
                    ))
                }
                416 => {
                    last = "HTTP 416 (range not satisfiable)".into();
                    let _ = fs::remove_file(&part);
                    continue;
                }
                s if s == 429 || s >= 500 => {
                    last = format!("HTTP {s}");
                    continue;
                }
                s => {
                    return Err(Refusal::new(
                        "DOWNLOAD_FAILED",
                        format!("HTTP {s} for {url}"),
                    ))
                }
            };
            let mut opts = OpenOptions::new();
            opts.write(true)
                .create(true)
                .mode(FILE_MODE)
                .custom_flags(libc::O_NOFOLLOW);
            if append {
                opts.append(true);
            } else {
                opts.truncate(true);
            }
            let mut file = opts.open(&part).map_err(|e| io_fail(&part, e))?;
            let _ = file.set_permissions(fs::Permissions::from_mode(FILE_MODE));
            let mut body = resp.into_body().into_reader();
            let copied = copy_bounded(
                &mut body,
                &mut file,
                size.map(|s| s.saturating_sub(if append { start } else { 0 })),
            );
            file.sync_all().map_err(|e| io_fail(&part, e))?;
            match copied {
                Ok(()) => {}
                Err(e) => {
                    last = e;
                    log(&format!("connection lost ({last}); will resume"));
                    continue;
                }
            }
            let have = fs::metadata(&part).map_err(|e| io_fail(&part, e))?.len();
            match size {
                Some(sz) if have < sz => {
                    last = format!("short body: {have} of {sz} bytes");
                    continue;
                }
                _ => {
                    done = true;
                    break;
                }
            }
        }
        if !done {
            return Err(Refusal::new(
                "DOWNLOAD_FAILED",
                format!(
                    "{url}: {last} (after {ATTEMPTS} attempts; the partial file {} is kept, rerun to resume)",
                    part.display()
                ),
            ));
        }
        fs::rename(&part, dest).map_err(|e| io_fail(dest, e))
    }
}

fn io_fail(path: &Path, e: std::io::Error) -> Refusal {
    Refusal::new("WRITE_FAILED", format!("{}: {e}", path.display()))
}

/// Copies at most `limit` bytes (all when `None`); more than `limit` is an error.
fn copy_bounded(r: &mut dyn Read, w: &mut dyn Write, limit: Option<u64>) -> Result<(), String> {
    let mut buf = vec![0u8; 1 << 20];
    let mut total: u64 = 0;
    loop {
        let n = match r.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e.to_string()),
        };
        total += n as u64;
        if limit.is_some_and(|l| total > l) {
            return Err(format!(
                "server sent more than the {} expected bytes",
                limit.unwrap_or(0)
            ));
        }
        let chunk = buf.get(..n).ok_or("read past buffer")?;
        w.write_all(chunk).map_err(|e| e.to_string())?;
    }
}
