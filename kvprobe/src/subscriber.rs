//! kvexact's own subscriber (feature `live`): the event feeds of a prefix index that need no
//! gateway code. One ZMQ SUB socket per source (an endpoint × data-parallel rank of a vLLM or
//! SGLang engine, or a TensorRT-LLM drain republished by a [`crate::feed::DrainRepublisher`]),
//! on one thread of its own, delivering each message to a [`Sink`] (the index, in libkvexact)
//! in order per source:
//!
//! * **reconnects**: the SUB socket reconnects by itself; a source once connected (whatever
//!   it published before went by unseen), one that cannot be reached, or whose connection
//!   drops, is reported lost ([`Sink::lost`]) at once — its predictions say `unknown` until
//!   the next batch's sequence number shows what went by;
//! * **replay on a gap**: a batch the sink answers [`SinkAnswer::ReplayFrom`] is followed by
//!   one request to the source's replay endpoint, whose batches are handed to
//!   [`Sink::replayed`]; a replay that cannot be had is [`Sink::replay_failed`];
//! * **backpressure**: the queue between the sockets and the sink holds at most
//!   [`SubscriberOptions::queue`] messages; a message that does not fit is dropped and its
//!   source reported lost, so that predictions say `unknown`, never a stale count.
//!
//! Counters ([`SubscriberCounters`]) and their Prometheus text ([`Subscriber::prometheus`]).

use crate::feed::Source;
use kvhash::events::EventSchema;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// What the sink made of a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SinkAnswer {
    /// Taken (applied, a duplicate, lost, or a replay already pending): nothing to do.
    Done,
    /// A gap: ask the source's replay endpoint for every batch from this number on.
    ReplayFrom(u64),
    /// Refused (it does not decode, or is for no rank the sink knows).
    Refused,
}

/// Where a subscriber delivers: called from the subscriber's thread only, one call at a time.
pub trait Sink: Send + Sync + 'static {
    /// A live message `[topic, seq, payload]` of source `source`.
    fn frames(&self, source: usize, frames: &[&[u8]]) -> SinkAnswer;
    /// One replayed batch of `source`, in order.
    fn replayed(&self, source: usize, seq: u64, payload: &[u8]) -> SinkAnswer;
    /// The replay asked for after `ReplayFrom` could not be had.
    fn replay_failed(&self, source: usize);
    /// Messages of `source` may have gone by unseen (a dropped message, a connection that
    /// could not be made or was lost).
    fn lost(&self, source: usize);
}

/// The default queue: messages held between the sockets and the sink.
pub const DEFAULT_QUEUE: usize = crate::feed::QUEUE_MESSAGES;

/// How to subscribe.
#[derive(Debug, Clone)]
pub struct SubscriberOptions {
    /// The sources, in the sink's numbering.
    pub sources: Vec<Source>,
    /// The topic prefix subscribed to (`""`: every message).
    pub topic: String,
    /// Messages the queue holds (1..=1,048,576); one more is dropped and its source lost.
    pub queue: usize,
    /// The schema replay replies are framed by (the index's release).
    pub schema: EventSchema,
    /// Bound on one replay request (connect, send, every reply).
    pub replay_timeout: Duration,
    /// The most batches one replay may bring.
    pub max_replay: usize,
}

/// The subscriber's counters (monotonic).
#[derive(Debug, Default)]
pub struct SubscriberCounters {
    /// Messages received from the sockets.
    pub received: AtomicU64,
    /// Messages delivered to the sink.
    pub delivered: AtomicU64,
    /// Messages the sink refused.
    pub refused: AtomicU64,
    /// Messages dropped because the queue was full.
    pub dropped: AtomicU64,
    /// Connections lost or never made (each reported lost).
    pub disconnects: AtomicU64,
    /// Times a source was reported lost to the sink.
    pub lost: AtomicU64,
    /// Replays asked for.
    pub replays: AtomicU64,
    /// Batches a replay brought.
    pub replayed: AtomicU64,
    /// Replays that could not be had.
    pub replay_failures: AtomicU64,
}

/// A snapshot of [`SubscriberCounters`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CounterSnapshot {
    /// See [`SubscriberCounters::received`].
    pub received: u64,
    /// See [`SubscriberCounters::delivered`].
    pub delivered: u64,
    /// See [`SubscriberCounters::refused`].
    pub refused: u64,
    /// See [`SubscriberCounters::dropped`].
    pub dropped: u64,
    /// See [`SubscriberCounters::disconnects`].
    pub disconnects: u64,
    /// See [`SubscriberCounters::lost`].
    pub lost: u64,
    /// See [`SubscriberCounters::replays`].
    pub replays: u64,
    /// See [`SubscriberCounters::replayed`].
    pub replayed: u64,
    /// See [`SubscriberCounters::replay_failures`].
    pub replay_failures: u64,
}

impl SubscriberCounters {
    /// The counters now.
    pub fn snapshot(&self) -> CounterSnapshot {
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        CounterSnapshot {
            received: l(&self.received),
            delivered: l(&self.delivered),
            refused: l(&self.refused),
            dropped: l(&self.dropped),
            disconnects: l(&self.disconnects),
            lost: l(&self.lost),
            replays: l(&self.replays),
            replayed: l(&self.replayed),
            replay_failures: l(&self.replay_failures),
        }
    }
}

