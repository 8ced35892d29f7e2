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

    /// Number of entries in an action mask: one per logit (`n`, or the sum of `nvec`); none for a box.
    pub fn mask_dim(&self) -> usize {
        match self {
            Space::Discrete(n) => *n,
            Space::MultiDiscrete(nvec) => nvec.iter().sum(),
            Space::Box { .. } => 0,
        }
    }
}

/// A brief description for error messages: the kind and shape, and a box's bounds only when
/// every element has the same ones: `Discrete(2)`, `Box(17,) in [-inf, inf]`,
/// `Box(4, 84, 84) in [0.0, 255.0]`, `Box(4,)` (per-element bounds), `MultiDiscrete([100, 6, 4])`.
impl std::fmt::Display for Space {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Space::Discrete(n) => write!(f, "Discrete({n})"),
            Space::MultiDiscrete(nvec) => write!(f, "MultiDiscrete({})", brief_list(nvec)),
            Space::Box { shape, low, high } => {
                let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
                write!(f, "Box({}{})", dims.join(", "), if shape.len() == 1 { "," } else { "" })?;
                match (all_equal(low), all_equal(high)) {
                    (Some(lo), Some(hi)) => write!(f, " in [{lo:?}, {hi:?}]"),
                    _ => Ok(()),
                }
            }
        }
    }
}

/// The value every element has, if they all have the same one.
fn all_equal(v: &[f32]) -> Option<f32> {
    let first = *v.first()?;
    v.iter().all(|&x| x == first).then_some(first)
}

/// `[100, 6, 4]`; past 8 values the first 8 and the length, `[1, 2, 3, 4, 5, 6, 7, 8, ... 34 values]`.
fn brief_list(v: &[usize]) -> String {
    let shown: Vec<String> = v.iter().take(8).map(usize::to_string).collect();
    let more = if v.len() > 8 { format!(", ... {} values", v.len()) } else { String::new() };
    format!("[{}{more}]", shown.join(", "))
}

#[cfg(test)]
mod tests {
    use super::Space;

    #[test]
    fn display_is_kind_and_shape() {
        assert_eq!(Space::Discrete(2).to_string(), "Discrete(2)");
        assert_eq!(Space::MultiDiscrete(vec![100, 6, 4]).to_string(), "MultiDiscrete([100, 6, 4])");
        // MuJoCo's observations: 17 unbounded values, once
        assert_eq!(
            Space::bounded_box(vec![f32::NEG_INFINITY; 17], vec![f32::INFINITY; 17]).to_string(),
            "Box(17,) in [-inf, inf]"
        );
        assert_eq!(Space::bounded_box(vec![-2.0], vec![2.0]).to_string(), "Box(1,) in [-2.0, 2.0]");
        // CartPole's per-element bounds are left out
        let cartpole = Space::bounded_box(vec![-4.8, f32::MIN, -0.42, f32::MIN], vec![4.8, f32::MAX, 0.42, f32::MAX]);
        assert_eq!(cartpole.to_string(), "Box(4,)");
        let n = 4 * 84 * 84;
        let frames = Space::Box { shape: vec![4, 84, 84], low: vec![0.0; n], high: vec![255.0; n] };
        assert_eq!(frames.to_string(), "Box(4, 84, 84) in [0.0, 255.0]");
        assert_eq!(
            Space::bounded_box(vec![-f32::MAX; 3], vec![f32::MAX; 3]).to_string(),
            "Box(3,) in [-3.4028235e38, 3.4028235e38]"
        );
        assert_eq!(Space::Box { shape: vec![], low: vec![0.5], high: vec![1.0] }.to_string(), "Box() in [0.5, 1.0]");
    }

    #[test]
    fn long_multi_discrete_spaces_stay_short() {
        let rising: Vec<usize> = (1..=34).collect();
        assert_eq!(Space::MultiDiscrete(rising).to_string(), "MultiDiscrete([1, 2, 3, 4, 5, 6, 7, 8, ... 34 values])");
        let eight: Vec<usize> = (1..=8).collect();
        assert_eq!(Space::MultiDiscrete(eight).to_string(), "MultiDiscrete([1, 2, 3, 4, 5, 6, 7, 8])");
        assert_eq!(Space::MultiDiscrete(vec![]).to_string(), "MultiDiscrete([])");
    }
}
