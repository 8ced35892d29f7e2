//! `envs::numpy` against numbers numpy 1.26.4 printed. The first vectors of each test come from a reference table of
//! numpy's outputs. The ones marked "numpy 1.26.4" were printed by the numpy call named beside them.

use envs::numpy::{Pcg64, RandomState, SeedSequence};

fn raw(seed: u64, n: usize) -> Vec<u64> {
    let mut g = Pcg64::new(seed);
    (0..n).map(|_| g.next_u64()).collect()
}

fn uniforms(seed: u64) -> Vec<u64> {
    let mut g = Pcg64::new(seed);
    (0..4).map(|_| g.uniform(-0.05, 0.05).to_bits()).collect()
}

fn bits(x: [f64; 4]) -> Vec<u64> {
    x.iter().map(|x| x.to_bits()).collect()
}

fn shuffled(seed: u32, n: usize) -> Vec<usize> {
    let mut x: Vec<usize> = (0..n).collect();
    RandomState::new(seed).shuffle(&mut x);
    x
}

/// `generate_state_u64` gives numpy's four words for seeds 1, 0 and 2^32 + 5. The last seed is two entropy words.
/// `generate_state_u32` gives numpy's three words for seeds 1 and 0.
#[test]
fn seed_sequence_generate_state() {
    let u64s = |seed| SeedSequence::new(seed).generate_state_u64(4);
    assert_eq!(u64s(1), [0x672d8ee56d6791ff, 0x8ae19ca14eb1072c, 0x4915796d1322fc4a, 0xd0cc2bdcaba049bd]);
    // numpy 1.26.4: SeedSequence(0).generate_state(4, np.uint64)
    assert_eq!(u64s(0), [0xdb2cd7e7b0f478be, 0xabf4641a2c71ba49, 0x20c6ed6d9d7b8d41, 0x2c4099de223c39d4]);
    // numpy 1.26.4: SeedSequence(2**32 + 5).generate_state(4, np.uint64), two entropy words [5, 1]
    assert_eq!(u64s((1 << 32) + 5), [0xf9c15bd6e249d9ac, 0xb2021b4036320ed7, 0x9388b47fe6dcf739, 0x5eeba8d9ad6439e1]);
    // numpy 1.26.4: SeedSequence(s).generate_state(3, np.uint32) for s = 1, 0
    assert_eq!(SeedSequence::new(1).generate_state_u32(3), [1835504127, 1731038949, 1320224556]);
    assert_eq!(SeedSequence::new(0).generate_state_u32(3), [2968811710, 3677149159, 745650761]);
}

/// `Pcg64`'s first three raw words are numpy's for seeds 1, 0 and 2^32 + 5. Numpy's are those of its PCG64 seeded by a
/// SeedSequence of the same seed.
#[test]
fn pcg64_random_raw() {
    assert_eq!(raw(1, 3), [0x8306bdf37922e4ff, 0xf35196bbc152a866, 0x24e7a4f608ec18cd]);
    // numpy 1.26.4: PCG64(SeedSequence(s)).random_raw(3) for s = 0, 2**32 + 5
    assert_eq!(raw(0, 3), [0xa30febcfd9c2825f, 0x4510bdf882d9d721, 0x0a7d3da94ecde8b8]);
    assert_eq!(raw((1 << 32) + 5, 3), [0xc6323ec321deb8d1, 0x78814821c73a0583, 0xb22536d8e0ec17c0]);
}

/// Four uniform draws in [-0.05, 0.05], CartPole's start state, are numpy's Generator's bit for bit. This holds for
/// seeds 1, 0 and 2^32 + 5.
#[test]
fn cartpole_start_uniforms() {
    let seed1 = [0.0011821624700256717, 0.045046369632593536, -0.03558403872803663, 0.04486494471372439];
    assert_eq!(uniforms(1), bits(seed1));
    // numpy 1.26.4: Generator(PCG64(SeedSequence(s))).uniform(-0.05, 0.05, 4) for s = 0, 2**32 + 5
    let seed0 = [0.013696168732145436, -0.02302132862361297, -0.045902647606380534, -0.04834723644714709];
    assert_eq!(uniforms(0), bits(seed0));
    let seed_wide = [0.027420418037388122, -0.00292773168119069, 0.01958803443421149, 0.03165376458429718];
    assert_eq!(uniforms((1 << 32) + 5), bits(seed_wide));
}