/// What the socket tasks send the subscriber's thread.
enum Msg {
    Frames(usize, Vec<Vec<u8>>),
}

/// A running subscriber; stopped (its thread joined) by [`Subscriber::stop`] or on drop.
pub struct Subscriber {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    counters: Arc<SubscriberCounters>,
}

impl std::fmt::Debug for Subscriber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscriber")
            .field("counters", &self.counters.snapshot())
            .finish()
    }
}

/// Per source, what the socket tasks record and the subscriber's thread reads: messages
/// queued so far, and where a loss happened (`lost_at`: 1 + the messages queued before it;
/// 0 = none). The messages queued before a loss are whole; what came after it did not reach
/// the queue.
struct Flags {
    enqueued: Vec<AtomicU64>,
    lost_at: Vec<AtomicU64>,
}

impl Flags {
    /// Records a loss after every message queued so far of source `i`.
    fn lose(&self, i: usize) {
        let n = self.enqueued[i].load(Ordering::Acquire);
        self.lost_at[i].store(n + 1, Ordering::Release);
    }
}

impl Subscriber {
    /// Starts subscribing to every source on a thread of its own. A source that cannot be
    /// reached yet is not an error: it is reported lost and tried again until it answers.
    /// `Err` for options out of range or a runtime that cannot start.
    pub fn start(opts: SubscriberOptions, sink: Arc<dyn Sink>) -> Result<Subscriber, String> {
        if opts.queue == 0 || opts.queue > 1 << 20 {
            return Err(format!("queue of {} messages: 1..=1048576", opts.queue));
        }
        if opts.sources.is_empty() {
            return Err("no sources".into());
        }
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .map_err(|e| format!("tokio runtime: {e}"))?;
        let (tx, rx) = sync_channel(opts.queue);
        let stop = Arc::new(AtomicBool::new(false));
        let counters = Arc::new(SubscriberCounters::default());
        let flags = Arc::new(Flags {
            enqueued: opts.sources.iter().map(|_| AtomicU64::new(0)).collect(),
            lost_at: opts.sources.iter().map(|_| AtomicU64::new(0)).collect(),
        });
        for (i, src) in opts.sources.iter().enumerate() {
            rt.spawn(source_task(
                i,
                format!("tcp://{}", src.publisher),
                opts.topic.clone(),
                tx.clone(),
                stop.clone(),
                flags.clone(),
                counters.clone(),
            ));
        }
        drop(tx);
        let (stop2, counters2) = (stop.clone(), counters.clone());
        let thread = std::thread::Builder::new()
            .name("kvexact-subscriber".into())
            .spawn(move || run(rt, opts, sink, rx, stop2, flags, counters2))
            .map_err(|e| format!("thread: {e}"))?;
        Ok(Subscriber {
            stop,
            thread: Some(thread),
            counters,
        })
    }

    /// The counters.
    pub fn counters(&self) -> CounterSnapshot {
        self.counters.snapshot()
    }

    /// Stops the sockets and joins the thread (within about 100 ms plus a replay under way).
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }

    /// The Prometheus text exposition of the counters, labelled `subscriber="<name>"`.
    pub fn prometheus(&self, name: &str) -> String {
        prometheus(name, &self.counters())
    }
}

