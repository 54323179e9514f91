//! Fast paths against slow, obvious twins (proptest):
//!
//! * vLLM hand-written CBOR == ciborium for random ids and extra keys, in every extra-key
//!   form (K1, K2, K3) and with look-ahead tokens;
//! * vLLM hand-written pickle == a naive tree pickler with a memo table (same forms);
//! * the plain `sha256_cbor` chain (the pipelined run) == SHA-256 of ciborium's bytes, from
//!   any parent and position, fed in random pieces;
//! * incremental hashing (random split points) == one shot, for every engine.

use ciborium::Value as Cbor;
use kvhash::sglang::{KeyMode, SglangHasher};
use kvhash::trtllm::{MmItem, SaltVariant, TrtllmHasher};
use kvhash::vllm::{
    ExtraKeyForm, HashAlgo, LoraKey, MmFeature, NoneHashRule, PromptEmbeds, VllmChain, VllmExtras,
    VllmHasher, VllmRules,
};
use kvhash::Digest;
use proptest::prelude::*;

// ------------------------------------------------------------------ the obvious key rule

/// The extra keys of the hashed window `[s, e)` (the block, plus its look-ahead tokens) by
/// the spec's plain rule (docs/contracts/vllm.md §3): every item overlapping the window, for sorted,
/// non-overlapping items of length ≥ 1.
#[derive(Debug, Clone)]
enum Key {
    Lora(String, String),
    Mm(String, i64),
    Salt(String),
    Embeds([u8; 32]),
}

fn keys_of(extras: &VllmExtras, emb: Option<&(Vec<u8>, usize)>, s: u64, e: u64) -> Vec<Key> {
    let mut keys = Vec::new();
    if let Some(l) = &extras.lora {
        keys.push(Key::Lora(l.name.clone(), l.path.clone()));
    }
    for f in &extras.mm_features {
        if s < f.offset + f.length && f.offset < e {
            keys.push(Key::Mm(f.identifier.clone(), f.offset as i64 - s as i64));
        }
    }
    if s == 0 {
        if let Some(salt) = extras.cache_salt.as_ref().filter(|x| !x.is_empty()) {
            keys.push(Key::Salt(salt.clone()));
        }
    }
    if let Some((data, row)) = emb {
        use sha2::Digest as _;
        let d: [u8; 32] = sha2::Sha256::digest(&data[s as usize * row..e as usize * row]).into();
        keys.push(Key::Embeds(d));
    }
    keys
}

// ------------------------------------------------------------------ CBOR twin

fn cbor_block(
    parent: &Digest,
    tokens: &[u64],
    keys: &[Key],
    form: ExtraKeyForm,
    ahead: &[u64],
) -> Vec<u8> {
    let tagged = |tag: &str, rest: Vec<Cbor>| {
        if form == ExtraKeyForm::K3 {
            let mut v = vec![Cbor::Text(tag.into())];
            v.extend(rest);
            Cbor::Array(v)
        } else if rest.len() == 1 {
            rest.into_iter().next().unwrap()
        } else {
            Cbor::Array(rest)
        }
    };
    let mut extra = if keys.is_empty() {
        Cbor::Null
    } else {
        Cbor::Array(
            keys.iter()
                .map(|k| match k {
                    Key::Lora(n, p) => match form {
                        ExtraKeyForm::K3 => {
                            tagged("lora", vec![Cbor::Text(n.clone()), Cbor::Text(p.clone())])
                        }
                        _ => Cbor::Text(n.clone()),
                    },
                    Key::Mm(id, off) => match form {
                        ExtraKeyForm::K1 => Cbor::Text(id.clone()),
                        _ => tagged(
                            "mm",
                            vec![Cbor::Text(id.clone()), Cbor::Integer((*off).into())],
                        ),
                    },
                    Key::Salt(s) => tagged("cache_salt", vec![Cbor::Text(s.clone())]),
                    Key::Embeds(d) => tagged("prompt_embeds", vec![Cbor::Bytes(d.to_vec())]),
                })
                .collect(),
        )
    };
    if !ahead.is_empty() {
        let mut v = vec![extra];
        v.extend(ahead.iter().map(|t| Cbor::Integer((*t).into())));
        extra = Cbor::Array(v);
    }
    let v = Cbor::Array(vec![
        Cbor::Bytes(parent.as_bytes().to_vec()),
        Cbor::Array(tokens.iter().map(|t| Cbor::Integer((*t).into())).collect()),
        extra,
    ]);
    let mut out = Vec::new();
    ciborium::into_writer(&v, &mut out).expect("ciborium");
    out
}

