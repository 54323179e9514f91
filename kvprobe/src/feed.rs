//! Event feeds kvexact can own (feature `live`): the transports a gateway would otherwise
//! write itself, for the prefix index and the drift verifier.
//!
//! * [`ZmqFeed`]: one ZMQ SUB socket per endpoint × data-parallel rank (vLLM / SGLang
//!   publishers), all on one runtime, each message delivered with its source so that each
//!   rank's sequence numbers are tracked apart; [`ZmqFeed::replay`] asks a source's replay
//!   endpoint (a DEALER to the engine's ROUTER) for every batch from a sequence number on, as
//!   the index asks after a gap. The queue between the sockets and the caller is bounded: a
//!   message that does not fit is dropped and counted, which the index sees as a sequence gap.
//! * [`DrainRepublisher`]: TensorRT-LLM's `POST /kv_cache_events` drain has exactly one
//!   reader. The gateway replica that drains republishes every non-empty body over a ZMQ PUB
//!   socket — the engines' own transport, frames `[topic, seq, body]` — so that its other
//!   replicas subscribe with a [`ZmqFeed`] like to any engine.

use crate::attest::{DRAIN_PATH, MAX_DRAIN_BODY};
use crate::transport::HttpClient;
use kvhash::events::{self, EventSchema, ReplayReply};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The topic a [`DrainRepublisher`] publishes under.
pub const DRAIN_TOPIC: &str = "kvexact-trtllm-drain";

/// Messages the queue holds before it drops.
pub const QUEUE_MESSAGES: usize = 8192;

/// One publisher to subscribe to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    /// `host:port` of the publisher (an engine rank, or a [`DrainRepublisher`]).
    pub publisher: String,
    /// `host:port` of the engine's replay endpoint, if it has one.
    pub replay: Option<String>,
}

/// One message from a source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// Index of the source in the list given to [`ZmqFeed::connect`].
    pub source: usize,
    /// The multipart message: `[topic, seq, payload]` from an engine or a republisher.
    pub frames: Vec<Vec<u8>>,
}

/// Subscriptions to many publishers.
pub struct ZmqFeed {
    rx: Receiver<Delivery>,
    sources: Vec<Source>,
    stop: Arc<AtomicBool>,
    dropped: Arc<AtomicU64>,
    // Dropped last: the tasks end with it.
    rt: tokio::runtime::Runtime,
}

impl std::fmt::Debug for ZmqFeed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZmqFeed")
            .field("sources", &self.sources)
            .finish()
    }
}

impl ZmqFeed {
    /// Subscribes to every source (topic `""`), each connect within `timeout`; `Err` names the
    /// first source that could not be reached.
    pub fn connect(sources: Vec<Source>, timeout: Duration) -> Result<ZmqFeed, String> {
        use zeromq::{Socket, SocketRecv};
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .map_err(|e| format!("tokio runtime: {e}"))?;
        let (tx, rx) = sync_channel(QUEUE_MESSAGES);
        let stop = Arc::new(AtomicBool::new(false));
        let dropped = Arc::new(AtomicU64::new(0));
        for (i, src) in sources.iter().enumerate() {
            let mut sock = {
                let _g = rt.enter();
                zeromq::SubSocket::new()
            };
            let url = format!("tcp://{}", src.publisher);
            rt.block_on(async {
                sock.subscribe("")
                    .await
                    .map_err(|e| format!("subscribe: {e}"))?;
                match tokio::time::timeout(timeout, sock.connect(&url)).await {
                    Ok(Ok(())) => Ok(()),
                    Ok(Err(e)) => Err(format!("{url}: {e}")),
                    Err(_) => Err(format!("{url}: connect timed out")),
                }
            })?;
            let (tx, stop, dropped): (SyncSender<Delivery>, _, _) =
                (tx.clone(), stop.clone(), dropped.clone());
            rt.spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    match tokio::time::timeout(Duration::from_millis(100), sock.recv()).await {
                        Err(_) => continue,
                        Ok(Err(_)) => break,
                        Ok(Ok(m)) => {
                            let frames = m.into_vec().into_iter().map(|b| b.to_vec()).collect();
                            match tx.try_send(Delivery { source: i, frames }) {
                                Ok(()) => {}
                                Err(TrySendError::Full(_)) => {
                                    dropped.fetch_add(1, Ordering::Relaxed);
                                }
                                Err(TrySendError::Disconnected(_)) => break,
                            }
                        }
                    }
                }
            });
        }
        Ok(ZmqFeed {
            rx,
            sources,
            stop,
            dropped,
            rt,
        })
    }

    /// The next message, or `None` when `deadline` passed first.
    pub fn recv_until(&self, deadline: Instant) -> Option<Delivery> {
        let left = deadline.checked_duration_since(Instant::now())?;
        self.rx.recv_timeout(left).ok()
    }

    /// Messages dropped because the caller fell behind (each is a sequence gap).
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Waits `d` while the subscriptions settle (a SUB socket misses what is published
    /// before its subscription reaches the publisher).
    pub fn settle(&self, d: Duration) {
        self.rt.block_on(async move { tokio::time::sleep(d).await });
    }

    /// Asks `source`'s replay endpoint for every batch from `from` on (replies framed as
    /// `schema` says) and returns them as `(seq, payload)` in order, up to the end marker, at
    /// most `max` of them. `Err` when the source has no replay endpoint, cannot be reached
    /// within `timeout`, or answers frames the schema does not allow.
    pub fn replay(
        &self,
        source: usize,
        from: u64,
        schema: &EventSchema,
        timeout: Duration,
        max: usize,
    ) -> Result<Vec<(u64, Vec<u8>)>, String> {
        let src = self.sources.get(source).ok_or("no such source")?;
        let ep = src
            .replay
            .as_ref()
            .ok_or("the source has no replay endpoint")?;
        replay_from(&self.rt, ep, from, schema, timeout, max)
    }
}

