//! Downloads from the Hugging Face hub (`HF_ENDPOINT`, default `https://huggingface.co`,
//! docs/contracts/registry.md §11): `<hub>/<repo>/resolve/<rev>/<file>` into `<dest>.part`,
//! resumed with `Range: bytes=N-` (within one run up to [`ATTEMPTS`] times after a dropped
//! connection, and across runs since the `.part` file stays), then renamed to `<dest>`; the
//! caller verifies the digest.
//!
//! This crate is linked into `libkvexact.so` and holds no network client: the HTTP request is
//! the caller's [`Fetch`] (the `kvexact` command's is blocking HTTPS with no forwarding of
//! `Authorization` on a redirect to another host, e.g. the hub's CDN). Status handling, resume,
//! retries and the `.part` file are here.
//!
//! The token is read from a file that must not be group/other-accessible (`mode & 0o077 == 0`),
//! and is handed to [`Fetch::get`] for the hub's URLs only.

use std::fs::{self, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::{Error, Result};
use crate::fsops::{write_failed, FILE_MODE};
use crate::{refuse, RefusalCode};

/// Attempts per file within one run (the first one plus resumes).
pub const ATTEMPTS: u32 = 4;

/// The hub used when no endpoint is given.
pub const DEFAULT_ENDPOINT: &str = "https://huggingface.co";

/// The answer to one GET: status, `Content-Range` header and the body.
pub struct FetchResponse {
    /// HTTP status code (every status is an answer; transport failures are `Err`).
    pub status: u16,
    /// The `Content-Range` header, when present and valid text.
    pub content_range: Option<String>,
    /// The response body.
    pub body: Box<dyn Read>,
}

impl std::fmt::Debug for FetchResponse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FetchResponse")
            .field("status", &self.status)
            .field("content_range", &self.content_range)
            .finish_non_exhaustive()
    }
}

/// One HTTP GET, supplied by the caller (the `kvexact` command, or an in-memory fake in tests).
pub trait Fetch {
    /// GETs `url`, with `Range: bytes=<range_from>-` when `range_from` is given and
    /// `Authorization: Bearer <token>` when `token` is given (never forwarded to another host
    /// on a redirect). `Err` is a transport failure (its text is reported after the retries).
    fn get(
        &self,
        url: &str,
        range_from: Option<u64>,
        token: Option<&str>,
    ) -> std::result::Result<FetchResponse, String>;
}

/// Reads an access token (`TOKEN_FILE_MODE`, `TOKEN_FILE_EMPTY`).
pub fn read_token(path: &Path) -> Result<String> {
    let shown = path.display();
    let meta = fs::metadata(path)
        .map_err(|e| refuse(RefusalCode::TokenFileEmpty, format!("{shown}: {e}")))?;
    if meta.permissions().mode() & 0o077 != 0 {
        return Err(refuse(
            RefusalCode::TokenFileMode,
            format!("{shown} must not be readable by group or others (chmod 600)"),
        ));
    }
    let text = fs::read_to_string(path)
        .map_err(|e| refuse(RefusalCode::TokenFileEmpty, format!("{shown}: {e}")))?;
    let tok = text.trim();
    if tok.is_empty() {
        return Err(refuse(RefusalCode::TokenFileEmpty, shown.to_string()));
    }
    Ok(tok.to_string())
}

/// `<dest>.part`.
pub fn part_path(dest: &Path) -> PathBuf {
    let mut s = dest.as_os_str().to_owned();
    s.push(".part");
    PathBuf::from(s)
}

/// The hub: its endpoint, the optional token and the caller's [`Fetch`].
pub struct Hub<'a> {
    endpoint: String,
    token: Option<String>,
    fetch: &'a dyn Fetch,
}

impl std::fmt::Debug for Hub<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hub")
            .field("endpoint", &self.endpoint)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .finish_non_exhaustive()
    }
}

impl<'a> Hub<'a> {
    /// A hub at `endpoint` (blank or absent: [`DEFAULT_ENDPOINT`]; trailing `/` removed).
    pub fn new(endpoint: Option<&str>, token: Option<String>, fetch: &'a dyn Fetch) -> Self {
        let endpoint = endpoint
            .filter(|s| !s.trim().is_empty())
            .unwrap_or(DEFAULT_ENDPOINT)
            .trim_end_matches('/')
            .to_string();
        Hub {
            endpoint,
            token,
            fetch,
        }
    }

    /// Whether a token was given.
    pub fn has_token(&self) -> bool {
        self.token.is_some()
    }

    /// `<hub>/<repo>/resolve/<rev>/<name>`.
    pub fn resolve_url(&self, repo: &str, rev: &str, name: &str) -> String {
        format!("{}/{repo}/resolve/{rev}/{name}", self.endpoint)
    }

