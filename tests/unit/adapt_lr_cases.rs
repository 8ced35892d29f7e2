// Extra 1's TUM rule on hand-worked cases, (learning rate, KL, the rate after) with δ = 0.01, `include!`d by
// tests/ppo_noisy.rs (the reference every binary is held to) and tests/unit/ppo_noisy.rs (ppo_noisy's own rule).
[
    (1e-3, 0.001, 2e-3),
    (1e-3, 0.02, 5e-4),
    (1e-3, 0.01 / 1.5, 1e-3),
    (1e-3, 0.015, 1e-3),
    (8e-3, 0.0, 1e-2),
    (1.5e-5, 1.0, 1e-5),
    (0.05, 0.01, 0.05),
    (0.05, 0.02, 0.025),
]