impl Drop for Subscriber {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The Prometheus text of one subscriber's counters.
pub fn prometheus(name: &str, c: &CounterSnapshot) -> String {
    let name = name
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n");
    let rows: [(&str, &str, u64); 9] = [
        (
            "received",
            "Messages received from the engines' sockets.",
            c.received,
        ),
        ("delivered", "Messages delivered to the index.", c.delivered),
        ("refused", "Messages the index refused.", c.refused),
        (
            "dropped",
            "Messages dropped because the queue was full (each stream marked lost).",
            c.dropped,
        ),
        (
            "disconnects",
            "Connections lost or not made (each stream marked lost).",
            c.disconnects,
        ),
        ("lost", "Times a stream was marked lost.", c.lost),
        ("replays", "Replays asked for after a gap.", c.replays),
        ("replayed", "Batches replays brought.", c.replayed),
        (
            "replay_failures",
            "Replays that could not be had.",
            c.replay_failures,
        ),
    ];
    let mut s = String::new();
    for (k, help, v) in rows {
        let _ = writeln!(s, "# HELP kvexact_subscriber_{k}_total {help}");
        let _ = writeln!(s, "# TYPE kvexact_subscriber_{k}_total counter");
        let _ = writeln!(
            s,
            "kvexact_subscriber_{k}_total{{subscriber=\"{name}\"}} {v}"
        );
    }
    s
}

/// One source's socket: connect (again and again until it answers), then receive until
/// stopped; every connection not made or lost, and every message dropped, raises the
/// source's lost flag.
async fn source_task(
    i: usize,
    url: String,
    topic: String,
    tx: SyncSender<Msg>,
    stop: Arc<AtomicBool>,
    flags: Arc<Flags>,
    counters: Arc<SubscriberCounters>,
) {
    use zeromq::{Socket, SocketEvent, SocketRecv};
    let lose = |why: &AtomicU64| {
        why.fetch_add(1, Ordering::Relaxed);
        flags.lose(i);
    };
    let mut sock = zeromq::SubSocket::new();
    let mut monitor = sock.monitor();
    if sock.subscribe(&topic).await.is_err() {
        lose(&counters.disconnects);
        return;
    }
    let mut backoff = Duration::from_millis(50);
    loop {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        match tokio::time::timeout(Duration::from_secs(2), sock.connect(&url)).await {
            Ok(Ok(())) => {
                // What the engine published before the subscription reached it went by
                // unseen: the next message's number decides (the rank's stream is lost until
                // then).
                flags.lose(i);
                break;
            }
            _ => {
                lose(&counters.disconnects);
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(1));
            }
        }
    }
    while !stop.load(Ordering::Relaxed) {
        while let Ok(ev) = monitor.try_recv() {
            if let SocketEvent::Disconnected(_) = ev {
                lose(&counters.disconnects);
            }
        }
        match tokio::time::timeout(Duration::from_millis(100), sock.recv()).await {
            Err(_) => continue,
            Ok(Err(_)) => {
                // The socket reconnects by itself; what went by meanwhile is lost.
                lose(&counters.disconnects);
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Ok(Ok(m)) => {
                counters.received.fetch_add(1, Ordering::Relaxed);
                let frames = m.into_vec().into_iter().map(|b| b.to_vec()).collect();
                match tx.try_send(Msg::Frames(i, frames)) {
                    Ok(()) => {
                        flags.enqueued[i].fetch_add(1, Ordering::AcqRel);
                    }
                    Err(TrySendError::Full(_)) => lose(&counters.dropped),
                    Err(TrySendError::Disconnected(_)) => return,
                }
            }
        }
    }
}

/// The subscriber's thread: the next message, to the sink; replays as asked. A loss is told
/// the sink at once (its predictions `unknown` before the messages queued ahead of the loss
/// are in) and again once those are in — they follow each other, so they would bring the
/// rank back in step, while what came after the loss never reached the queue.
fn run(
    rt: tokio::runtime::Runtime,
    opts: SubscriberOptions,
    sink: Arc<dyn Sink>,
    rx: Receiver<Msg>,
    stop: Arc<AtomicBool>,
    flags: Arc<Flags>,
    counters: Arc<SubscriberCounters>,
) {
    let n = opts.sources.len();
    let (mut delivered, mut told) = (vec![0u64; n], vec![false; n]);
    let settle = |i: usize, delivered: &[u64], told: &mut [bool]| {
        let at = flags.lost_at[i].load(Ordering::Acquire);
        if at == 0 {
            return;
        }
        let caught_up = delivered[i] + 1 >= at;
        if !told[i] || caught_up {
            counters.lost.fetch_add(1, Ordering::Relaxed);
            sink.lost(i);
            told[i] = true;
        }
        if caught_up
            && flags.lost_at[i]
                .compare_exchange(at, 0, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        {
            told[i] = false;
        }
    };
    while !stop.load(Ordering::Relaxed) {
        for i in 0..n {
            settle(i, &delivered, &mut told);
        }
        let msg = match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(m) => m,
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => break,
        };
        let Msg::Frames(i, frames) = msg;
        delivered[i] += 1;
        let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
        counters.delivered.fetch_add(1, Ordering::Relaxed);
        match sink.frames(i, &refs) {
            SinkAnswer::Done => {}
            SinkAnswer::Refused => {
                counters.refused.fetch_add(1, Ordering::Relaxed);
            }
            SinkAnswer::ReplayFrom(from) => {
                counters.replays.fetch_add(1, Ordering::Relaxed);
                match replay(&rt, &opts, i, from) {
                    Ok(batches) => {
                        for (seq, payload) in batches {
                            counters.replayed.fetch_add(1, Ordering::Relaxed);
                            if sink.replayed(i, seq, &payload) == SinkAnswer::Refused {
                                counters.refused.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    }
                    Err(_) => {
                        counters.replay_failures.fetch_add(1, Ordering::Relaxed);
                        sink.replay_failed(i);
                    }
                }
            }
        }
        settle(i, &delivered, &mut told);
    }
    stop.store(true, Ordering::Relaxed);
    // The runtime (and its socket tasks) ends here, on this thread.
    rt.shutdown_timeout(Duration::from_secs(1));
}

/// Asks `source`'s replay endpoint for every batch from `from` on.
fn replay(
    rt: &tokio::runtime::Runtime,
    opts: &SubscriberOptions,
    source: usize,
    from: u64,
) -> Result<Vec<(u64, Vec<u8>)>, String> {
    let ep = opts.sources[source]
        .replay
        .as_ref()
        .ok_or("the source has no replay endpoint")?;
    crate::feed::replay_from(
        rt,
        ep,
        from,
        &opts.schema,
        opts.replay_timeout,
        opts.max_replay,
    )
}
