//! TensorRT-LLM's drained JSON: `created` starts the cache, `stored` / `removed` /
//! `updated` (a move to the host level) change it, and an event-id gap (another reader
//! drained the engine) makes the endpoint unknown until the next `created`.

use kvhash::events::{EventFormat, EventSchema};
use kvindex::{
    Capacity, EndpointConfig, GroupKind, GroupSpec, HitRule, Index, IndexOptions, Outcome, Request,
    UnknownReason,
};

fn tok(n: usize) -> String {
    vec![r#"{"type":"unique_token","token_id":5,"token_extra_id":0}"#; n].join(",")
}

fn stored(id: u64, parent: Option<u64>, hashes: &[u64]) -> String {
    let blocks: Vec<String> = hashes
        .iter()
        .map(|h| format!(r#"{{"type":"stored_block","block_hash":{h},"tokens":[{}],"lora_id":null,"cache_level":0,"priority":35}}"#, tok(32)))
        .collect();
    let parent = parent.map_or("null".to_string(), |p| p.to_string());
    format!(
        r#"{{"event_id":{id},"data":{{"type":"stored","parent_hash":{parent},"blocks":[{}]}},"window_size":32768}}"#,
        blocks.join(",")
    )
}

fn body(events: &[String]) -> Vec<u8> {
    format!("[{}]", events.join(",")).into_bytes()
}

#[test]
fn drained_events_drive_the_index() {
    let index = Index::new(IndexOptions {
        rule: HitRule::for_release_id("trtllm-kv-http-v2-r1.3.0rc29").unwrap(),
        schema: EventSchema::family(EventFormat::TrtllmKvHttpPreviewV1).clone(),
        block_size: 32,
        groups: vec![GroupSpec {
            kind: GroupKind::FullAttention,
            block_size: 32,
        }],
        max_slots: 4,
    })
    .unwrap();
    let ep = index
        .add_endpoint(EndpointConfig {
            name: "trt".into(),
            dp_ranks: 1,
            capacity: Capacity {
                gpu_blocks: 100,
                other_blocks: 100,
            },
            lora_adapters: false,
            replay: false,
            starts_empty: false,
        })
        .unwrap();
    let keys = [11u64, 12, 13, 14];
    let req = Request {
        block_hashes: &keys,
        prompt_tokens: 4 * 32 + 1,

        max_cached_tokens: None,
    };
    let predict = || index.predict_endpoint(ep, &req).unwrap()[0].outcome;
    assert_eq!(predict(), Outcome::Unknown(UnknownReason::Unsynced));
    let created = r#"{"event_id":0,"data":{"type":"created","num_blocks_per_cache_level":[100,0]},"window_size":32768}"#.to_string();
    index
        .apply_json(ep, &body(&[created, stored(1, None, &keys[..3])]))
        .unwrap();
    // Stated for TensorRT-LLM, not proven by a replay of the engine: marked so.
    assert_eq!(
        predict(),
        Outcome::Cached {
            tokens: 96,
            other_media_tokens: Some(0),
            proven: false
        }
    );
    let moved = r#"{"event_id":2,"data":{"type":"updated","block_hash":12,"cache_level":{"type":"event_diff","new_value":1,"old_value":0},"priority":null},"window_size":32768}"#.to_string();
    index.apply_json(ep, &body(&[moved])).unwrap();
    assert!(matches!(
        predict(),
        Outcome::Cached {
            tokens: 32,
            other_media_tokens: Some(64),
            ..
        }
    ));
    let removed =
        r#"{"event_id":3,"data":{"type":"removed","block_hashes":[12]},"window_size":32768}"#
            .to_string();
    index.apply_json(ep, &body(&[removed])).unwrap();
    assert!(matches!(
        predict(),
        Outcome::Cached {
            tokens: 32,
            other_media_tokens: Some(0),
            ..
        }
    ));
    // Events 4..=6 were drained by someone else.
    index
        .apply_json(ep, &body(&[stored(7, Some(11), &[12])]))
        .unwrap();
    assert_eq!(predict(), Outcome::Unknown(UnknownReason::OutOfStep));
    let created = r#"{"event_id":8,"data":{"type":"created","num_blocks_per_cache_level":[100,0]},"window_size":32768}"#.to_string();
    index
        .apply_json(ep, &body(&[created, stored(9, None, &keys[..1])]))
        .unwrap();
    assert!(matches!(predict(), Outcome::Cached { tokens: 32, .. }));
}

/// Event id 2^64 − 1 is followed in order by 0 only (the engine's 64-bit counter wraps): the
/// same id again is a gap (unknown), never an event applied twice.
#[test]
fn the_last_event_id_is_applied_once() {
    let index = Index::new(IndexOptions {
        rule: HitRule::for_release_id("trtllm-kv-http-v2-r1.3.0rc29").unwrap(),
        schema: EventSchema::family(EventFormat::TrtllmKvHttpPreviewV1).clone(),
        block_size: 32,
        groups: vec![GroupSpec {
            kind: GroupKind::FullAttention,
            block_size: 32,
        }],
        max_slots: 4,
    })
    .unwrap();
    let ep = index
        .add_endpoint(EndpointConfig {
            name: "trt".into(),
            dp_ranks: 1,
            capacity: Capacity {
                gpu_blocks: 100,
                other_blocks: 100,
            },
            lora_adapters: false,
            replay: false,
            starts_empty: true,
        })
        .unwrap();
    let predict = |k: &[u64]| {
        index
            .predict_endpoint(
                ep,
                &Request {
                    block_hashes: k,
                    prompt_tokens: 33,
                    max_cached_tokens: None,
                },
            )
            .unwrap()[0]
            .outcome
    };
    index
        .apply_json(ep, &body(&[stored(u64::MAX, None, &[21])]))
        .unwrap();
    assert_eq!(predict(&[21]).tokens(), Some(32));
    index
        .apply_json(ep, &body(&[stored(u64::MAX, None, &[22])]))
        .unwrap();
    assert_eq!(predict(&[22]), Outcome::Unknown(UnknownReason::OutOfStep));

    // Wrapped: 0 follows 2^64 - 1 in order.
    index.reset_endpoint(ep).unwrap();
    index
        .apply_json(
            ep,
            &body(&[stored(u64::MAX, None, &[21]), stored(0, Some(21), &[22])]),
        )
        .unwrap();
    assert_eq!(predict(&[21]).tokens(), Some(32));
}

/// A drained endpoint marked lost is unknown at once; the next drained event's id tells:
/// the next one (nothing lost) or a gap (out of step until `created`).
#[test]
fn a_drain_marked_lost_waits_for_the_next_event_id() {
    let index = Index::new(IndexOptions {
        rule: HitRule::for_release_id("trtllm-kv-http-v2-r1.3.0rc29").unwrap(),
        schema: EventSchema::family(EventFormat::TrtllmKvHttpPreviewV1).clone(),
        block_size: 32,
        groups: vec![GroupSpec {
            kind: GroupKind::FullAttention,
            block_size: 32,
        }],
        max_slots: 4,
    })
    .unwrap();
    let ep = index
        .add_endpoint(EndpointConfig {
            name: "trt".into(),
            dp_ranks: 2,
            capacity: Capacity {
                gpu_blocks: 100,
                other_blocks: 100,
            },
            lora_adapters: false,
            replay: false,
            starts_empty: true,
        })
        .unwrap();
    let predict = || {
        index
            .predict_endpoint(
                ep,
                &Request {
                    block_hashes: &[31],
                    prompt_tokens: 33,
                    max_cached_tokens: None,
                },
            )
            .unwrap()[0]
            .outcome
    };
    index
        .apply_json(ep, &body(&[stored(4, None, &[31])]))
        .unwrap();
    assert_eq!(predict().tokens(), Some(32));
    index.mark_lost(ep, None).unwrap();
    assert_eq!(predict(), Outcome::Unknown(UnknownReason::StreamLost));
    // An empty drain shows nothing.
    index.apply_json(ep, b"[]").unwrap();
    assert_eq!(predict(), Outcome::Unknown(UnknownReason::StreamLost));
    index
        .apply_json(ep, &body(&[stored(5, Some(31), &[32])]))
        .unwrap();
    assert_eq!(predict().tokens(), Some(32));
    index.mark_lost(ep, Some(0)).unwrap();
    index
        .apply_json(ep, &body(&[stored(9, Some(32), &[33])]))
        .unwrap();
    assert_eq!(predict(), Outcome::Unknown(UnknownReason::OutOfStep));
}
