//! Readers of the KV-event fields that more than one engine's msgpack decoder shares (block
//! hashes in either engine's form, nil-or-value fields, the tag of a tagged-array event):
//! neutral ground, so that the SGLang decoder does not import the vLLM decoder's helpers.

use super::model::BlockHash;
use super::msgpack::Reader;
use super::Location;
use crate::Error;

/// How a map or array event writes its block hashes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HashForm {
    /// vLLM: uint64 (int mode) or bin (bytes mode).
    U64OrBin,
    /// SGLang: signed int64.
    I64,
}

/// Reads one block hash in `form`.
pub(crate) fn read_hash<'a>(r: &mut Reader<'a>, form: HashForm) -> Result<BlockHash<'a>, Error> {
    match form {
        HashForm::U64OrBin => {
            if matches!(r.peek("a block hash")?, 0xc4..=0xc6) {
                Ok(BlockHash::Bytes(r.bin("a block hash")?))
            } else {
                Ok(BlockHash::U64(r.u64("a block hash (uint64 or bin)")?))
            }
        }
        HashForm::I64 => Ok(BlockHash::I64(r.i64("a block hash (int64)")?)),
    }
}

/// Reads an array of block hashes.
pub(crate) fn read_hashes<'a>(
    r: &mut Reader<'a>,
    form: HashForm,
) -> Result<Vec<BlockHash<'a>>, Error> {
    let n = r.array("an array of block hashes")?;
    let mut out = r.vec(n)?;
    for i in 0..n {
        out.push(read_hash(r, form).map_err(|e| e.in_field(&format!("[{i}]")))?);
    }
    Ok(out)
}

/// Reads nil or a hash.
pub(crate) fn read_opt_hash<'a>(
    r: &mut Reader<'a>,
    form: HashForm,
) -> Result<Option<BlockHash<'a>>, Error> {
    if r.nil()? {
        Ok(None)
    } else {
        read_hash(r, form).map(Some)
    }
}

/// Reads nil or a string.
pub(crate) fn opt_str<'a>(r: &mut Reader<'a>) -> Result<Option<&'a str>, Error> {
    if r.nil()? {
        Ok(None)
    } else {
        r.str("a string or nil").map(Some)
    }
}

/// Names the engines repeat in every event (storage media, KV-cache group kinds).
const KNOWN_NAMES: [&str; 5] = [
    "GPU",
    "CPU",
    "CPU_PINNED",
    "full_attention",
    "sliding_window",
];

/// Reads nil or a string, handing out the program's own copy of a name the engines repeat in
/// every event ([`KNOWN_NAMES`]) instead of the payload's bytes: whoever compares the decoded
/// name (the index, once per event) reads memory it already holds, not a payload that may have
/// gone cold since it was decoded. Any other string is the payload's, as [`opt_str`] reads it.
pub(crate) fn opt_name<'a>(r: &mut Reader<'a>) -> Result<Option<&'a str>, Error> {
    Ok(opt_str(r)?.map(|s| KNOWN_NAMES.into_iter().find(|&k| k == s).unwrap_or(s)))
}

/// Reads nil or a signed integer.
pub(crate) fn opt_i64(r: &mut Reader<'_>) -> Result<Option<i64>, Error> {
    if r.nil()? {
        Ok(None)
    } else {
        r.i64("an integer or nil").map(Some)
    }
}

/// Reads nil or a u32.
pub(crate) fn opt_u32(r: &mut Reader<'_>) -> Result<Option<u32>, Error> {
    if r.nil()? {
        Ok(None)
    } else {
        r.u32("an integer or nil").map(Some)
    }
}

/// Reads nil or a u64.
pub(crate) fn opt_u64(r: &mut Reader<'_>) -> Result<Option<u64>, Error> {
    if r.nil()? {
        Ok(None)
    } else {
        r.u64("an integer or nil").map(Some)
    }
}

/// Reads the tag of a tagged-array event and returns it with the array length.
pub(crate) fn read_tag<'a>(r: &mut Reader<'a>) -> Result<(usize, usize, &'a str), Error> {
    let at = r.pos();
    let n = r.array("a tagged event array")?;
    if n == 0 {
        return Err(Error::EventBadLength {
            at: Location::offset(at),
            what: "event array",
            expected: "at least 1 (the tag)",
            found: 0,
        });
    }
    let tag = r.str("the event tag").map_err(|e| e.in_field("[0]"))?;
    Ok((at, n, tag))
}

/// The wrong-length error of an event array at byte `at`.
pub(crate) fn bad_len(at: usize, what: &'static str, expected: &'static str, n: usize) -> Error {
    Error::EventBadLength {
        at: Location::offset(at),
        what,
        expected,
        found: n as u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::Limits;

    /// A name the engines repeat comes back as the program's own copy, any other string as
    /// the payload's bytes; both equal what the payload says, and nil stays nil.
    #[test]
    fn repeated_names_are_the_programs_own() {
        let payload: Vec<u8> = [&[0xa3][..], b"GPU", &[0xa4], b"NVME", &[0xc0]].concat();
        let inside = |s: &str| payload.as_ptr_range().contains(&s.as_ptr());
        let mut r = Reader::new(&payload, &Limits::default());
        let gpu = opt_name(&mut r).unwrap().unwrap();
        let nvme = opt_name(&mut r).unwrap().unwrap();
        assert_eq!((gpu, inside(gpu)), ("GPU", false));
        assert_eq!((nvme, inside(nvme)), ("NVME", true));
        assert_eq!(opt_name(&mut r).unwrap(), None);
    }
}
