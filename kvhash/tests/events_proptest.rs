//! Property tests: randomly generated valid events, encoded with a test-only msgpack encoder
//! that picks a random (valid) width for every integer, string, array and map header, must
//! decode to exactly what was generated. The lazy token view is checked against the eager
//! list it was generated from (its slow twin).

use kvhash::events::{
    decode_json, decode_payload, BlockHash, EventFormat, EventKind, ExtraKey, TokenShape,
};
use proptest::prelude::*;

/// Test-only msgpack encoder; `w` selects among the encodings valid for a value.
#[derive(Default)]
struct Enc {
    out: Vec<u8>,
}

impl Enc {
    fn pick<T: Copy>(opts: &[T], w: u8) -> T {
        opts[w as usize % opts.len()]
    }
    fn uint(&mut self, v: u64, w: u8) {
        let mut opts: Vec<u8> = Vec::new();
        if v < 128 {
            opts.extend([0x00, 0xd0]);
        }
        if v < 256 {
            opts.push(0xcc);
        }
        if v < 1 << 16 {
            opts.push(0xcd);
        }
        if v < 1 << 15 {
            opts.push(0xd1);
        }
        if v < 1 << 32 {
            opts.push(0xce);
        }
        if v < 1 << 31 {
            opts.push(0xd2);
        }
        if v < 1 << 63 {
            opts.push(0xd3);
        }
        opts.push(0xcf);
        match Self::pick(&opts, w) {
            0x00 => self.out.push(v as u8),
            0xcc | 0xd0 => self.out.extend([Self::pick(&opts, w), v as u8]),
            0xcd | 0xd1 => {
                self.out.push(Self::pick(&opts, w));
                self.out.extend((v as u16).to_be_bytes());
            }
            0xce | 0xd2 => {
                self.out.push(Self::pick(&opts, w));
                self.out.extend((v as u32).to_be_bytes());
            }
            b => {
                self.out.push(b);
                self.out.extend(v.to_be_bytes());
            }
        }
    }
    fn int(&mut self, v: i64, w: u8) {
        if v >= 0 {
            return self.uint(v as u64, w);
        }
        let mut opts: Vec<u8> = Vec::new();
        if v >= -32 {
            opts.push(0xe0);
        }
        if v >= -128 {
            opts.push(0xd0);
        }
        if v >= -(1 << 15) {
            opts.push(0xd1);
        }
        if v >= -(1 << 31) {
            opts.push(0xd2);
        }
        opts.push(0xd3);
        match Self::pick(&opts, w) {
            0xe0 => self.out.push(v as i8 as u8),
            0xd0 => self.out.extend([0xd0, v as i8 as u8]),
            0xd1 => {
                self.out.push(0xd1);
                self.out.extend((v as i16).to_be_bytes());
            }
            0xd2 => {
                self.out.push(0xd2);
                self.out.extend((v as i32).to_be_bytes());
            }
            _ => {
                self.out.push(0xd3);
                self.out.extend(v.to_be_bytes());
            }
        }
    }
    fn head(&mut self, len: usize, fix: Option<(u8, usize)>, wide: [u8; 3], w: u8) {
        let mut opts: Vec<u8> = Vec::new();
        if let Some((base, max)) = fix {
            if len <= max {
                opts.push(base);
            }
        }
        if wide[0] != 0 && len < 256 {
            opts.push(wide[0]);
        }
        if len < 1 << 16 {
            opts.push(wide[1]);
        }
        opts.push(wide[2]);
        let b = Self::pick(&opts, w);
        if Some(b) == fix.map(|f| f.0) {
            self.out.push(b | len as u8);
        } else if b == wide[0] {
            self.out.extend([b, len as u8]);
        } else if b == wide[1] {
            self.out.push(b);
            self.out.extend((len as u16).to_be_bytes());
        } else {
            self.out.push(b);
            self.out.extend((len as u32).to_be_bytes());
        }
    }
    fn str(&mut self, s: &str, w: u8) {
        self.head(s.len(), Some((0xa0, 31)), [0xd9, 0xda, 0xdb], w);
        self.out.extend(s.as_bytes());
    }
    fn bin(&mut self, b: &[u8], w: u8) {
        self.head(b.len(), None, [0xc4, 0xc5, 0xc6], w);
        self.out.extend(b);
    }
    fn array(&mut self, n: usize, w: u8) {
        self.head(n, Some((0x90, 15)), [0, 0xdc, 0xdd], w);
    }
    fn map(&mut self, n: usize, w: u8) {
        self.head(n, Some((0x80, 15)), [0, 0xde, 0xdf], w);
    }
    fn nil(&mut self) {
        self.out.push(0xc0);
    }
    fn f64(&mut self, v: f64) {
        self.out.push(0xcb);
        self.out.extend(v.to_be_bytes());
    }
    fn opt_str(&mut self, s: &Option<String>, w: u8) {
        match s {
            Some(s) => self.str(s, w),
            None => self.nil(),
        }
    }
    fn opt_int(&mut self, v: Option<i64>, w: u8) {
        match v {
            Some(v) => self.int(v, w),
            None => self.nil(),
        }
    }
}

