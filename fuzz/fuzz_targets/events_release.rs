//! Arbitrary bytes decoded under every engine release's exact event schema (the contract
//! catalog, `kvprobe::contract::all()`): never a panic; whatever a release schema accepts,
//! its family schema (the union of the family's releases) accepts too, with the same events
//! (a release only narrows what is allowed).
#![no_main]

use kvhash::events::{decode_payload_schema, EventSchema, Limits, Transport};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(all) = kvprobe::contract::all() else {
        return;
    };
    let limits = Limits::default();
    for c in all {
        let Some(schema) = c.events() else { continue };
        if schema.format().transport() != Transport::ZmqMsgpack {
            continue;
        }
        if let Ok(batch) = decode_payload_schema(schema, data, &limits) {
            let family = decode_payload_schema(EventSchema::family(schema.format()), data, &limits)
                .expect("a release schema accepted what its family refuses");
            assert_eq!(batch.events, family.events, "{}", c.release_id());
            let _ = batch.to_json();
        }
    }
});
