//! Arbitrary bytes split into ZMQ frames (live message and replay reply) for every msgpack
//! format: decoding returns Ok or Err, never panics.
#![no_main]

use kvhash::events::{decode_frames, decode_replay_reply, EventFormat, Transport};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // First two bytes choose the split points.
    let (a, b) = match data {
        [a, b, ..] => (usize::from(*a), usize::from(*b)),
        _ => return,
    };
    let rest = &data[2..];
    let a = a.min(rest.len());
    let b = (a + b).min(rest.len());
    let frames = [&rest[..a], &rest[a..b], &rest[b..]];
    for f in EventFormat::ALL {
        if f.transport() != Transport::ZmqMsgpack {
            continue;
        }
        let _ = decode_frames(f, &frames);
        let _ = decode_replay_reply(f, &frames);
        let four = [&[][..], frames[0], frames[1], frames[2]];
        let _ = decode_replay_reply(f, &four);
    }
});