#[derive(Debug, Clone)]
enum Hash {
    U(u64),
    B(Vec<u8>),
}

#[derive(Debug, Clone)]
enum Key {
    T(String),
    B(Vec<u8>),
    Mm(String, i64),
}

#[derive(Debug, Clone)]
struct Stored {
    hashes: Vec<Hash>,
    parent: Option<Hash>,
    tokens: Vec<u64>,
    block_size: u32,
    lora_id: Option<i64>,
    medium: Option<String>,
    lora_name: Option<String>,
    extra_keys: Option<Vec<Option<Vec<Key>>>>,
    group_idx: Option<u32>,
    session_id: Option<String>,
}

#[derive(Debug, Clone)]
enum Ev {
    Stored(Stored),
    Removed(Vec<Hash>, Option<String>),
    Cleared,
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof!["[a-zA-Z0-9_-]{0,12}", "\\PC{0,40}", "[a-z]{30,300}"]
}

fn hash(bytes_mode: bool) -> BoxedStrategy<Hash> {
    if bytes_mode {
        proptest::collection::vec(any::<u8>(), 32)
            .prop_map(Hash::B)
            .boxed()
    } else {
        prop_oneof![any::<u64>(), 0u64..300, 0u64..70000, (0u64..1 << 33)]
            .prop_map(Hash::U)
            .boxed()
    }
}

fn key() -> impl Strategy<Value = Key> {
    prop_oneof![
        text().prop_map(Key::T),
        proptest::collection::vec(any::<u8>(), 32).prop_map(Key::B),
        (text(), any::<i64>()).prop_map(|(s, o)| Key::Mm(s, o)),
    ]
}

fn stored(bytes_mode: bool) -> impl Strategy<Value = Stored> {
    (
        proptest::collection::vec(hash(bytes_mode), 0..5),
        proptest::option::of(hash(bytes_mode)),
        proptest::collection::vec(prop_oneof![any::<u64>(), 0u64..200_000], 0..80),
        any::<u32>(),
        proptest::option::of(any::<i64>()),
        proptest::option::of(text()),
        proptest::option::of(text()),
        proptest::option::of(proptest::collection::vec(
            proptest::option::of(proptest::collection::vec(key(), 0..4)),
            0..4,
        )),
        proptest::option::of(any::<u32>()),
        proptest::option::of(text()),
    )
        .prop_map(
            |(
                hashes,
                parent,
                tokens,
                block_size,
                lora_id,
                medium,
                lora_name,
                extra_keys,
                group_idx,
                session_id,
            )| {
                Stored {
                    hashes,
                    parent,
                    tokens,
                    block_size,
                    lora_id,
                    medium,
                    lora_name,
                    extra_keys,
                    group_idx,
                    session_id,
                }
            },
        )
}

fn event(bytes_mode: bool) -> impl Strategy<Value = Ev> {
    prop_oneof![
        3 => stored(bytes_mode).prop_map(Ev::Stored),
        2 => (proptest::collection::vec(hash(bytes_mode), 0..5), proptest::option::of(text()))
            .prop_map(|(h, m)| Ev::Removed(h, m)),
        1 => Just(Ev::Cleared),
    ]
}

fn enc_hash(e: &mut Enc, h: &Hash, w: u8) {
    match h {
        Hash::U(v) => e.uint(*v, w),
        Hash::B(b) => e.bin(b, w),
    }
}

fn enc_hashes(e: &mut Enc, hs: &[Hash], w: u8) {
    e.array(hs.len(), w);
    for (i, h) in hs.iter().enumerate() {
        enc_hash(e, h, w.wrapping_add(i as u8));
    }
}

