//! A minimal, single-threaded HTTP/1.1 server for the emulator: one request per connection
//! (`Connection: close`), bounded header and body sizes, a polling accept loop that ends when
//! stopped or when its lifetime is over.

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const MAX_HEAD: usize = 64 * 1024;
const MAX_BODY: usize = 4 << 20;

/// A parsed request.
#[derive(Debug, Clone)]
pub struct Request {
    /// `GET`, `POST`, …
    pub method: String,
    /// The path (query included).
    pub path: String,
    /// The body.
    pub body: Vec<u8>,
}

/// A response.
#[derive(Debug, Clone)]
pub struct Response {
    /// Status code.
    pub status: u16,
    /// Body (JSON).
    pub body: Vec<u8>,
    /// Sleep this long before answering (a slow engine).
    pub delay: Option<Duration>,
}

impl Response {
    /// A 200 JSON response.
    pub fn json(v: &serde_json::Value) -> Response {
        Response {
            status: 200,
            body: v.to_string().into_bytes(),
            delay: None,
        }
    }

    /// A status with a JSON error body.
    pub fn error(status: u16, msg: &str) -> Response {
        Response {
            status,
            body: serde_json::json!({ "error": msg }).to_string().into_bytes(),
            delay: None,
        }
    }
}

/// Serves until `stop` is set or `deadline` passes.
pub fn serve(
    listener: TcpListener,
    stop: Arc<AtomicBool>,
    deadline: Instant,
    handler: impl Fn(&Request) -> Response,
) {
    if listener.set_nonblocking(true).is_err() {
        return;
    }
    while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
        match listener.accept() {
            Ok((s, _)) => {
                let _ = handle(s, &handler, &stop, deadline);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(5))
            }
            Err(_) => std::thread::sleep(Duration::from_millis(5)),
        }
    }
}

fn handle(
    mut s: TcpStream,
    handler: &impl Fn(&Request) -> Response,
    stop: &AtomicBool,
    deadline: Instant,
) -> io::Result<()> {
    s.set_nonblocking(false)?;
    s.set_read_timeout(Some(Duration::from_secs(2)))?;
    s.set_write_timeout(Some(Duration::from_secs(2)))?;
    let req = match read_request(&mut s)? {
        Some(r) => r,
        None => return Ok(()),
    };
    let resp = handler(&req);
    if let Some(d) = resp.delay {
        // Sleep in small steps so a stop or the lifetime still ends the server promptly.
        let until = Instant::now() + d;
        while Instant::now() < until && !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    let reason = match resp.status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        500 => "Internal Server Error",
        _ => "Status",
    };
    let head = format!(
        "HTTP/1.1 {} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        resp.status,
        resp.body.len()
    );
    s.write_all(head.as_bytes())?;
    s.write_all(&resp.body)?;
    s.flush()
}

fn read_request(s: &mut TcpStream) -> io::Result<Option<Request>> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(p) = find(&buf, b"\r\n\r\n") {
            break p;
        }
        if buf.len() > MAX_HEAD {
            return Ok(None);
        }
        let n = s.read(&mut chunk)?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(chunk.get(..n).unwrap_or(&[]));
    };
    let head = String::from_utf8_lossy(buf.get(..head_end).unwrap_or(&[])).to_string();
    let mut lines = head.split("\r\n");
    let mut first = lines.next().unwrap_or("").split(' ');
    let method = first.next().unwrap_or("").to_string();
    let path = first.next().unwrap_or("").to_string();
    let mut len = 0usize;
    for l in lines {
        if let Some((k, v)) = l.split_once(':') {
            if k.trim().eq_ignore_ascii_case("content-length") {
                len = v.trim().parse().unwrap_or(0);
            }
        }
    }
    if len > MAX_BODY {
        return Ok(None);
    }
    let mut body = buf.get(head_end + 4..).unwrap_or(&[]).to_vec();
    while body.len() < len {
        let n = s.read(&mut chunk)?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(chunk.get(..n).unwrap_or(&[]));
    }
    body.truncate(len);
    Ok(Some(Request { method, path, body }))
}

fn find(h: &[u8], n: &[u8]) -> Option<usize> {
    h.windows(n.len()).position(|w| w == n)
}
