//! kvexact's own subscriber (`kvprobe::subscriber`) over a real ZMQ PUB socket on 127.0.0.1:
//! a sink that falls behind makes the queue drop, and the dropped messages' source is told
//! lost at once and again after the messages queued ahead of the loss — so a gap never
//! passes as contiguous. Waits are bounded polls (a deadline turns a hang into a failure),
//! never timed assertions.

use kvhash::events::{EventFormat, EventSchema};
use kvprobe::feed::Source;
use kvprobe::subscriber::{Sink, SinkAnswer, Subscriber, SubscriberOptions};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Seen {
    Frames(u64),
    Lost,
}

/// Records what it is told; blocks in `frames` while the gate is shut.
struct Recorder {
    seen: Mutex<Vec<Seen>>,
    open: Mutex<bool>,
    cv: Condvar,
}

impl Sink for Recorder {
    fn frames(&self, _source: usize, frames: &[&[u8]]) -> SinkAnswer {
        let seq = u64::from_be_bytes(frames[1].try_into().unwrap());
        self.seen.lock().unwrap().push(Seen::Frames(seq));
        let mut open = self.open.lock().unwrap();
        while !*open {
            open = self.cv.wait(open).unwrap();
        }
        SinkAnswer::Done
    }
    fn replayed(&self, _: usize, _: u64, _: &[u8]) -> SinkAnswer {
        SinkAnswer::Done
    }
    fn replay_failed(&self, _: usize) {}
    fn lost(&self, _source: usize) {
        self.seen.lock().unwrap().push(Seen::Lost);
    }
}

fn eventually(secs: u64, mut f: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + Duration::from_secs(secs);
    while !f() {
        if Instant::now() > end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    true
}

#[test]
fn a_full_queue_marks_its_source_lost_past_the_messages_ahead_of_the_loss() {
    use zeromq::{Socket, SocketSend};
    // The publisher: numbered messages, one every 2 ms, until told to stop.
    let (port_tx, port_rx) = std::sync::mpsc::channel();
    let done = Arc::new(AtomicBool::new(false));
    let d = done.clone();
    let publisher = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let mut p = zeromq::PubSocket::new();
            let port = match p.bind("tcp://127.0.0.1:0").await.unwrap() {
                zeromq::Endpoint::Tcp(_, port) => port,
                other => panic!("{other}"),
            };
            port_tx.send(port).unwrap();
            let mut seq = 0u64;
            while !d.load(Ordering::Relaxed) {
                let mut m = zeromq::ZmqMessage::from(b"t".to_vec());
                m.push_back(seq.to_be_bytes().to_vec().into());
                m.push_back(vec![0x90].into());
                let _ = p.send(m).await;
                seq += 1;
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        });
    });
    let port: u16 = port_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    let sink = Arc::new(Recorder {
        seen: Mutex::new(Vec::new()),
        open: Mutex::new(false),
        cv: Condvar::new(),
    });
    let mut sub = Subscriber::start(
        SubscriberOptions {
            sources: vec![Source {
                publisher: format!("127.0.0.1:{port}"),
                replay: None,
            }],
            topic: String::new(),
            queue: 2,
            schema: EventSchema::family(EventFormat::VllmKvMapV3).clone(),
            replay_timeout: Duration::from_secs(1),
            max_replay: 10,
        },
        sink.clone(),
    )
    .unwrap();
    // The sink holds the first message while the publisher fills the queue and more drop.
    assert!(eventually(30, || sub.counters().dropped >= 3), "{:?}", sub);
    *sink.open.lock().unwrap() = true;
    sink.cv.notify_all();
    assert!(
        eventually(30, || sub.counters().delivered >= 20),
        "{:?}",
        sub
    );
    done.store(true, Ordering::Relaxed);
    publisher.join().unwrap();
    sub.stop();
    let seen = sink.seen.lock().unwrap().clone();
    // Every gap between two delivered numbers has a loss told after the last message before
    // it (the messages ahead of the loss are contiguous and would bring the rank in step).
    let mut last: Option<u64> = None;
    let mut told_since = false;
    let mut gaps = 0;
    for s in &seen {
        match *s {
            Seen::Lost => told_since = true,
            Seen::Frames(seq) => {
                if let Some(p) = last {
                    if seq != p + 1 {
                        gaps += 1;
                        assert!(told_since, "gap {p} -> {seq} with no loss told: {seen:?}");
                    }
                }
                last = Some(seq);
                told_since = false;
            }
        }
    }
    assert!(gaps >= 1, "{seen:?}");
    let c = sub.counters();
    assert!(c.lost >= 2 && c.dropped >= 3, "{c:?}");
    assert!(sub
        .prometheus("s")
        .contains("kvexact_subscriber_dropped_total{subscriber=\"s\"}"));
}