fn enc_tokens(e: &mut Enc, t: &[u64], w: u8) {
    e.array(t.len(), w);
    for (i, v) in t.iter().enumerate() {
        e.uint(*v, w.wrapping_mul(7).wrapping_add(i as u8));
    }
}

fn enc_keys(e: &mut Enc, keys: &Option<Vec<Option<Vec<Key>>>>, w: u8) {
    let Some(blocks) = keys else { return e.nil() };
    e.array(blocks.len(), w);
    for b in blocks {
        let Some(ks) = b else {
            e.nil();
            continue;
        };
        e.array(ks.len(), w);
        for k in ks {
            match k {
                Key::T(s) => e.str(s, w),
                Key::B(b) => e.bin(b, w),
                Key::Mm(s, o) => {
                    e.array(2, w);
                    e.str(s, w);
                    e.int(*o, w);
                }
            }
        }
    }
}

/// Writes a group of map entries.
type Field = Box<dyn Fn(&mut Enc)>;

/// vLLM map event, with an unknown field (a nested value) inserted to be skipped.
fn enc_vllm_map(e: &mut Enc, ev: &Ev, w: u8, unknown_at: usize) {
    let mut fields: Vec<Field> = Vec::new();
    match ev {
        Ev::Stored(s) => {
            let s1 = s.clone();
            fields.push(Box::new(move |e| {
                e.str("type", w);
                e.str("BlockStored", w);
                e.str("block_hashes", w);
                enc_hashes(e, &s1.hashes, w);
                e.str("parent_block_hash", w);
                match &s1.parent {
                    Some(h) => enc_hash(e, h, w),
                    None => e.nil(),
                }
                e.str("token_ids", w);
                enc_tokens(e, &s1.tokens, w);
                e.str("block_size", w);
                e.uint(u64::from(s1.block_size), w);
            }));
            let s2 = s.clone();
            fields.push(Box::new(move |e| {
                e.str("lora_id", w);
                e.opt_int(s2.lora_id, w);
                e.str("medium", w);
                e.opt_str(&s2.medium, w);
                e.str("lora_name", w);
                e.opt_str(&s2.lora_name, w);
                e.str("extra_keys", w);
                enc_keys(e, &s2.extra_keys, w);
            }));
            let s3 = s.clone();
            fields.push(Box::new(move |e| {
                e.str("group_idx", w);
                e.opt_int(s3.group_idx.map(i64::from), w);
                e.str("session_id", w);
                e.opt_str(&s3.session_id, w);
            }));
        }
        Ev::Removed(h, m) => {
            let (h, m) = (h.clone(), m.clone());
            fields.push(Box::new(move |e| {
                e.str("type", w);
                e.str("BlockRemoved", w);
                e.str("block_hashes", w);
                enc_hashes(e, &h, w);
                e.str("medium", w);
                e.opt_str(&m, w);
            }));
        }
        Ev::Cleared => fields.push(Box::new(move |e| {
            e.str("type", w);
            e.str("AllBlocksCleared", w);
        })),
    }
    let n_entries = match ev {
        Ev::Stored(_) => 11,
        Ev::Removed(..) => 3,
        Ev::Cleared => 1,
    };
    e.map(n_entries + 1, w);
    let at = unknown_at % (fields.len() + 1);
    for (i, f) in fields.iter().enumerate() {
        if i == at {
            enc_unknown(e, w);
        }
        f(e);
    }
    if at == fields.len() {
        enc_unknown(e, w);
    }
}

fn enc_unknown(e: &mut Enc, w: u8) {
    e.str("future_field", w);
    e.map(2, w);
    e.str("x", w);
    e.array(3, w);
    e.f64(1.5);
    e.nil();
    e.bin(&[1, 2, 3], w);
    e.int(-5, w);
    e.out.push(0xc3);
}

fn check_hash(got: &BlockHash<'_>, want: &Hash) {
    match (got, want) {
        (BlockHash::U64(g), Hash::U(w)) => assert_eq!(g, w),
        (BlockHash::Bytes(g), Hash::B(w)) => assert_eq!(*g, w.as_slice()),
        _ => panic!("hash form differs: {got:?} vs {want:?}"),
    }
}

