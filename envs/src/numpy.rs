//! numpy's random generators, bit for bit (numpy 1.26).
//!
//! Gymnasium seeds each env with `Generator(PCG64(SeedSequence(seed)))` ([`Pcg64`]). CleanRL's `ppo.py` shuffles
//! its minibatch indices with the legacy `np.random` stream, MT19937 seeded by `np.random.seed` ([`RandomState`]).
//! `tests/numpy.rs` checks every generator against numbers numpy 1.26.4 printed.

use rand::RngCore;
use rand_mt::Mt19937GenRand32;

const INIT_A: u32 = 0x43b0_d7e5;
const MULT_A: u32 = 0x931e_8875;
const INIT_B: u32 = 0x8b51_f9dd;
const MULT_B: u32 = 0x58f3_8ded;
const MIX_MULT_L: u32 = 0xca01_f9dd;
const MIX_MULT_R: u32 = 0x4973_f715;
const POOL_SIZE: usize = 4;

/// numpy's `SeedSequence(seed)` for an integer seed, with no spawn key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeedSequence {
    pool: [u32; POOL_SIZE],
}

impl SeedSequence {
    /// Mixes the seed's 32-bit words, lowest first, into the pool. Seed 0 is the one word `[0]`, as in numpy.
    pub fn new(seed: u64) -> Self {
        let (lo, hi) = (seed as u32, (seed >> 32) as u32);
        let entropy: &[u32] = if hi == 0 { &[lo] } else { &[lo, hi] };
        let mut h = INIT_A;
        let mut hashmix = |value: u32| {
            let mut value = value ^ h;
            h = h.wrapping_mul(MULT_A);
            value = value.wrapping_mul(h);
            value ^ (value >> 16)
        };
        let mix = |x: u32, y: u32| {
            let r = MIX_MULT_L.wrapping_mul(x).wrapping_sub(MIX_MULT_R.wrapping_mul(y));
            r ^ (r >> 16)
        };
        let mut pool = [0u32; POOL_SIZE];
        for (i, word) in pool.iter_mut().enumerate() {
            *word = hashmix(entropy.get(i).copied().unwrap_or(0));
        }
        for src in 0..POOL_SIZE {
            for dst in (0..POOL_SIZE).filter(|&dst| dst != src) {
                pool[dst] = mix(pool[dst], hashmix(pool[src]));
            }
        }
        // numpy mixes entropy words past the pool's four in here; a u64 seed has at most two.
        SeedSequence { pool }
    }

    /// numpy's `generate_state(n, np.uint32)`.
    pub fn generate_state_u32(&self, n: usize) -> Vec<u32> {
        let mut h = INIT_B;
        (0..n)
            .map(|i| {
                let mut value = self.pool[i % POOL_SIZE] ^ h;
                h = h.wrapping_mul(MULT_B);
                value = value.wrapping_mul(h);
                value ^ (value >> 16)
            })
            .collect()
    }

    /// numpy's `generate_state(n, np.uint64)`: each u64 is two consecutive words, the low word first.
    pub fn generate_state_u64(&self, n: usize) -> Vec<u64> {
        let words = self.generate_state_u32(2 * n);
        words.chunks_exact(2).map(|w| u64::from(w[0]) | u64::from(w[1]) << 32).collect()
    }
}

/// numpy's `Generator(PCG64(SeedSequence(seed)))`: PCG XSL-RR 128/64 with numpy's 32-bit buffering.
#[derive(Clone, Debug)]
pub struct Pcg64 {
    core: rand_pcg::Pcg64,
    /// The high half of the last next64 that `next_u32` split, numpy's `uinteger` while `has_uint32` is set.
    high_half: Option<u32>,
}

impl Pcg64 {
    /// numpy's `np.random.default_rng(seed)`, the generator Gymnasium's `reset(seed=seed)` makes.
    pub fn new(seed: u64) -> Self {
        let s = SeedSequence::new(seed).generate_state_u64(4);
        let initstate = u128::from(s[0]) << 64 | u128::from(s[1]);
        let initseq = u128::from(s[2]) << 64 | u128::from(s[3]);
        Pcg64 { core: rand_pcg::Pcg64::new(initstate, initseq), high_half: None }
    }