// ------------------------------------------------------------------ pickle twin

/// A Python value as pickle sees it. `Tag` strings are one shared object per content.
enum Py {
    Bytes(Vec<u8>),
    Str(String),
    Tag(&'static str),
    Int(i128),
    None,
    Tuple(Vec<Py>),
}

struct Pickler {
    out: Vec<u8>,
    memo_next: u32,
    tags: Vec<(&'static str, u32)>,
}

impl Pickler {
    fn memoize(&mut self) -> u32 {
        self.out.push(0x94);
        self.memo_next += 1;
        self.memo_next - 1
    }
    fn save(&mut self, v: &Py) {
        match v {
            Py::Bytes(b) => {
                if b.len() < 256 {
                    self.out.push(0x43);
                    self.out.push(b.len() as u8);
                } else {
                    self.out.push(0x42);
                    self.out.extend((b.len() as u32).to_le_bytes());
                }
                self.out.extend(b);
                self.memoize();
            }
            Py::Str(s) => self.save_str(s),
            Py::Tag(t) => {
                if let Some((_, i)) = self.tags.iter().find(|(x, _)| x == t) {
                    let i = *i;
                    if i < 256 {
                        self.out.extend([0x68, i as u8]);
                    } else {
                        self.out.push(0x6a);
                        self.out.extend(i.to_le_bytes());
                    }
                } else {
                    self.save_str(t);
                    self.tags.push((t, self.memo_next - 1));
                }
            }
            Py::Int(x) => {
                let x = *x;
                if (0..256).contains(&x) {
                    self.out.extend([0x4b, x as u8]);
                } else if (0..65536).contains(&x) {
                    self.out.push(0x4d);
                    self.out.extend((x as u16).to_le_bytes());
                } else if (-(1i128 << 31)..(1i128 << 31)).contains(&x) {
                    self.out.push(0x4a);
                    self.out.extend((x as i32).to_le_bytes());
                } else {
                    // Python: x.to_bytes(nbytes, 'little', signed=True), trimmed.
                    let nbytes = ((128 - x.unsigned_abs().leading_zeros()) as usize >> 3) + 1;
                    let mut b = x.to_le_bytes()[..nbytes].to_vec();
                    if x < 0 && nbytes > 1 && b[nbytes - 1] == 0xff && b[nbytes - 2] & 0x80 != 0 {
                        b.pop();
                    }
                    self.out.extend([0x8a, b.len() as u8]);
                    self.out.extend(b);
                }
            }
            Py::None => self.out.push(0x4e),
            Py::Tuple(items) => {
                if items.is_empty() {
                    self.out.push(0x29);
                    return;
                }
                if items.len() > 3 {
                    self.out.push(0x28);
                }
                for it in items {
                    self.save(it);
                }
                self.out.push(match items.len() {
                    1 => 0x85,
                    2 => 0x86,
                    3 => 0x87,
                    _ => 0x74,
                });
                self.memoize();
            }
        }
    }
    fn save_str(&mut self, s: &str) {
        if s.len() < 256 {
            self.out.push(0x8c);
            self.out.push(s.len() as u8);
        } else {
            self.out.push(0x58);
            self.out.extend((s.len() as u32).to_le_bytes());
        }
        self.out.extend(s.as_bytes());
        self.memoize();
    }
}

fn pickle_dumps(v: &Py) -> Vec<u8> {
    let mut p = Pickler {
        out: Vec::new(),
        memo_next: 0,
        tags: Vec::new(),
    };
    p.save(v);
    p.out.push(0x2e);
    let mut framed = vec![0x80, 5];
    if p.out.len() >= 4 {
        framed.push(0x95);
        framed.extend((p.out.len() as u64).to_le_bytes());
    }
    framed.extend(p.out);
    framed
}

fn pickle_block(
    parent: &Digest,
    tokens: &[u64],
    keys: &[Key],
    form: ExtraKeyForm,
    ahead: &[u64],
) -> Vec<u8> {
    let k3 = form == ExtraKeyForm::K3;
    let mut extra = if keys.is_empty() {
        Py::None
    } else {
        Py::Tuple(
            keys.iter()
                .map(|k| match k {
                    Key::Lora(n, p) if k3 => Py::Tuple(vec![
                        Py::Tag("lora"),
                        Py::Str(n.clone()),
                        Py::Str(p.clone()),
                    ]),
                    Key::Lora(n, _) => Py::Str(n.clone()),
                    Key::Mm(id, off) => match form {
                        ExtraKeyForm::K1 => Py::Str(id.clone()),
                        ExtraKeyForm::K2 => {
                            Py::Tuple(vec![Py::Str(id.clone()), Py::Int(*off as i128)])
                        }
                        ExtraKeyForm::K3 => Py::Tuple(vec![
                            Py::Tag("mm"),
                            Py::Str(id.clone()),
                            Py::Int(*off as i128),
                        ]),
                    },
                    Key::Salt(s) if k3 => {
                        Py::Tuple(vec![Py::Tag("cache_salt"), Py::Str(s.clone())])
                    }
                    Key::Salt(s) => Py::Str(s.clone()),
                    Key::Embeds(d) if k3 => {
                        Py::Tuple(vec![Py::Tag("prompt_embeds"), Py::Bytes(d.to_vec())])
                    }
                    Key::Embeds(d) => Py::Bytes(d.to_vec()),
                })
                .collect(),
        )
    };
    if !ahead.is_empty() {
        let mut v = vec![extra];
        v.extend(ahead.iter().map(|t| Py::Int(*t as i128)));
        extra = Py::Tuple(v);
    }
    pickle_dumps(&Py::Tuple(vec![
        Py::Bytes(parent.as_bytes().to_vec()),
        Py::Tuple(tokens.iter().map(|t| Py::Int(*t as i128)).collect()),
        extra,
    ]))
}

// ------------------------------------------------------------------ strategies

fn token() -> impl Strategy<Value = u64> {
    prop_oneof![
        0u64..30,
        0u64..300,
        0u64..70_000,
        0u64..200_000,
        any::<u32>().prop_map(u64::from),
        any::<u64>(),
    ]
}

/// Ids at and around every CBOR head boundary (23/24, 255/256, 65535/65536, 2^32-1/2^32).
fn boundary_token() -> impl Strategy<Value = u64> {
    const EDGES: [u64; 10] = [
        0,
        23,
        24,
        255,
        256,
        65_535,
        65_536,
        u32::MAX as u64,
        1 << 32,
        u64::MAX,
    ];
    prop_oneof![
        4 => proptest::sample::select(&EDGES[..8]),
        1 => proptest::sample::select(&EDGES[..]),
        2 => 0u64..152_000,
    ]
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof!["[a-z/_-]{0,12}", "\\PC{0,6}", "[x]{250,300}"]
}

/// Sorted, non-overlapping multimodal items inside `0..n`.
fn mm_items(n: u64) -> impl Strategy<Value = Vec<(u64, u64)>> {
    proptest::collection::vec((0u64..8, 1u64..24), 0..4).prop_map(move |gaps| {
        let mut pos = 0;
        let mut v = Vec::new();
        for (gap, len) in gaps {
            let off = pos + gap;
            if off + len > n {
                break;
            }
            v.push((off, len));
            pos = off + len;
        }
        v
    })
}

#[derive(Debug, Clone)]
struct VllmCase {
    algo: HashAlgo,
    block: usize,
    ids: Vec<u64>,
    lora: Option<(String, String)>,
    salt: Option<String>,
    mm: Vec<(u64, u64)>,
    mm_ids: Vec<String>,
    embeds_row: Option<usize>,
    split: Vec<usize>,
    form: ExtraKeyForm,
    lookahead: usize,
}

fn vllm_case() -> impl Strategy<Value = VllmCase> {
    (
        prop_oneof![
            Just(HashAlgo::Sha256Cbor),
            Just(HashAlgo::XxhashCbor),
            Just(HashAlgo::Sha256),
            Just(HashAlgo::Xxhash)
        ],
        prop_oneof![1usize..20, 20usize..70],
        proptest::collection::vec(token(), 0..150),
    )
        .prop_flat_map(|(algo, block, ids)| {
            let n = ids.len() as u64;
            (
                Just(algo),
                Just(block),
                Just(ids),
                proptest::option::of((text(), text())),
                proptest::option::of(text()),
                mm_items(n),
                proptest::collection::vec(prop_oneof![Just("img".to_string()), "[0-9a-f]{64}"], 4),
                proptest::option::of(1usize..6),
                proptest::collection::vec(0usize..100, 0..4),
            )
        })
        .prop_flat_map(
            |(algo, block, ids, lora, salt, mm, mm_ids, embeds_row, split)| {
                (
                    prop_oneof![
                        Just(ExtraKeyForm::K1),
                        Just(ExtraKeyForm::K2),
                        Just(ExtraKeyForm::K3)
                    ],
                    prop_oneof![3 => Just(0usize), 1 => 1usize..4],
                )
                    .prop_map(move |(form, lookahead)| VllmCase {
                        algo,
                        block,
                        ids: ids.clone(),
                        lora: lora.clone(),
                        salt: salt.clone(),
                        mm: mm.clone(),
                        mm_ids: mm_ids.clone(),
                        embeds_row,
                        split: split.clone(),
                        form,
                        lookahead,
                    })
            },
        )
}

fn build_vllm(c: &VllmCase) -> (VllmHasher, Option<(Vec<u8>, usize)>) {
    let mut extras = VllmExtras {
        lora: c.lora.clone().map(|(name, path)| LoraKey { name, path }),
        cache_salt: c.salt.clone(),
        ..Default::default()
    };
    for (i, (off, len)) in c.mm.iter().enumerate() {
        extras.mm_features.push(MmFeature {
            identifier: c.mm_ids[i % c.mm_ids.len()].clone(),
            offset: *off,
            length: *len,
        });
    }
    let mut emb = None;
    if let Some(row) = c.embeds_row {
        let data: Vec<u8> = (0..c.ids.len() * row)
            .map(|i| (i * 31 % 251) as u8)
            .collect();
        emb = Some((data.clone(), row));
        extras.prompt_embeds = Some(PromptEmbeds::new(data, row).unwrap());
    }
    let rules = VllmRules {
        none_hash: NoneHashRule::B,
        extra_keys: c.form,
        lookahead: true,
    };
    let h = VllmHasher::with_rules(rules, c.algo, c.block, Some("0"))
        .unwrap()
        .with_extras(extras)
        .unwrap()
        .with_lookahead(c.lookahead)
        .unwrap();
    (h, emb)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn vllm_serializers_match_twins(c in vllm_case()) {
        let (h, emb) = build_vllm(&c);
        let (b, la) = (c.block, c.lookahead);
        let mut chain = h.chain();
        let mut fed = 0;
        for i in 0..h.block_count(c.ids.len()) {
            let s = i * b;
            let (block, ahead) = (&c.ids[s..s + b], &c.ids[s + b..s + b + la]);
            let keys = keys_of(h.extras(), emb.as_ref(), s as u64, (s + b + la) as u64);
            let parent = chain.parent();
            let got = chain.serialize_next(block, ahead).unwrap();
            let want = if c.algo.is_cbor() {
                cbor_block(&parent, block, &keys, c.form, ahead)
            } else {
                pickle_block(&parent, block, &keys, c.form, ahead)
            };
            prop_assert_eq!(hex::encode(&got), hex::encode(&want), "block {}", i);
            let d = chain.extend_to_vec(&c.ids[fed..s + b + la]).unwrap();
            fed = s + b + la;
            prop_assert_eq!(d.len(), 1);
            prop_assert_eq!(d[0], c.algo.digest(&want));
        }
    }

    /// The plain `sha256_cbor` stack path (block size ≤ 64) on ids at every CBOR head
    /// boundary, as `u32` and as `u64`, against SHA-256 of ciborium's bytes; block sizes
    /// straddle the 23/24 array-head boundary and the 64-id limit of the stack buffer.
    #[test]
    fn vllm_plain_sha256_cbor_boundaries(
        block in 1usize..70,
        ids in proptest::collection::vec(boundary_token(), 0..200),
    ) {
        use sha2::Digest as _;
        let h = VllmHasher::new(HashAlgo::Sha256Cbor, block, Some("0")).unwrap();
        let mut parent = h.none_hash();
        let mut want = Vec::new();
        for b in ids.chunks_exact(block) {
            let bytes = cbor_block(&parent, b, &[], ExtraKeyForm::K3, &[]);
            parent = Digest::sha256(sha2::Sha256::digest(&bytes).into());
            want.push(parent);
        }
        let mut got = vec![Digest::sha256([0; 32]); want.len()];
        prop_assert_eq!(h.block_hashes(&ids, &mut got).unwrap(), want.len());
        prop_assert_eq!(&got, &want);
        if ids.iter().all(|t| *t <= u32::MAX as u64) {
            let ids32: Vec<u32> = ids.iter().map(|t| *t as u32).collect();
            let mut ints = vec![0u64; want.len()];
            h.block_hashes_u64(&ids32, &mut ints).unwrap();
            let w: Vec<u64> = want.iter().map(Digest::last8_be).collect();
            prop_assert_eq!(ints, w);
        }
    }

    /// The plain `sha256_cbor` path's pipelined run (two buffers, block `k + 1` prepared
    /// while block `k` is digested) from a random parent and position, fed in random pieces
    /// (so that runs of whole blocks, a pending partial block and single blocks alternate),
    /// as `u32` and as `u64` ids, against SHA-256 of ciborium's bytes block by block.
    #[test]
    fn vllm_plain_sha256_cbor_run_from_any_parent(
        block in 1usize..70,
        ids in proptest::collection::vec(prop_oneof![boundary_token(), token()], 0..400),
        parent in any::<[u8; 32]>(),
        start in 0u64..1_000,
        cuts in proptest::collection::vec(0usize..150, 0..6),
    ) {
        use sha2::Digest as _;
        let h = VllmHasher::new(HashAlgo::Sha256Cbor, block, Some("0")).unwrap();
        let position = start * block as u64;
        let mut p = Digest::sha256(parent);
        let mut want = Vec::new();
        for b in ids.chunks_exact(block) {
            let bytes = cbor_block(&p, b, &[], ExtraKeyForm::K3, &[]);
            p = Digest::sha256(sha2::Sha256::digest(&bytes).into());
            want.push(p);
        }
        let mut chain = VllmChain::resume(&h, Digest::sha256(parent), position).unwrap();
        let mut got = Vec::new();
        let mut rest = &ids[..];
        for cut in &cuts {
            let (a, b) = rest.split_at((*cut).min(rest.len()));
            chain.extend(a, |d| got.push(d)).unwrap();
            rest = b;
        }
        chain.extend(rest, |d| got.push(d)).unwrap();
        prop_assert_eq!(&got, &want);
        prop_assert_eq!(chain.parent(), want.last().copied().unwrap_or(Digest::sha256(parent)));
        prop_assert_eq!(chain.position(), position + (want.len() * block) as u64);
        if ids.iter().all(|t| *t <= u32::MAX as u64) {
            let ids32: Vec<u32> = ids.iter().map(|t| *t as u32).collect();
            let mut chain = VllmChain::resume(&h, Digest::sha256(parent), position).unwrap();
            let mut got32 = Vec::new();
            chain.extend(&ids32, |d| got32.push(d)).unwrap();
            prop_assert_eq!(&got32, &want);
        }
    }

    #[test]
    fn vllm_incremental_equals_one_shot(c in vllm_case()) {
        let (h, _) = build_vllm(&c);
        let mut one = vec![Digest::sha256([0; 32]); h.block_count(c.ids.len())];
        let n = h.block_hashes(&c.ids, &mut one).unwrap();
        prop_assert_eq!(n, one.len());
        let mut chain = h.chain();
        let mut got = Vec::new();
        let mut rest = &c.ids[..];
        for cut in &c.split {
            let (a, b) = rest.split_at((*cut).min(rest.len()));
            chain.extend(a, |d| got.push(d)).unwrap();
            rest = b;
        }
        chain.extend(rest, |d| got.push(d)).unwrap();
        prop_assert_eq!(&got, &one);
        // u32 ids take the same path as u64 ids.
        if c.ids.iter().all(|t| *t <= u32::MAX as u64) {
            let ids32: Vec<u32> = c.ids.iter().map(|t| *t as u32).collect();
            let mut ints = vec![0u64; one.len()];
            h.block_hashes_u64(&ids32, &mut ints).unwrap();
            let want: Vec<u64> = one.iter().map(Digest::last8_be).collect();
            prop_assert_eq!(ints, want);
        }
    }

    #[test]
    fn sglang_incremental_equals_one_shot(
        page in 1usize..20,
        ids in proptest::collection::vec(any::<u32>(), 0..100),
        salt in proptest::option::of("[a-z]{0,8}"),
        eagle in any::<bool>(),
        split in proptest::collection::vec(0usize..60, 0..4),
    ) {
        let mode = if eagle { KeyMode::EagleBigram } else { KeyMode::Plain };
        let h = SglangHasher::new(page).unwrap().with_cache_salt(salt.as_deref()).with_mode(mode);
        let mut one = vec![0u64; ids.len()];
        let n = h.block_hashes_u64(&ids, &mut one).unwrap();
        one.truncate(n);
        let mut chain = h.chain();
        let mut got = Vec::new();
        let mut rest = &ids[..];
        for cut in &split {
            let (a, b) = rest.split_at((*cut).min(rest.len()));
            chain.extend(a, |d| got.push(d.first8_be()));
            rest = b;
        }
        chain.extend(rest, |d| got.push(d.first8_be()));
        prop_assert_eq!(&got, &one);
        // Obvious twin: SHA-256 over parent || units.
        use sha2::Digest as _;
        let units: Vec<Vec<u32>> = if eagle {
            ids.windows(2).map(|w| w.to_vec()).collect()
        } else {
            ids.iter().map(|t| vec![*t]).collect()
        };
        let mut parent: Option<Vec<u8>> = h.salt_seed().map(|d| d.as_bytes().to_vec());
        for (i, pg) in units.chunks_exact(page).enumerate() {
            let mut msg = parent.clone().unwrap_or_default();
            for u in pg { for t in u { msg.extend(t.to_le_bytes()); } }
            let d = sha2::Sha256::digest(&msg).to_vec();
            prop_assert_eq!(u64::from_be_bytes(d[..8].try_into().unwrap()), one[i]);
            parent = Some(d);
        }
        let checked: Vec<i64> = ids.iter().map(|t| *t as i64).collect();
        let mut c2 = vec![0u64; ids.len()];
        let n2 = h.block_hashes_u64_checked(&checked, &mut c2).unwrap();
        prop_assert_eq!(&c2[..n2], &one[..]);
    }

    #[test]
    fn trtllm_incremental_equals_one_shot(
        tpb in 1usize..40,
        ids in proptest::collection::vec(any::<u32>(), 0..120),
        extra_seed in proptest::option::of(any::<u64>()),
        lora in proptest::option::of(any::<u64>()),
        salt in proptest::option::of(("[a-zA-Z]{1,12}", any::<bool>())),
        mm in proptest::collection::vec((any::<[u8; 32]>(), 0u64..120, 1u64..40), 0..3),
        split in proptest::collection::vec(0usize..80, 0..4),
    ) {
        let mut h = TrtllmHasher::new(tpb).unwrap().with_extra_ids(extra_seed.is_some());
        if let Some(l) = lora { h = h.with_lora_task_id(l); }
        if let Some((s, blake)) = &salt {
            let v = if *blake { SaltVariant::Blake3SaltId } else { SaltVariant::StdHashString };
            h = h.with_cache_salt(v, s).unwrap();
        }
        h = h.with_mm_items(mm.iter().map(|(d, s, l)| MmItem { digest: *d, start: *s, length: *l }).collect()).unwrap();
        let extra: Vec<u64> = ids.iter().enumerate().map(|(i, _)| extra_seed.unwrap_or(0).wrapping_mul(i as u64 + 1)).collect();
        let mut one = vec![0u64; ids.len()];
        let n = match extra_seed {
            Some(_) => h.block_hashes_u64_with_extra_ids(&ids, &extra, &mut one),
            None => h.block_hashes_u64(&ids, &mut one),
        }.unwrap();
        one.truncate(n);
        let mut chain = h.chain();
        let mut got = Vec::new();
        let (mut rest, mut rest_e) = (&ids[..], &extra[..]);
        for cut in &split {
            let k = (*cut).min(rest.len());
            let (a, b) = rest.split_at(k);
            let (ae, be) = rest_e.split_at(k);
            match extra_seed {
                Some(_) => chain.extend_with_extra_ids(a, ae, |x| got.push(x)),
                None => chain.extend(a, |x| got.push(x)),
            }.unwrap();
            rest = b;
            rest_e = be;
        }
        match extra_seed {
            Some(_) => chain.extend_with_extra_ids(rest, rest_e, |x| got.push(x)),
            None => chain.extend(rest, |x| got.push(x)),
        }.unwrap();
        prop_assert_eq!(&got, &one);
        // The partial tail equals block_hash of the tail from the last full parent.
        let tail_start = n * tpb;
        let tail = &ids[tail_start..];
        let want_tail = if tail.is_empty() { None } else {
            let e = extra_seed.map(|_| &extra[tail_start..]);
            Some(h.block_hash(chain.parent(), tail_start as u64, tail, e).unwrap())
        };
        prop_assert_eq!(chain.partial_hash(), want_tail);
    }
}