fn check_event(got: &EventKind<'_>, want: &Ev, with_optional: bool) {
    match (got, want) {
        (EventKind::BlockStored(g), Ev::Stored(w)) => {
            assert_eq!(g.block_hashes.len(), w.hashes.len());
            for (a, b) in g.block_hashes.iter().zip(&w.hashes) {
                check_hash(a, b);
            }
            match (&g.parent_block_hash, &w.parent) {
                (None, None) => {}
                (Some(a), Some(b)) => check_hash(a, b),
                other => panic!("parent differs: {other:?}"),
            }
            // The lazy view against the eager list (slow twin).
            assert_eq!(g.token_ids.shape(), TokenShape::Flat);
            assert_eq!(g.token_ids.len(), w.tokens.len());
            assert_eq!(g.token_ids.to_vec().unwrap(), w.tokens);
            assert_eq!(g.block_size, w.block_size);
            assert_eq!(g.lora_id, w.lora_id);
            assert_eq!(g.medium, w.medium.as_deref());
            if with_optional {
                assert_eq!(g.lora_name, w.lora_name.as_deref());
                assert_eq!(g.group_idx, w.group_idx);
                assert_eq!(g.session_id, w.session_id.as_deref());
                let keys = g.extra_keys.as_ref().map(|bs| {
                    bs.iter()
                        .map(|b| {
                            b.as_ref().map(|ks| {
                                ks.iter()
                                    .map(|k| match *k {
                                        ExtraKey::Text(s) => Key::T(s.to_string()),
                                        ExtraKey::Bytes(b) => Key::B(b.to_vec()),
                                        ExtraKey::Mm { identifier, offset } => {
                                            Key::Mm(identifier.to_string(), offset)
                                        }
                                    })
                                    .collect::<Vec<_>>()
                            })
                        })
                        .collect::<Vec<_>>()
                });
                assert_eq!(format!("{keys:?}"), format!("{:?}", w.extra_keys));
            }
        }
        (EventKind::BlockRemoved(g), Ev::Removed(h, m)) => {
            assert_eq!(g.block_hashes.len(), h.len());
            for (a, b) in g.block_hashes.iter().zip(h) {
                check_hash(a, b);
            }
            assert_eq!(g.medium, m.as_deref());
        }
        (EventKind::AllBlocksCleared, Ev::Cleared) => {}
        other => panic!("event kind differs: {other:?}"),
    }
}

