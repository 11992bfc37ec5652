//! Sets of node ids as bits, filled by many threads at once: the distinct columns a range of
//! edges reaches (a rank's halo, what it sends each other rank) in one parallel pass over the
//! edges, read back in id order. A set over `n` ids costs `n / 8` bytes (14 MB for
//! papers100M's 111 M nodes), where a per-node array of marks cost 4 bytes a node and a
//! serial pass.

use rayon::prelude::*;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Entries per task of the parallel passes over edges.
const EDGE_BLOCK: usize = 1 << 16;

/// Words per task of the passes over a set's words.
const WORD_BLOCK: usize = 1 << 12;

/// The set of ids `f` keeps of `cols` (`Some(id)`, `id < n`), as `n.div_ceil(64)` words:
/// bit `i % 64` of word `i / 64` is set when `i` is in the set. The same set whatever the
/// thread count.
pub(crate) fn mark(cols: &[u32], n: usize, f: impl Fn(u32) -> Option<usize> + Sync) -> Vec<u64> {
    let words: Vec<AtomicU64> = (0..n.div_ceil(64))
        .into_par_iter()
        .map(|_| AtomicU64::new(0))
        .collect();
    cols.par_chunks(EDGE_BLOCK).for_each(|c| {
        for &v in c {
            if let Some(i) = f(v) {
                let (w, b) = (&words[i / 64], 1u64 << (i % 64));
                // Most ids come back many times: a read first leaves the line shared.
                if w.load(Relaxed) & b == 0 {
                    w.fetch_or(b, Relaxed);
                }
            }
        }
    });
    words.into_par_iter().map(AtomicU64::into_inner).collect()
}

/// How many ids the set holds.
pub(crate) fn count(words: &[u64]) -> usize {
    words.par_iter().map(|w| w.count_ones() as usize).sum()
}

/// The ids of the set, ascending.
pub(crate) fn ones(words: &[u64]) -> Vec<u32> {
    words
        .par_chunks(WORD_BLOCK)
        .enumerate()
        .flat_map_iter(|(k, block)| {
            let base = k * WORD_BLOCK * 64;
            block.iter().enumerate().flat_map(move |(j, &w)| {
                let mut w = w;
                std::iter::from_fn(move || {
                    (w != 0).then(|| {
                        let b = w.trailing_zeros() as usize;
                        w &= w - 1;
                        (base + j * 64 + b) as u32
                    })
                })
            })
        })
        .collect()
}

/// Ids of the set before each word (`before[k]`: set bits in words `0..k`): with it, the
/// position of a member `i` among the members is [`rank`]`(words, before, i)`.
pub(crate) fn prefix_counts(words: &[u64]) -> Vec<u32> {
    let mut acc = 0u32;
    words
        .iter()
        .map(|w| {
            let at = acc;
            acc += w.count_ones();
            at
        })
        .collect()
}

/// Members of the set below `i` (for a member, its position in [`ones`]).
#[inline]
pub(crate) fn rank(words: &[u64], before: &[u32], i: usize) -> u32 {
    let below = words[i / 64] & ((1u64 << (i % 64)) - 1);
    before[i / 64] + below.count_ones()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_marks_reads_back_and_ranks_its_members() {
        let n = 200_000;
        let cols: Vec<u32> = (0..600_000u64)
            .map(|k| ((k * 2_654_435_761) % n as u64) as u32)
            .collect();
        let keep = |v: u32| (!v.is_multiple_of(3)).then_some(v as usize);
        let words = mark(&cols, n, keep);
        let mut want: Vec<u32> = cols
            .iter()
            .copied()
            .filter(|v| !v.is_multiple_of(3))
            .collect();
        want.sort_unstable();
        want.dedup();
        assert_eq!(ones(&words), want);
        assert_eq!(count(&words), want.len());
        let before = prefix_counts(&words);
        for (pos, &v) in want.iter().enumerate() {
            assert_eq!(rank(&words, &before, v as usize), pos as u32);
        }
        assert!(ones(&mark(&[], 10, keep)).is_empty());
        assert!(ones(&mark(&[], 0, keep)).is_empty());
    }
}
