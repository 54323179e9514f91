//! Transports of the live driver: a blocking HTTP/1.1 client for probes, the challenge
//! completion and TensorRT-LLM's drain, and a ZMQ SUB socket for vLLM/SGLang KV events.
//!
//! HTTP uses `ureq` (no TLS, no proxy from the environment, no redirects, a global deadline per
//! call, a response-body cap). ZMQ uses `zeromq` (pure-Rust ZMTP 3) on a one-worker tokio
//! runtime owned by the subscriber.

use crate::{Finding, Reason};
use std::time::{Duration, Instant};

/// An HTTP response: status and body bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpReply {
    /// The status code.
    pub status: u16,
    /// The body (at most the client's cap).
    pub body: Vec<u8>,
}

/// A blocking HTTP client bound to one `host:port` endpoint.
#[derive(Debug, Clone)]
pub struct HttpClient {
    agent: ureq::Agent,
    endpoint: String,
    cap: u64,
}

impl HttpClient {
    /// A client for `http://{endpoint}` with a per-call deadline and a body cap (bytes).
    pub fn new(endpoint: &str, timeout: Duration, cap: usize) -> HttpClient {
        let config = ureq::Agent::config_builder()
            .timeout_global(Some(timeout))
            .http_status_as_error(false)
            .max_redirects(0)
            .proxy(None)
            .build();
        HttpClient {
            agent: config.into(),
            endpoint: endpoint.to_string(),
            cap: cap as u64,
        }
    }

    /// The endpoint (`host:port`).
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// `GET path`.
    pub fn get(&self, path: &str) -> Result<HttpReply, Finding> {
        let url = self.url(path);
        let r = self.agent.get(&url).call();
        self.finish(&url, r)
    }

    /// `POST path` with a JSON body (sent verbatim).
    pub fn post_json(&self, path: &str, body: &[u8]) -> Result<HttpReply, Finding> {
        let url = self.url(path);
        let r = self
            .agent
            .post(&url)
            .header("content-type", "application/json")
            .send(body);
        self.finish(&url, r)
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.endpoint)
    }

    fn finish(
        &self,
        url: &str,
        r: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
    ) -> Result<HttpReply, Finding> {
        let resp = r.map_err(|e| http_failure(url, e))?;
        let status = resp.status().as_u16();
        let body = resp
            .into_body()
            .with_config()
            .limit(self.cap)
            .read_to_vec()
            .map_err(|e| http_failure(url, e))?;
        Ok(HttpReply { status, body })
    }
}

/// Oversize → `probe_schema_mismatch`; anything else (connect, read, timeout) →
/// `endpoint_unreachable`.
fn http_failure(url: &str, e: ureq::Error) -> Finding {
    match e {
        ureq::Error::BodyExceedsLimit(n) => Finding::fail(
            Reason::ProbeSchemaMismatch,
            format!("{url}: response body exceeds {n} bytes"),
        ),
        other => Finding::fail(Reason::EndpointUnreachable, format!("{url}: {other}")),
    }
}

/// A ZMQ SUB socket subscribed to everything on one or more `tcp://host:port` publishers.
pub struct ZmqSubscriber {
    // Field order matters: the socket is dropped before the runtime it runs on.
    sock: zeromq::SubSocket,
    rt: tokio::runtime::Runtime,
}

impl std::fmt::Debug for ZmqSubscriber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ZmqSubscriber")
    }
}

impl ZmqSubscriber {
    /// Subscribes to `""` and connects to every endpoint (`host:port`), each within `timeout`.
    pub fn connect(endpoints: &[String], timeout: Duration) -> Result<ZmqSubscriber, String> {
        use zeromq::Socket;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .map_err(|e| format!("tokio runtime: {e}"))?;
        let mut sock = {
            let _guard = rt.enter();
            zeromq::SubSocket::new()
        };
        rt.block_on(async {
            sock.subscribe("")
                .await
                .map_err(|e| format!("subscribe: {e}"))?;
            for ep in endpoints {
                let url = format!("tcp://{ep}");
                match tokio::time::timeout(timeout, sock.connect(&url)).await {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => return Err(format!("{url}: {e}")),
                    Err(_) => return Err(format!("{url}: connect timed out")),
                }
            }
            Ok(())
        })?;
        Ok(ZmqSubscriber { sock, rt })
    }

    /// The next multipart message, or `None` when `deadline` passed first. A socket error
    /// ends the stream (`Some(Err)`).
    pub fn recv_until(&mut self, deadline: Instant) -> Option<Result<Vec<Vec<u8>>, String>> {
        use zeromq::SocketRecv;
        let left = deadline.checked_duration_since(Instant::now())?;
        let sock = &mut self.sock;
        self.rt.block_on(async move {
            match tokio::time::timeout(left, sock.recv()).await {
                Err(_) => None,
                Ok(Ok(m)) => Some(Ok(m.into_vec().into_iter().map(|b| b.to_vec()).collect())),
                Ok(Err(e)) => Some(Err(e.to_string())),
            }
        })
    }

    /// Waits `d` while the socket's background tasks run (lets the subscription reach the
    /// publisher before the challenge is sent).
    pub fn settle(&self, d: Duration) {
        self.rt.block_on(async move { tokio::time::sleep(d).await });
    }
}