fn batch_strategy() -> impl Strategy<Value = (bool, Vec<Ev>, Option<u32>, u8, usize, f64)> {
    any::<bool>().prop_flat_map(|bytes_mode| {
        (
            Just(bytes_mode),
            proptest::collection::vec(event(bytes_mode), 0..6),
            proptest::option::of(any::<u32>()),
            any::<u8>(),
            any::<usize>(),
            any::<f64>().prop_filter("not NaN", |f| !f.is_nan()),
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn vllm_map_batches_round_trip((_bytes, evs, rank, w, unknown_at, ts) in batch_strategy()) {
        let mut e = Enc::default();
        e.array(3, w);
        e.f64(ts);
        e.array(evs.len(), w);
        for (i, ev) in evs.iter().enumerate() {
            enc_vllm_map(&mut e, ev, w.wrapping_add(i as u8), unknown_at.wrapping_add(i));
        }
        e.opt_int(rank.map(i64::from), w);
        let b = decode_payload(EventFormat::VllmKvMapV3, &e.out).unwrap();
        prop_assert_eq!(b.ts, Some(ts));
        prop_assert_eq!(b.rank, rank);
        prop_assert_eq!(b.events.len(), evs.len());
        for (g, want) in b.events.iter().zip(&evs) {
            check_event(&g.kind, want, true);
        }
        // Every strict prefix fails, never panics.
        for cut in 0..e.out.len() {
            prop_assert!(decode_payload(EventFormat::VllmKvMapV3, &e.out[..cut]).is_err());
        }
    }

    #[test]
    fn vllm_array_batches_round_trip((_bytes, evs, rank, w, _u, ts) in batch_strategy()) {
        let mut e = Enc::default();
        e.array(3, w);
        e.f64(ts);
        e.array(evs.len(), w);
        for ev in &evs {
            match ev {
                Ev::Stored(s) => {
                    e.array(9, w);
                    e.str("BlockStored", w);
                    enc_hashes(&mut e, &s.hashes, w);
                    match &s.parent { Some(h) => enc_hash(&mut e, h, w), None => e.nil() }
                    enc_tokens(&mut e, &s.tokens, w);
                    e.uint(u64::from(s.block_size), w);
                    e.opt_int(s.lora_id, w);
                    e.opt_str(&s.medium, w);
                    e.opt_str(&s.lora_name, w);
                    enc_keys(&mut e, &s.extra_keys, w);
                }
                Ev::Removed(h, m) => {
                    e.array(3, w);
                    e.str("BlockRemoved", w);
                    enc_hashes(&mut e, h, w);
                    e.opt_str(m, w);
                }
                Ev::Cleared => {
                    e.array(1, w);
                    e.str("AllBlocksCleared", w);
                }
            }
        }
        e.opt_int(rank.map(i64::from), w);
        let b = decode_payload(EventFormat::VllmKvArrayV1, &e.out).unwrap();
        prop_assert_eq!(b.rank, rank);
        for (g, want) in b.events.iter().zip(&evs) {
            if let (EventKind::BlockStored(g), Ev::Stored(w)) = (&g.kind, want) {
                prop_assert_eq!(g.lora_name, w.lora_name.as_deref());
            }
            check_event(&g.kind, want, false);
        }
    }

    #[test]
    fn sglang_batches_round_trip(
        evs in proptest::collection::vec(
            (proptest::collection::vec(any::<i64>(), 0..5), proptest::option::of(any::<i64>()),
             proptest::collection::vec(0u64..(1 << 32), 0..40), any::<u32>(),
             proptest::option::of(any::<i64>()), proptest::option::of(text()),
             proptest::option::of(proptest::option::of(text())), 0u8..3), 0..6),
        rank in any::<u32>(), w in any::<u8>(), maps in any::<bool>())
    {
        let mut e = Enc::default();
        e.array(3, w);
        e.f64(1767225601.25);
        e.array(evs.len(), w);
        for (hashes, parent, tokens, bs, lora, medium, salt, kind) in &evs {
            let enc_h = |e: &mut Enc, hs: &[i64]| {
                e.array(hs.len(), w);
                for (i, h) in hs.iter().enumerate() { e.int(*h, w.wrapping_add(i as u8)); }
            };
            match (kind, maps) {
                (0, false) => {
                    e.array(if salt.is_some() { 8 } else { 7 }, w);
                    e.str("BlockStored", w);
                    enc_h(&mut e, hashes);
                    e.opt_int(*parent, w);
                    enc_tokens(&mut e, tokens, w);
                    e.uint(u64::from(*bs), w);
                    e.opt_int(*lora, w);
                    e.opt_str(medium, w);
                    if let Some(s) = salt {
                        e.map(1, w);
                        e.str("cache_salt", w);
                        e.opt_str(s, w);
                    }
                }
                (0, true) => {
                    e.map(7 + usize::from(salt.is_some()), w);
                    e.str("type", w); e.str("BlockStored", w);
                    e.str("block_hashes", w); enc_h(&mut e, hashes);
                    e.str("parent_block_hash", w); e.opt_int(*parent, w);
                    e.str("token_ids", w); enc_tokens(&mut e, tokens, w);
                    e.str("block_size", w); e.uint(u64::from(*bs), w);
                    e.str("lora_id", w); e.opt_int(*lora, w);
                    e.str("medium", w); e.opt_str(medium, w);
                    if let Some(s) = salt { e.str("cache_salt", w); e.opt_str(s, w); }
                }
                (1, false) => {
                    e.array(3, w);
                    e.str("BlockRemoved", w);
                    enc_h(&mut e, hashes);
                    e.opt_str(medium, w);
                }
                (1, true) => {
                    e.map(3, w);
                    e.str("type", w); e.str("BlockRemoved", w);
                    e.str("block_hashes", w); enc_h(&mut e, hashes);
                    e.str("medium", w); e.opt_str(medium, w);
                }
                (_, false) => { e.array(1, w); e.str("AllBlocksCleared", w); }
                (_, true) => { e.map(1, w); e.str("type", w); e.str("AllBlocksCleared", w); }
            }
        }
        e.uint(u64::from(rank), w);
        let fmt = if maps { EventFormat::SglangKvMapV2 } else { EventFormat::SglangKvRankV1 };
        let b = decode_payload(fmt, &e.out).unwrap();
        prop_assert_eq!(b.rank, Some(rank));
        for (g, (hashes, parent, tokens, bs, lora, medium, salt, kind)) in b.events.iter().zip(&evs) {
            let want_h: Vec<BlockHash> = hashes.iter().map(|h| BlockHash::I64(*h)).collect();
            match (&g.kind, kind) {
                (EventKind::BlockStored(s), 0) => {
                    prop_assert_eq!(&s.block_hashes, &want_h);
                    prop_assert_eq!(s.parent_block_hash, parent.map(BlockHash::I64));
                    prop_assert_eq!(s.token_ids.to_vec().unwrap(), tokens.clone());
                    prop_assert_eq!(s.block_size, *bs);
                    prop_assert_eq!(s.lora_id, *lora);
                    prop_assert_eq!(s.medium, medium.as_deref());
                    let want_salt = salt.clone().flatten();
                    prop_assert_eq!(s.cache_salt, want_salt.as_deref());
                }
                (EventKind::BlockRemoved(r), 1) => {
                    prop_assert_eq!(&r.block_hashes, &want_h);
                    prop_assert_eq!(r.medium, medium.as_deref());
                }
                (EventKind::AllBlocksCleared, 2) => {}
                other => prop_assert!(false, "kind differs: {:?}", other),
            }
        }
    }

    #[test]
    fn trtllm_bodies_round_trip(
        evs in proptest::collection::vec(
            (any::<u64>(), proptest::option::of(any::<u64>()),
             proptest::collection::vec((any::<u64>(), proptest::collection::vec((any::<i32>(), any::<u64>()), 0..6),
                 proptest::option::of("[a-zA-Z\\-]{0,10}")), 0..3),
             0u8..4, proptest::option::of(0u32..8), any::<bool>()), 0..6))
    {
        let mut list = Vec::new();
        for (id, parent, blocks, kind, rank, signed) in &evs {
            // Hashes >= 2^63 spelled as signed decimals must be reinterpreted.
            let h = |v: u64| if *signed { serde_json::json!(v as i64) } else { serde_json::json!(v) };
            let data = match kind {
                0 => serde_json::json!({"type": "created", "num_blocks_per_cache_level": [100, 0]}),
                1 => serde_json::json!({"type": "stored", "parent_hash": parent.map(h), "blocks":
                    blocks.iter().map(|(bh, toks, salt)| serde_json::json!({
                        "type": "stored_block", "block_hash": h(*bh),
                        "tokens": toks.iter().map(|(t, x)| serde_json::json!({"type": "unique_token", "token_id": t, "token_extra_id": x})).collect::<Vec<_>>(),
                        "cache_salt": salt, "cache_level": 0, "priority": 35, "mm_keys": [], "new_key": {"a": [1.5]}})).collect::<Vec<_>>()}),
                2 => serde_json::json!({"type": "removed", "block_hashes": blocks.iter().map(|b| h(b.0)).collect::<Vec<_>>()}),
                _ => serde_json::json!({"type": "updated", "block_hash": h(*id), "cache_level": {"type": "event_diff", "new_value": 1, "old_value": 0}, "priority": null}),
            };
            let mut env = serde_json::json!({"event_id": id, "data": data, "window_size": 32768});
            if let Some(r) = rank { env["attention_dp_rank"] = serde_json::json!(r); }
            list.push(env);
        }
        let body = serde_json::to_vec(&list).unwrap();
        let b = decode_json(EventFormat::TrtllmKvHttpPreviewV1, &body).unwrap();
        prop_assert_eq!(b.events.len(), evs.len());
        for (g, (id, parent, blocks, kind, rank, _)) in b.events.iter().zip(&evs) {
            let env = g.envelope.unwrap();
            prop_assert_eq!(env.event_id, *id);
            prop_assert_eq!(env.attention_dp_rank, *rank);
            match (&g.kind, kind) {
                (EventKind::Created(_), 0) => {}
                (EventKind::Stored(s), 1) => {
                    prop_assert_eq!(s.parent_hash, *parent);
                    prop_assert_eq!(s.blocks.len(), blocks.len());
                    for (gb, (bh, toks, salt)) in s.blocks.iter().zip(blocks) {
                        prop_assert_eq!(gb.block_hash, *bh);
                        prop_assert_eq!(&gb.cache_salt, salt);
                        let t: Vec<(i32, u64)> = gb.tokens.iter().map(|t| (t.token_id, t.token_extra_id)).collect();
                        prop_assert_eq!(&t, toks);
                    }
                }
                (EventKind::BlockRemoved(r), 2) => {
                    let hs: Vec<u64> = r.block_hashes.iter().map(|h| h.to_u64()).collect();
                    let want: Vec<u64> = blocks.iter().map(|b| b.0).collect();
                    prop_assert_eq!(hs, want);
                }
                (EventKind::Updated(u), 3) => prop_assert_eq!(u.block_hash, *id),
                other => prop_assert!(false, "kind differs: {:?}", other),
            }
        }
    }
}
