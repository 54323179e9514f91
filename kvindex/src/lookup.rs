//! The engines' hit rules over one slot's cached blocks, as pure functions of a presence
//! oracle (`present(group, block)`): what the engine's own lookup returns for a request whose
//! block keys are known.
//!
//! vLLM (`KVCacheManager.get_computed_blocks` → coordinator → managers):
//! * a hit covers at most `prompt_tokens - 1` tokens (the last prompt token is always
//!   computed, so its logits exist);
//! * full attention: the longest run of cached blocks from block 0;
//! * sliding window over `w` tokens with blocks of `b`: scanning from the last block the hit
//!   may reach down to block 0, the first run of `ceil((w - 1) / b)` cached blocks ends the
//!   hit there; with no such run, the cached blocks from block 0 are the hit;
//! * several groups (hybrid coordinator): full-attention groups first, each group's hit
//!   bounds the next group's lookup, repeated until the length stops shrinking (one round for
//!   one full-attention group plus one other group).
//!
//! SGLang (`RadixCache.match_prefix` under the scheduler's prefix limit): the longest prefix
//! of cached pages within `prompt_tokens - 1` tokens. TensorRT-LLM: the same rule over full
//! blocks (stated, not proven by a replay).

use crate::rule::{GroupKind, GroupSpec};

/// Tokens a hit may cover at most: every prompt token but the last.
pub fn max_hit_tokens(prompt_tokens: usize) -> usize {
    prompt_tokens.saturating_sub(1)
}

/// The longest run of present blocks from block 0, at most `max_blocks`.
pub fn prefix_hit(max_blocks: usize, mut present: impl FnMut(usize) -> bool) -> usize {
    (0..max_blocks).take_while(|&j| present(j)).count()
}

/// Blocks of vLLM's sliding-window hit (`SlidingWindowManager.find_longest_cache_hit`):
/// positions before the window's run count as computed (the engine fills them with its null
/// block).
pub fn sliding_window_hit(
    max_blocks: usize,
    window: u32,
    block_size: u32,
    mut present: impl FnMut(usize) -> bool,
) -> usize {
    let needed = (window.saturating_sub(1)).div_ceil(block_size.max(1)) as usize;
    let mut run = 0usize;
    for i in (0..max_blocks).rev() {
        if present(i) {
            run += 1;
            if run >= needed {
                return i + run;
            }
        } else {
            run = 0;
        }
    }
    run
}

/// Hit blocks of one group under `max_tokens`.
fn group_hit(
    g: &GroupSpec,
    gi: usize,
    max_tokens: usize,
    present: &mut impl FnMut(usize, usize) -> bool,
) -> usize {
    let bs = g.block_size.max(1) as usize;
    let max_blocks = max_tokens / bs;
    match g.kind {
        GroupKind::FullAttention => prefix_hit(max_blocks, |j| present(gi, j)),
        GroupKind::SlidingWindow { window } => {
            sliding_window_hit(max_blocks, window, g.block_size, |j| present(gi, j))
        }
    }
}

/// vLLM's coordinator: the cached tokens of a request of `prompt_tokens` tokens over the
/// model's KV-cache groups. `present(group, block)` says whether the slot holds the request's
/// block `block` of group `group` (on the GPU).
pub fn vllm_hit_tokens(
    groups: &[GroupSpec],
    prompt_tokens: usize,
    present: impl FnMut(usize, usize) -> bool,
) -> usize {
    vllm_hit_tokens_within(groups, max_hit_tokens(prompt_tokens), present)
}

/// [`vllm_hit_tokens`] for a hit of at most `max` tokens (vLLM's `max_cache_hit_length`:
/// `prompt_tokens - 1`, less under a deployment's look-ahead keys
/// (`HitRule::max_hit_tokens`), or less for a request the engine caps, e.g. 0.34's
/// `prompt_logprob_start`).
pub fn vllm_hit_tokens_within(
    groups: &[GroupSpec],
    max: usize,
    mut present: impl FnMut(usize, usize) -> bool,
) -> usize {
    if groups.len() == 1 {
        return group_hit(&groups[0], 0, max, &mut present) * groups[0].block_size as usize;
    }
    // Attention groups: identical specs share one manager, and a block counts only when
    // every group of the spec holds it. Full attention first.
    let mut specs: Vec<(GroupSpec, Vec<usize>)> = Vec::new();
    for (gi, g) in groups.iter().enumerate() {
        match specs.iter_mut().find(|(s, _)| s == g) {
            Some((_, ids)) => ids.push(gi),
            None => specs.push((*g, vec![gi])),
        }
    }
    specs.sort_by_key(|(s, _)| s.kind != GroupKind::FullAttention);
    let simple = specs.len() == 2 && specs[0].0.kind == GroupKind::FullAttention;
    let mut hit = max;
    loop {
        let mut curr = hit;
        for (spec, ids) in &specs {
            let mut all = |_: usize, j: usize| ids.iter().all(|&g| present(g, j));
            curr = group_hit(spec, 0, curr, &mut all) * spec.block_size as usize;
        }
        if curr >= hit {
            return hit;
        }
        hit = curr;
        if simple {
            return hit;
        }
    }
}

/// SGLang's radix lookup (and TensorRT-LLM's stated rule): the longest run of cached pages
/// from page 0 within `prompt_tokens - 1` tokens, in tokens.
pub fn page_prefix_hit_tokens(
    page_size: u32,
    prompt_tokens: usize,
    present: impl FnMut(usize) -> bool,
) -> usize {
    let ps = page_size.max(1) as usize;
    prefix_hit(max_hit_tokens(prompt_tokens) / ps, present) * ps
}

#[cfg(test)]
mod tests {
    use super::*;

    const FULL: GroupSpec = GroupSpec {
        kind: GroupKind::FullAttention,
        block_size: 16,
    };
    const SW64: GroupSpec = GroupSpec {
        kind: GroupKind::SlidingWindow { window: 64 },
        block_size: 16,
    };

    #[test]
    fn the_last_prompt_token_is_never_a_hit() {
        let all = |_: usize, _: usize| true;
        assert_eq!(vllm_hit_tokens(&[FULL], 32, all), 16);
        assert_eq!(vllm_hit_tokens(&[FULL], 33, all), 32);
        assert_eq!(vllm_hit_tokens(&[FULL], 1, all), 0);
        assert_eq!(vllm_hit_tokens(&[FULL], 0, all), 0);
        assert_eq!(page_prefix_hit_tokens(16, 16, |_| true), 0);
        assert_eq!(page_prefix_hit_tokens(16, 17, |_| true), 16);
    }

    #[test]
    fn a_sliding_window_hit_needs_the_window_run() {
        // ceil(63 / 16) = 4 blocks: blocks 11..=14 cached, 15 asked for at most.
        let held = [11usize, 12, 13, 14];
        assert_eq!(sliding_window_hit(15, 64, 16, |j| held.contains(&j)), 15);
        // A run of 3 is not enough; blocks from 0 count when there is no full run.
        assert_eq!(
            sliding_window_hit(15, 64, 16, |j| [12, 13, 14].contains(&j)),
            0
        );
        assert_eq!(sliding_window_hit(15, 64, 16, |j| j < 2), 2);
        // Hybrid: full attention bounds the window's search (simple hybrid, one round).
        let hyb = vllm_hit_tokens(&[FULL, SW64], 299, |g, j| {
            if g == 0 {
                j < 17
            } else {
                (12..16).contains(&j)
            }
        });
        assert_eq!(hyb, 256);
    }
}
