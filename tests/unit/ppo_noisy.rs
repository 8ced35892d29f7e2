//! ppo_noisy's unit test, kept out of the tutorial file: `src/bin/ppo_noisy.rs` includes it as its `tests`
//! module (`#[path]`), so it reaches the binary's private `Layer` and `Noise`. No black-box test can: the
//! noise acts inside one forward pass, and ratio == 1 holds whatever the noise is.

use super::*;

/// Each kind's weight noise ε_w (Noisy 1), read back through `forward`, for every layer shape the binary builds:
/// independent, one N(0, 1) per weight, magnitudes along a row uncorrelated, full rank; factorised, f(ε_out)
/// f(ε_in)ᵀ: variance E|z| = 2/π, magnitudes along a row correlated (about 0.46), rank one.
#[test]
fn each_layer_draws_its_kinds_noise() {
    tch::manual_seed(0);
    let opts = (Kind::Float, Device::Cpu);
    for (n, m) in [(4, 64), (6, 64), (2, 64), (64, 64), (64, 1), (64, 2), (64, 3)] {
        for kind in [Noise::Factorised, Noise::Independent] {
            let vs = nn::VarStore::new(Device::Cpu);
            let layer = Layer::new(vs.root(), n, m, 1.0, kind, &mut 0);
            let sigma_w = layer.sigma.as_ref().expect("a noisy layer").0.tr();
            // ε_wᵀ's rows for inputs 0..k under each noise row: [draws, k, m]
            let eps = |noise: &Tensor, k: i64| {
                let draws = noise.size()[0];
                let bias = layer.forward(&Tensor::zeros([draws, n], opts), noise).unsqueeze(1);
                let x = Tensor::eye(n, opts).narrow(0, 0, k).repeat([draws, 1]);
                let out = layer.forward(&x, &noise.repeat_interleave_self_int(k, 0, None)).view([draws, k, m]);
                tch::no_grad(|| (out - bias - layer.mu.ws.tr().narrow(0, 0, k)) / sigma_w.narrow(0, 0, k))
            };
            let values = |t: Tensor| Vec::<f64>::try_from(t.to_kind(Kind::Double).flatten(0, -1)).expect("numbers");
            let two = eps(&Tensor::randn([2000, layer.noise.end], opts), 2);
            let (a, b) = (values(two.select(1, 0).select(1, 0).abs()), values(two.select(1, 1).select(1, 0).abs()));
            let (variance, r) = (values(two.square().mean(Kind::Float).unsqueeze(0))[0], correlation(&a, &b));
            let singular = values(eps(&Tensor::randn([1, layer.noise.end], opts), n).get(0).svd(true, false).1);
            let (gap, at) = (singular.get(1).map_or(0.0, |s| s / singular[0]), format!("{kind:?} {n} x {m}"));
            if kind == Noise::Independent {
                assert!((variance - 1.0).abs() < 0.1, "{at}: variance {variance}");
                assert!(r.abs() < 0.1, "{at}: the magnitudes along a row correlate ({r})");
                assert!(m == 1 || gap > 0.05, "{at}: rank one ({gap})");
            } else {
                assert!((variance - 2.0 / std::f64::consts::PI).abs() < 0.07, "{at}: variance {variance}");
                assert!(r > 0.3, "{at}: the magnitudes along a row do not correlate ({r})");
                assert!(gap < 1e-4, "{at}: not rank one ({gap})");
            }
        }
    }
}

fn correlation(a: &[f64], b: &[f64]) -> f64 {
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let (ma, mb) = (mean(a), mean(b));
    let cov: f64 = a.iter().zip(b).map(|(x, y)| (x - ma) * (y - mb)).sum();
    let (va, vb): (f64, f64) = (a.iter().map(|x| (x - ma).powi(2)).sum(), b.iter().map(|y| (y - mb).powi(2)).sum());
    cov / (va * vb).sqrt()
}

/// Extra 1's rule on the hand-worked cases `tests/ppo_noisy.rs` holds every binary's reference to
/// (`the_rules_hand_worked_cases`): both directions, the band's edges, the bounds, a rate above the bound kept.
#[test]
fn the_reports_rule_on_hand_worked_cases() {
    let cases: [(f64, f64, f64); 8] = include!("adapt_lr_cases.rs");
    for (lr, kl, want) in cases {
        assert_eq!(adapt_lr(lr, kl, 0.01), want, "lr {lr}, KL {kl}");
    }
}