    /// numpy's `random_raw()`: one step, then the output of the new state. It leaves `next_u32`'s buffer alone.
    pub fn next_u64(&mut self) -> u64 {
        self.core.next_u64()
    }

    /// numpy's next32: the buffered high half if there is one; otherwise a fresh next64's low half.
    pub fn next_u32(&mut self) -> u32 {
        if let Some(high) = self.high_half.take() {
            return high;
        }
        let value = self.next_u64();
        self.high_half = Some((value >> 32) as u32);
        value as u32
    }

    /// numpy's `Generator.random()`: the top 53 bits of a next64, times 2^-53.
    pub fn next_double(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// numpy's `Generator.uniform(low, high)`: `low + (high - low) * random()`.
    pub fn uniform(&mut self, low: f64, high: f64) -> f64 {
        low + (high - low) * self.next_double()
    }

    /// numpy's `Generator.integers(low, high)` for int64, `high` excluded: `low` plus Lemire's bounded draw.
    /// A range of at most 2^32 values draws buffered next32s; a wider one draws next64s. A range of one value
    /// draws nothing.
    ///
    /// Panics if `low >= high`, where numpy raises ValueError.
    pub fn integers(&mut self, low: i64, high: i64) -> i64 {
        assert!(low < high, "Pcg64::integers: low ({low}) >= high ({high})");
        let max = (high as u64).wrapping_sub(low as u64) - 1;
        let draw = match u32::try_from(max) {
            Ok(0) => 0,
            Ok(u32::MAX) => u64::from(self.next_u32()),
            Ok(max) => u64::from(self.lemire32(max + 1)),
            Err(_) => self.lemire64(max + 1),
        };
        low.wrapping_add(draw as i64)
    }

    /// Lemire's multiply-and-reject method: a uniform value in `0..n` from next32s.
    fn lemire32(&mut self, n: u32) -> u32 {
        let threshold = n.wrapping_neg() % n;
        loop {
            let m = u64::from(self.next_u32()) * u64::from(n);
            if m as u32 >= threshold {
                return (m >> 32) as u32;
            }
        }
    }

    /// Lemire's multiply-and-reject method: a uniform value in `0..n` from next64s.
    fn lemire64(&mut self, n: u64) -> u64 {
        let threshold = n.wrapping_neg() % n;
        loop {
            let m = u128::from(self.next_u64()) * u128::from(n);
            if m as u64 >= threshold {
                return (m >> 64) as u64;
            }
        }
    }
}

/// numpy's legacy `np.random` stream: MT19937 as `np.random.seed(seed)` seeds it (Knuth's init_genrand).
#[derive(Clone, Debug)]
pub struct RandomState {
    mt: Mt19937GenRand32,
}

impl RandomState {
    /// numpy's `np.random.seed(seed)` (and `RandomState(seed)`) for an integer seed.
    pub fn new(seed: u32) -> Self {
        RandomState { mt: Mt19937GenRand32::new(seed) }
    }

    /// MT19937's next 32-bit word, numpy's `next_uint32`.
    pub fn next_u32(&mut self) -> u32 {
        self.mt.next_u32()
    }

    /// numpy's `random_interval(max)`: a uniform value in `0..=max` by masking words to the bits `max` needs and
    /// rejecting those above `max`. Zero draws nothing.
    pub fn random_interval(&mut self, max: u32) -> u32 {
        if max == 0 {
            return 0;
        }
        let mask = u32::MAX >> max.leading_zeros();
        loop {
            let value = self.next_u32() & mask;
            if value <= max {
                return value;
            }
        }
    }

    /// numpy's `np.random.shuffle` of a 1-D array: for i from n-1 down to 1, swap x[i] with x[random_interval(i)].
    ///
    /// Panics on more than 2^32 elements, where numpy would draw 64-bit words.
    pub fn shuffle<T>(&mut self, x: &mut [T]) {
        assert!(x.len() as u64 <= 1 << 32, "RandomState::shuffle: more than 2^32 elements");
        for i in (1..x.len()).rev() {
            let j = self.random_interval(i as u32) as usize;
            x.swap(i, j);
        }
    }
}
