//! The emulator's replay socket (vLLM's and SGLang's ROUTER beside the PUB): the batches the
//! publisher sent, kept in order (the last [`KEPT`]), answered to a DEALER's
//! `[empty, start seq]` with every kept batch from that number on, then the end marker
//! (sequence `ff…ff`, empty payload), framed as the release's schema says
//! (`[empty, topic, seq, payload]` or `[empty, seq, payload]`). [`Log::drop_next`] makes the
//! publisher skip its next batch on the PUB (still kept here): a subscriber sees a gap and
//! asks for it.

use kvhash::events::ReplayFraming;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

/// Batches kept for replay.
pub const KEPT: usize = 4096;

/// The publisher's batches, kept for replay.
#[derive(Debug, Default)]
pub struct Log {
    kept: Mutex<VecDeque<(u64, Vec<u8>)>>,
    drop_next: AtomicBool,
}

impl Log {
    /// Keeps batch `seq`; whether the publisher sends it (false once after
    /// [`Log::drop_next`]).
    pub fn record(&self, seq: u64, payload: &[u8]) -> bool {
        let mut k = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        if k.len() == KEPT {
            k.pop_front();
        }
        k.push_back((seq, payload.to_vec()));
        !self.drop_next.swap(false, Ordering::Relaxed)
    }

    /// The next batch is kept but not published: a gap on the PUB.
    pub fn drop_next(&self) {
        self.drop_next.store(true, Ordering::Relaxed);
    }

    fn from(&self, seq: u64) -> Vec<(u64, Vec<u8>)> {
        let k = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        k.iter().filter(|(s, _)| *s >= seq).cloned().collect()
    }
}

/// Serves replays on `127.0.0.1:port` (0: ephemeral; the bound port or the error goes to
/// `port_tx`) until `stop` or `deadline`.
pub fn serve(
    log: Arc<Log>,
    framing: ReplayFraming,
    port: u16,
    port_tx: mpsc::Sender<Result<u16, String>>,
    stop: Arc<AtomicBool>,
    deadline: Instant,
) {
    use zeromq::{Socket, SocketRecv, SocketSend};
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
    let _guard = rt.enter();
    let mut sock = zeromq::RouterSocket::new();
    let port = match rt.block_on(sock.bind(&format!("tcp://127.0.0.1:{port}"))) {
        Ok(zeromq::Endpoint::Tcp(_, p)) => p,
        Ok(other) => {
            let _ = port_tx.send(Err(format!("unexpected endpoint {other}")));
            return;
        }
        Err(e) => {
            let _ = port_tx.send(Err(e.to_string()));
            return;
        }
    };
    let _ = port_tx.send(Ok(port));
    let topic = !matches!(framing, ReplayFraming::Plain);
    let reply = |id: &[u8], seq: u64, payload: Vec<u8>| {
        let mut m = zeromq::ZmqMessage::from(id.to_vec());
        m.push_back(Vec::new().into());
        if topic {
            m.push_back(Vec::new().into());
        }
        m.push_back(seq.to_be_bytes().to_vec().into());
        m.push_back(payload.into());
        m
    };
    while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
        let got = rt
            .block_on(async { tokio::time::timeout(Duration::from_millis(20), sock.recv()).await });
        let Ok(Ok(m)) = got else { continue };
        let frames: Vec<Vec<u8>> = m.into_vec().into_iter().map(|b| b.to_vec()).collect();
        // `[identity, empty, seq BE]`; anything else is not a request.
        let [id, empty, seq] = frames.as_slice() else {
            continue;
        };
        let Ok(seq) = <[u8; 8]>::try_from(seq.as_slice()) else {
            continue;
        };
        if !empty.is_empty() {
            continue;
        }
        let mut out: Vec<_> = log
            .from(u64::from_be_bytes(seq))
            .into_iter()
            .map(|(s, p)| reply(id, s, p))
            .collect();
        out.push(reply(id, u64::MAX, Vec::new()));
        for m in out {
            let _ = rt.block_on(async {
                tokio::time::timeout(Duration::from_secs(2), sock.send(m)).await
            });
        }
    }
}
