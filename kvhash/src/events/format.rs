//! KV-event format ids: which wire format an engine speaks.
//!
//! The ids of the engine contracts (docs/contracts/registry.md §10.3) are kept verbatim; formats those
//! contracts do not cover get new ids in the same style. See the table in [`crate::events`].

use crate::Error;
use std::fmt;
use std::str::FromStr;

/// One KV-event wire format. Stable ids: see [`EventFormat::as_str`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EventFormat {
    /// `vllm-kv-array-v1`: vLLM 0.17–0.23, ZMQ, msgpack batch, events as tagged arrays.
    VllmKvArrayV1,
    /// `vllm-kv-map-v2`: vLLM 0.24–0.28, ZMQ, msgpack batch, events as tagged maps.
    VllmKvMapV2,
    /// `vllm-kv-map-v3`: vLLM 0.29–0.34, tagged maps with the optional fields of 0.31
    /// (`group_idx`, `kv_cache_spec_*`, `locality`, `ownership`, `session_id`,
    /// `lookahead_token_ids`).
    VllmKvMapV3,
    /// `sglang-kv-rank-v1`: SGLang 0.5.18–0.5.19, tagged positional arrays (7 elements, 8 with
    /// the `{"cache_salt": …}` metadata map), rank in batch slot 2.
    SglangKvRankV1,
    /// `sglang-kv-map-v2`: SGLang 0.5.20 and later, tagged maps, rank in batch slot 2.
    SglangKvMapV2,
    /// `trtllm-kv-http-v1`: TensorRT-LLM 1.2.x, JSON array from `POST /kv_cache_events`.
    TrtllmKvHttpV1,
    /// `trtllm-kv-http-preview-v1`: TensorRT-LLM 1.3.0rc, the same JSON plus per-block
    /// `cache_salt` and `mm_keys`.
    TrtllmKvHttpPreviewV1,
}

/// How a format's bytes reach the gateway.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// ZMQ multipart messages `[topic, seq (8 bytes BE), msgpack payload]`.
    ZmqMsgpack,
    /// An HTTP response body holding a JSON array.
    HttpJson,
}

impl EventFormat {
    /// Every format, in table order.
    pub const ALL: [EventFormat; 7] = [
        EventFormat::VllmKvArrayV1,
        EventFormat::VllmKvMapV2,
        EventFormat::VllmKvMapV3,
        EventFormat::SglangKvRankV1,
        EventFormat::SglangKvMapV2,
        EventFormat::TrtllmKvHttpV1,
        EventFormat::TrtllmKvHttpPreviewV1,
    ];

    /// The stable id, e.g. `"vllm-kv-map-v2"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            EventFormat::VllmKvArrayV1 => "vllm-kv-array-v1",
            EventFormat::VllmKvMapV2 => "vllm-kv-map-v2",
            EventFormat::VllmKvMapV3 => "vllm-kv-map-v3",
            EventFormat::SglangKvRankV1 => "sglang-kv-rank-v1",
            EventFormat::SglangKvMapV2 => "sglang-kv-map-v2",
            EventFormat::TrtllmKvHttpV1 => "trtllm-kv-http-v1",
            EventFormat::TrtllmKvHttpPreviewV1 => "trtllm-kv-http-preview-v1",
        }
    }

    /// The transport this format travels on.
    pub const fn transport(self) -> Transport {
        match self {
            EventFormat::TrtllmKvHttpV1 | EventFormat::TrtllmKvHttpPreviewV1 => Transport::HttpJson,
            _ => Transport::ZmqMsgpack,
        }
    }

    /// The engine family (`"vllm"`, `"sglang"`, `"trtllm"`).
    pub const fn engine(self) -> &'static str {
        match self {
            EventFormat::VllmKvArrayV1 | EventFormat::VllmKvMapV2 | EventFormat::VllmKvMapV3 => {
                "vllm"
            }
            EventFormat::SglangKvRankV1 | EventFormat::SglangKvMapV2 => "sglang",
            EventFormat::TrtllmKvHttpV1 | EventFormat::TrtllmKvHttpPreviewV1 => "trtllm",
        }
    }
}

impl fmt::Display for EventFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for EventFormat {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        EventFormat::ALL
            .into_iter()
            .find(|f| f.as_str() == s)
            .ok_or_else(|| Error::EventUnknownFormat(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_are_unique() {
        for f in EventFormat::ALL {
            assert_eq!(f.as_str().parse::<EventFormat>(), Ok(f));
        }
        let mut ids: Vec<_> = EventFormat::ALL.iter().map(|f| f.as_str()).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), EventFormat::ALL.len());
        assert!(matches!(
            "vllm-kv-map-v9".parse::<EventFormat>(),
            Err(Error::EventUnknownFormat(_))
        ));
    }
}