/// `Pcg64::integers` gives numpy's integer draws from seed 3. Ten draws in [1, 31) are numpy's ten. A `next_double`
/// between draws is numpy's and leaves the buffered half word to the next draw. A range of one value draws nothing.
/// Draws below 3e9 and below 2^32 are numpy's, rejections included. Draws in a wide 64-bit range and in the full i64
/// range are numpy's too.
#[test]
fn pcg64_integers() {
    // numpy 1.26.4: Generator(PCG64(3)).integers(1, 31, 10), the same as ten scalar integers(1, 31) calls
    let mut g = Pcg64::new(3);
    let draws: Vec<i64> = (0..10).map(|_| g.integers(1, 31)).collect();
    assert_eq!(draws, [25, 3, 6, 8, 6, 25, 27, 18, 2, 3]);

    // numpy 1.26.4: integers(1, 31); random(); integers(1, 31) twice. random() leaves the buffered half.
    let mut g = Pcg64::new(3);
    assert_eq!(g.integers(1, 31), 25);
    assert_eq!(g.next_double().to_bits(), 0.2368105065960997f64.to_bits());
    assert_eq!([g.integers(1, 31), g.integers(1, 31)], [3, 6]);

    // numpy 1.26.4: integers(5, 6) draws nothing; the integers(1, 31) after it is the stream's first
    let mut g = Pcg64::new(3);
    assert_eq!([g.integers(5, 6), g.integers(1, 31)], [5, 25]);

    let draws = |low, high, n| {
        let mut g = Pcg64::new(3);
        (0..n).map(|_| g.integers(low, high)).collect::<Vec<i64>>()
    };
    // numpy 1.26.4: Generator(PCG64(3)).integers(0, 3_000_000_000, 6), where Lemire rejects 30% of next32s
    assert_eq!(draws(0, 3_000_000_000, 6), [2434513622, 256947500, 538322202, 710431519, 544094361, 2403823395]);
    // numpy 1.26.4: Generator(PCG64(3)).integers(0, 2**32, 3), the raw next32s
    assert_eq!(draws(0, 1 << 32, 3), [3485385464, 367860371, 770692085]);
    // numpy 1.26.4: Generator(PCG64(3)).integers(-2**62, 2**62 + 2**61, 6), 64-bit Lemire rejecting 25%
    let wide = [
        4626379601860670369,
        2100185287015777398,
        -3526456660043380376,
        381927617804564900,
        -2770021720350934604,
        -3301136856032548705,
    ];
    assert_eq!(draws(-(1 << 62), (1 << 62) + (1 << 61), 6), wide);
    // numpy 1.26.4: Generator(PCG64(3)).integers(-2**63, 2**63 - 1, 2)
    assert_eq!(draws(i64::MIN, i64::MAX, 2), [-7643423770429963529, -4854989227711015948]);
}

/// The first three 32-bit words of `RandomState` seeded with 1 are numpy's.
#[test]
fn random_state_raw_words() {
    let mut r = RandomState::new(1);
    assert_eq!([r.next_u32(), r.next_u32(), r.next_u32()], [0x6ac1f425, 0xff4780eb, 0xb8672f8c]);
}

/// `RandomState`'s shuffle orders 0..n as numpy's shuffle does after seeding with the same seed. It is checked on 8
/// values and the first 8 of 512 with seed 1. It is also checked on 7 values with seeds 1 and 0, on 10 with seed
/// u32::MAX, and on one value.
#[test]
fn random_state_shuffle() {
    assert_eq!(shuffled(1, 8), [7, 2, 1, 6, 0, 4, 3, 5]);
    assert_eq!(shuffled(1, 512)[..8], [47, 345, 284, 221, 503, 168, 223, 189]);
    // numpy 1.26.4: np.random.seed(s); a = np.arange(n); np.random.shuffle(a)
    assert_eq!(shuffled(1, 7), [6, 2, 1, 0, 4, 3, 5]);
    assert_eq!(shuffled(0, 7), [6, 2, 1, 3, 0, 5, 4]);
    assert_eq!(shuffled(u32::MAX, 10), [6, 9, 5, 1, 8, 0, 7, 4, 2, 3]);
    assert_eq!(shuffled(1, 1), [0]);
}
