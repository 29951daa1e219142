//! Seeded index primitives shared by the minibatch order, the splits and the held-out
//! draws: Lemire's unbiased bounded integers, 53-bit uniforms, the Fisher–Yates shuffle
//! and a keyed Feistel permutation of `0..n` with cycle walking. They draw only from the
//! given xoshiro generator, so every consumer is reproducible across versions of `rand`.

use rand::Rng as _;

use dgp_core::rng::Rng;

/// Uniform integer in `0..n` (`n ≥ 1`), Lemire's multiply-and-reject method (unbiased).
pub(crate) fn uniform_below(rng: &mut Rng, n: usize) -> usize {
    debug_assert!(n > 0);
    let n = n as u64;
    let threshold = n.wrapping_neg() % n;
    loop {
        let m = (rng.next_u64() as u128) * (n as u128);
        if (m as u64) >= threshold {
            return (m >> 64) as usize;
        }
    }
}

/// Uniform `f64` in `[0, 1)` with 53 random bits.
pub(crate) fn uniform01(rng: &mut Rng) -> f64 {
    (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// In-place Fisher–Yates shuffle.
pub(crate) fn shuffle(rng: &mut Rng, v: &mut [usize]) {
    for i in (1..v.len()).rev() {
        let j = uniform_below(rng, i + 1);
        v.swap(i, j);
    }
}

/// A uniformly random permutation of `0..n`.
pub fn permutation(n: usize, rng: &mut Rng) -> Vec<usize> {
    let mut v: Vec<usize> = (0..n).collect();
    shuffle(rng, &mut v);
    v
}

/// Rounds of the Feistel network of the table-free order of [`crate::Minibatches`].
pub const FEISTEL_ROUNDS: usize = 6;

/// SplitMix64's finaliser: the Feistel round function.
fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A keyed permutation of `0..n`: a balanced Feistel network on `2h` bits with cycle
/// walking (every value `≥ n` is mapped again until it falls in `0..n`).
#[derive(Clone, Debug)]
pub(crate) struct Feistel {
    half_bits: u32,
    mask: u64,
    keys: [u64; FEISTEL_ROUNDS],
}

impl Feistel {
    pub(crate) fn new(n: usize, rng: &mut Rng) -> Self {
        let bits = (usize::BITS - (n.max(2) - 1).leading_zeros()).max(2);
        let half_bits = bits.div_ceil(2);
        let mut keys = [0u64; FEISTEL_ROUNDS];
        for k in &mut keys {
            *k = rng.next_u64();
        }
        Self {
            half_bits,
            mask: (1u64 << half_bits) - 1,
            keys,
        }
    }

    /// One application of the network on `0..2^(2h)`.
    fn apply(&self, x: u64) -> u64 {
        let (mut l, mut r) = (x >> self.half_bits, x & self.mask);
        for &k in &self.keys {
            let t = l ^ (mix64(r ^ k) & self.mask);
            l = r;
            r = t;
        }
        (l << self.half_bits) | r
    }

    /// Position `k` (< n) of the epoch's permutation of `0..n`.
    pub(crate) fn index(&self, k: usize, n: usize) -> usize {
        let mut x = k as u64;
        loop {
            x = self.apply(x);
            if x < n as u64 {
                return x as usize;
            }
        }
    }
}
