//! Which multimodal items key a block (vLLM's `_gen_mm_extra_hash_keys` walk), per
//! [`ExtraKeyForm`], and the look-ahead cursor rewind of vLLM ≥ 0.33.

use super::{BlockKey, ExtraKeyForm, MmFeature};
use crate::Error;

/// Pushes a key for every item the hashed window `[start, hash_end)` touches, walking from
/// cursor `cur`, and returns the cursor for the next block (whose hashed window starts at
/// `end`).
///
/// Without look-ahead `hash_end == end`. With look-ahead the window reaches `L` tokens past
/// the block, and the cursor is rewound to the first item that does not end by `end`, so
/// the next block sees the items that reached into this block's look-ahead window again.
pub(crate) fn next_cursor(
    features: &[MmFeature],
    form: ExtraKeyForm,
    start: u64,
    end: u64,
    hash_end: u64,
    cur: usize,
    keys: &mut Vec<BlockKey>,
) -> Result<usize, Error> {
    let mut next = walk(features, form, start, hash_end, cur, keys)?;
    if hash_end != end {
        while next > 0 {
            let Some(f) = features.get(next - 1) else {
                break;
            };
            let f_end = f
                .offset
                .checked_add(f.length)
                .ok_or(Error::MmOutOfRange { index: next - 1 })?;
            if f_end <= end {
                break;
            }
            next -= 1;
        }
    }
    Ok(next)
}

/// The walk over `[start, end)` from item `cur`.
///
/// An item `[offset, offset + length)` is passed (skipped, cursor advanced) when the block
/// starts after it: `start > item_end` under K1, `start >= item_end` from K2 on (K1 keys a
/// block with an item that ends exactly where the block starts). An item that started
/// before `end` and is not passed keys the block; the cursor moves past it when the block
/// also holds its end. The walk stops at the first item the block does not reach. When the
/// last item ends before the block (`<` under K1, `<=` from K2), nothing is keyed and the
/// cursor is returned unchanged.
fn walk(
    features: &[MmFeature],
    form: ExtraKeyForm,
    start: u64,
    end: u64,
    cur: usize,
    keys: &mut Vec<BlockKey>,
) -> Result<usize, Error> {
    let item_end = |i: usize, f: &MmFeature| {
        f.offset
            .checked_add(f.length)
            .ok_or(Error::MmOutOfRange { index: i })
    };
    let Some(last) = features.last() else {
        return Ok(cur);
    };
    let last_end = item_end(features.len() - 1, last)?;
    let before = match form {
        ExtraKeyForm::K1 => last_end < start,
        ExtraKeyForm::K2 | ExtraKeyForm::K3 => last_end <= start,
    };
    if before {
        return Ok(cur);
    }
    let mut i = cur;
    while let Some(f) = features.get(i) {
        let f_end = item_end(i, f)?;
        if end <= f.offset {
            break;
        }
        let passed = match form {
            ExtraKeyForm::K1 => start > f_end,
            ExtraKeyForm::K2 | ExtraKeyForm::K3 => start >= f_end,
        };
        if passed {
            i += 1;
            continue;
        }
        let rel = i64::try_from(f.offset as i128 - start as i128)
            .map_err(|_| Error::MmOutOfRange { index: i })?;
        keys.push(BlockKey::Mm {
            index: i,
            offset: rel,
        });
        if end >= f_end {
            i += 1;
        } else {
            break;
        }
    }
    Ok(i)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(offset: u64, length: u64) -> MmFeature {
        MmFeature {
            identifier: format!("i{offset}"),
            offset,
            length,
        }
    }

    fn keyed(form: ExtraKeyForm, f: &[MmFeature], start: u64, end: u64) -> Vec<usize> {
        let mut keys = Vec::new();
        walk(f, form, start, end, 0, &mut keys).unwrap();
        keys.iter()
            .filter_map(|k| match k {
                BlockKey::Mm { index, .. } => Some(*index),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn k1_keys_an_item_ending_at_the_block_start() {
        // Item [0, 16), block [16, 32): K1 still keys it, K2/K3 do not.
        let f = [item(0, 16), item(40, 4)];
        assert_eq!(keyed(ExtraKeyForm::K1, &f, 16, 32), vec![0]);
        assert_eq!(keyed(ExtraKeyForm::K2, &f, 16, 32), Vec::<usize>::new());
        assert_eq!(keyed(ExtraKeyForm::K3, &f, 16, 32), Vec::<usize>::new());
        // Only item, ending at the block start: K1's early return is `<`, K2's `<=`.
        let g = [item(0, 16)];
        assert_eq!(keyed(ExtraKeyForm::K1, &g, 16, 32), vec![0]);
        assert_eq!(keyed(ExtraKeyForm::K2, &g, 16, 32), Vec::<usize>::new());
    }

    #[test]
    fn lookahead_rewinds_to_items_reaching_past_the_block() {
        // Block [0, 16), window [0, 18): item [16, 19) is keyed and the cursor stays on it.
        let f = [item(2, 3), item(16, 3)];
        let mut keys = Vec::new();
        let next = next_cursor(&f, ExtraKeyForm::K3, 0, 16, 18, 0, &mut keys).unwrap();
        assert_eq!(keys.len(), 2);
        assert_eq!(next, 1);
        // Without look-ahead the walk stops before item 1 and moves past item 0.
        keys.clear();
        let next = next_cursor(&f, ExtraKeyForm::K3, 0, 16, 16, 0, &mut keys).unwrap();
        assert_eq!((keys.len(), next), (1, 1));
    }
}