/// Asks the replay endpoint `ep` (`host:port`, a DEALER to the engine's ROUTER) for every
/// batch from `from` on, on runtime `rt`: [`ZmqFeed::replay`] and the subscriber's replays.
pub(crate) fn replay_from(
    rt: &tokio::runtime::Runtime,
    ep: &str,
    from: u64,
    schema: &EventSchema,
    timeout: Duration,
    max: usize,
) -> Result<Vec<(u64, Vec<u8>)>, String> {
    use zeromq::{Socket, SocketRecv, SocketSend};
    {
        let url = format!("tcp://{ep}");
        let mut sock = {
            let _g = rt.enter();
            zeromq::DealerSocket::new()
        };
        rt.block_on(async move {
            let deadline = tokio::time::Instant::now() + timeout;
            tokio::time::timeout_at(deadline, sock.connect(&url))
                .await
                .map_err(|_| format!("{url}: connect timed out"))?
                .map_err(|e| format!("{url}: {e}"))?;
            let [empty, seq] = events::replay_request(from);
            let mut msg = zeromq::ZmqMessage::from(empty);
            msg.push_back(seq.into());
            tokio::time::timeout_at(deadline, sock.send(msg))
                .await
                .map_err(|_| format!("{url}: send timed out"))?
                .map_err(|e| format!("{url}: {e}"))?;
            let mut out = Vec::new();
            loop {
                let m = tokio::time::timeout_at(deadline, sock.recv())
                    .await
                    .map_err(|_| format!("{url}: no end marker before the deadline"))?
                    .map_err(|e| format!("{url}: {e}"))?;
                let frames: Vec<Vec<u8>> = m.into_vec().into_iter().map(|b| b.to_vec()).collect();
                let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
                match events::decode_replay_reply_schema(schema, &refs)
                    .map_err(|e| e.to_string())?
                {
                    ReplayReply::End => return Ok(out),
                    ReplayReply::Batch(b) => {
                        let seq = b.seq.unwrap_or(0);
                        if out.len() >= max {
                            return Err(format!("{url}: more than {max} replayed batches"));
                        }
                        let payload = frames.last().cloned().unwrap_or_default();
                        out.push((seq, payload));
                    }
                }
            }
        })
    }
}

impl Drop for ZmqFeed {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Drains a TensorRT-LLM endpoint (as its only reader) and republishes every non-empty body
/// on a ZMQ PUB socket as `[DRAIN_TOPIC, seq, body]`.
pub struct DrainRepublisher {
    port: u16,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for DrainRepublisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DrainRepublisher")
            .field("port", &self.port)
            .finish()
    }
}

impl DrainRepublisher {
    /// Starts draining `endpoint` (`host:port` of the TensorRT-LLM server) every `interval`
    /// and publishing on `127.0.0.1:port` (`0`: any free port, see [`DrainRepublisher::port`]).
    pub fn start(
        endpoint: &str,
        port: u16,
        interval: Duration,
        timeout: Duration,
    ) -> Result<DrainRepublisher, String> {
        let client = HttpClient::new(endpoint, timeout, MAX_DRAIN_BODY);
        let stop = Arc::new(AtomicBool::new(false));
        let (port_tx, port_rx) = sync_channel(1);
        let stop2 = stop.clone();
        let thread = std::thread::spawn(move || republish(client, port, interval, port_tx, stop2));
        let port = port_rx
            .recv_timeout(timeout)
            .map_err(|_| "the publisher did not start".to_string())??;
        Ok(DrainRepublisher {
            port,
            stop,
            thread: Some(thread),
        })
    }

    /// The port the PUB socket is bound to.
    pub fn port(&self) -> u16 {
        self.port
    }
}

impl Drop for DrainRepublisher {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn republish(
    client: HttpClient,
    port: u16,
    interval: Duration,
    port_tx: SyncSender<Result<u16, String>>,
    stop: Arc<AtomicBool>,
) {
    use zeromq::{Socket, SocketSend};
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            let _ = port_tx.send(Err(e.to_string()));
            return;
        }
    };
    let mut sock = {
        let _g = rt.enter();
        zeromq::PubSocket::new()
    };
    match rt.block_on(sock.bind(&format!("tcp://127.0.0.1:{port}"))) {
        Ok(zeromq::Endpoint::Tcp(_, p)) => {
            let _ = port_tx.send(Ok(p));
        }
        Ok(other) => {
            let _ = port_tx.send(Err(format!("unexpected endpoint {other}")));
            return;
        }
        Err(e) => {
            let _ = port_tx.send(Err(e.to_string()));
            return;
        }
    }
    let mut seq = 0u64;
    while !stop.load(Ordering::Relaxed) {
        if let Ok(reply) = client.post_json(DRAIN_PATH, b"") {
            let body = reply.body;
            let empty = body
                .iter()
                .filter(|b| !b.is_ascii_whitespace())
                .eq(b"[]".iter());
            if reply.status == 200 && !empty {
                let mut msg = zeromq::ZmqMessage::from(DRAIN_TOPIC.as_bytes().to_vec());
                msg.push_back(seq.to_be_bytes().to_vec().into());
                msg.push_back(body.into());
                seq += 1;
                let _ = rt.block_on(async {
                    tokio::time::timeout(Duration::from_secs(2), sock.send(msg)).await
                });
            }
        }
        rt.block_on(async { tokio::time::sleep(interval).await });
    }
}