    /// Downloads `url` to `dest` through `dest.part`, resuming a partial file. `size` (when
    /// known) bounds the download and lets a complete `.part` skip the request. `log` receives
    /// progress lines (resumes, retries).
    pub fn download(
        &self,
        url: &str,
        dest: &Path,
        size: Option<u64>,
        log: &mut dyn FnMut(&str),
    ) -> Result<()> {
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
                    return Err(refuse(
                        RefusalCode::UnsafePath,
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
            if start > 0 {
                log(&format!("resuming at byte {start}"));
            }
            let range = (start > 0).then_some(start);
            let resp = match self.fetch.get(url, range, self.token.as_deref()) {
                Ok(r) => r,
                Err(e) => {
                    last = e;
                    continue;
                }
            };
            let status = resp.status;
            let append = match status {
                200 => false,
                206 => {
                    let ok = resp
                        .content_range
                        .as_deref()
                        .is_some_and(|v| v.starts_with(&format!("bytes {start}-")));
                    if !ok {
                        last = "206 with an unexpected Content-Range".into();
                        let _ = fs::remove_file(&part);
                        continue;
                    }
                    true
                }
                401 | 403 => {
                    return Err(refuse(
                        RefusalCode::DownloadDenied,
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
                    return Err(refuse(
                        RefusalCode::DownloadFailed,
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
            let mut body = resp.body;
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
            return Err(refuse(
                RefusalCode::DownloadFailed,
                format!(
                    "{url}: {last} (after {ATTEMPTS} attempts; the partial file {} is kept, rerun to resume)",
                    part.display()
                ),
            ));
        }
        fs::rename(&part, dest).map_err(|e| io_fail(dest, e))
    }
}

/// `WRITE_FAILED` for a local write of the download.
fn io_fail(path: &Path, e: std::io::Error) -> Error {
    write_failed(path, e)
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

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Mutex;

    use super::*;
    use crate::testtree::FakeHub;

    fn hub_with(url: &str, bytes: &[u8]) -> FakeHub {
        let mut files = HashMap::new();
        files.insert(url.to_string(), bytes.to_vec());
        FakeHub {
            files,
            ..FakeHub::default()
        }
    }

    #[test]
    fn endpoints_and_urls() {
        let f = FakeHub::default();
        assert_eq!(
            Hub::new(None, None, &f).resolve_url("o/m", "r", "f"),
            "https://huggingface.co/o/m/resolve/r/f"
        );
        assert_eq!(
            Hub::new(Some(" "), None, &f).resolve_url("o/m", "r", "f"),
            "https://huggingface.co/o/m/resolve/r/f"
        );
        assert_eq!(
            Hub::new(Some("http://h:1//"), None, &f).resolve_url("o/m", "r", "f"),
            "http://h:1/o/m/resolve/r/f"
        );
        let h = Hub::new(None, Some("t".into()), &f);
        assert!(h.has_token());
        assert!(!format!("{h:?}").contains("\"t\""));
    }

    #[test]
    fn downloads_resume_a_partial_file_and_finish_a_complete_one() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("f.bin");
        let bytes: Vec<u8> = (0..3000u32).map(|i| i as u8).collect();
        let f = hub_with("u", &bytes);
        fs::write(part_path(&dest), &bytes[..1200]).unwrap();
        let mut notes = Vec::new();
        Hub::new(None, Some("tok".into()), &f)
            .download("u", &dest, Some(3000), &mut |s: &str| {
                notes.push(s.to_string())
            })
            .unwrap();
        assert_eq!(fs::read(&dest).unwrap(), bytes);
        assert!(!part_path(&dest).exists());
        assert_eq!(notes, ["resuming at byte 1200"]);
        assert_eq!(f.seen()[0].range, Some(1200));
        assert_eq!(f.seen()[0].token.as_deref(), Some("tok"));
        // A complete .part needs no request at all.
        fs::write(part_path(&dest), &bytes).unwrap();
        Hub::new(None, None, &f)
            .download("u", &dest, Some(3000), &mut |_: &str| {})
            .unwrap();
        assert_eq!(f.seen().len(), 1);
        // A .part longer than the file is discarded.
        fs::write(part_path(&dest), vec![0u8; 4000]).unwrap();
        Hub::new(None, None, &f)
            .download("u", &dest, Some(3000), &mut |_: &str| {})
            .unwrap();
        assert_eq!(fs::read(&dest).unwrap(), bytes);
        assert_eq!(f.seen()[1].range, None);
    }

    /// Answers 206 with a Content-Range that does not start where asked, then a plain 200.
    struct BadRange(Mutex<u32>);

    impl Fetch for BadRange {
        fn get(
            &self,
            _url: &str,
            _range: Option<u64>,
            _token: Option<&str>,
        ) -> std::result::Result<FetchResponse, String> {
            let mut n = self.0.lock().unwrap();
            *n += 1;
            if *n == 1 {
                return Ok(FetchResponse {
                    status: 206,
                    content_range: Some("bytes 0-9/10".into()),
                    body: Box::new(std::io::empty()),
                });
            }
            Ok(FetchResponse {
                status: 200,
                content_range: None,
                body: Box::new(std::io::Cursor::new(b"0123456789".to_vec())),
            })
        }
    }

    #[test]
    fn an_unexpected_content_range_restarts_from_zero() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("f");
        fs::write(part_path(&dest), b"01234").unwrap();
        let f = BadRange(Mutex::new(0));
        Hub::new(None, None, &f)
            .download("u", &dest, Some(10), &mut |_: &str| {})
            .unwrap();
        assert_eq!(fs::read(&dest).unwrap(), b"0123456789");
        assert_eq!(*f.0.lock().unwrap(), 2);
    }

    #[test]
    fn statuses_map_to_refusals() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("f");
        for (status, code) in [(403, "DOWNLOAD_DENIED"), (404, "DOWNLOAD_FAILED")] {
            let f = FakeHub {
                status: Some(status),
                ..FakeHub::default()
            };
            let e = Hub::new(None, None, &f)
                .download("u", &dest, None, &mut |_: &str| {})
                .unwrap_err();
            assert_eq!(e.code(), code);
            assert_eq!(f.seen().len(), 1, "{status} is not retried");
        }
        let f = FakeHub {
            status: Some(503),
            ..FakeHub::default()
        };
        let e = Hub::new(None, None, &f)
            .download("u", &dest, None, &mut |_: &str| {})
            .unwrap_err();
        assert_eq!(e.code(), "DOWNLOAD_FAILED");
        assert!(
            e.to_string().starts_with("u: HTTP 503 (after 4 attempts; "),
            "{e}"
        );
        assert_eq!(f.seen().len(), ATTEMPTS as usize);
        // More bytes than the index says is never accepted.
        let f = hub_with("u", b"0123456789");
        let e = Hub::new(None, None, &f)
            .download("u", &dest, Some(4), &mut |_: &str| {})
            .unwrap_err();
        assert_eq!(e.code(), "DOWNLOAD_FAILED");
        assert!(!dest.exists());
    }

    #[test]
    fn token_files() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t");
        fs::write(&p, " hf_x \n").unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(read_token(&p).unwrap(), "hf_x");
        fs::set_permissions(&p, fs::Permissions::from_mode(0o640)).unwrap();
        assert_eq!(read_token(&p).unwrap_err().code(), "TOKEN_FILE_MODE");
        assert_eq!(
            read_token(&dir.path().join("none")).unwrap_err().code(),
            "TOKEN_FILE_EMPTY"
        );
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(6))]
        /// Whatever the connection drops (fewer times than the attempts), the resumed download
        /// is the file's bytes: the slow twin is the body read whole.
        #[test]
        fn resumed_downloads_equal_the_whole_body(
            len in 1usize..20_000,
            cuts in proptest::collection::vec(1usize..8_000, 0..3),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let dest = dir.path().join("f");
            let bytes: Vec<u8> = (0..len).map(|i| (i * 31 % 251) as u8).collect();
            let f = hub_with("u", &bytes);
            let mut received = 0usize;
            let mut expected_ranges = vec![None];
            for c in &cuts {
                // Each drop sends `c` more bytes of what is left (none when nothing is).
                let left = len - received;
                if *c >= left {
                    break;
                }
                received += c;
                expected_ranges.push(Some(received as u64));
            }
            let drops = expected_ranges.len() - 1;
            let sends: Vec<usize> = cuts.iter().copied().take(drops).collect();
            let hub = Sequenced { inner: &f, sends: Mutex::new(sends) };
            Hub::new(None, None, &hub)
                .download("u", &dest, Some(len as u64), &mut |_: &str| {})
                .unwrap();
            proptest::prop_assert_eq!(fs::read(&dest).unwrap(), bytes);
            let ranges: Vec<Option<u64>> = f.seen().iter().map(|s| s.range).collect();
            proptest::prop_assert_eq!(ranges, expected_ranges);
        }
    }

    /// Drops the connection of the n-th request after `sends[n]` bytes (then sends whole bodies).
    struct Sequenced<'a> {
        inner: &'a FakeHub,
        sends: Mutex<Vec<usize>>,
    }

    impl Fetch for Sequenced<'_> {
        fn get(
            &self,
            url: &str,
            range: Option<u64>,
            token: Option<&str>,
        ) -> std::result::Result<FetchResponse, String> {
            let mut sends = self.sends.lock().unwrap();
            if !sends.is_empty() {
                let n = sends.remove(0);
                self.inner
                    .drop_after
                    .lock()
                    .unwrap()
                    .insert(url.to_string(), (n, 1));
            }
            drop(sends);
            self.inner.get(url, range, token)
        }
    }
}
