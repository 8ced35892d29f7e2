/// Observation and action spaces, as gymnasium's `spaces` describe them.
#[derive(Debug, Clone, PartialEq)]
pub enum Space {
    /// One integer action in `0..n`.
    Discrete(usize),
    /// One integer per component, component `i` in `0..nvec[i]`.
    MultiDiscrete(Vec<usize>),
    /// A box of f32 values with per-element bounds (row-major, `shape.iter().product()` long).
    Box { shape: Vec<usize>, low: Vec<f32>, high: Vec<f32> },
}

impl Space {
    /// A box with the given per-element bounds (a 1-D shape).
    pub fn bounded_box(low: Vec<f32>, high: Vec<f32>) -> Space {
        assert_eq!(low.len(), high.len(), "box bounds must have the same length");
        Space::Box { shape: vec![low.len()], low, high }
    }

    /// Number of values in one flat sample: 1 for Discrete, one per component otherwise.
    pub fn flat_dim(&self) -> usize {
        match self {
            Space::Discrete(_) => 1,
            Space::MultiDiscrete(nvec) => nvec.len(),
            Space::Box { shape, .. } => shape.iter().product(),
        }
    }
}
