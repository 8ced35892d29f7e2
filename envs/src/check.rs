//! `check_env`: an env of your own against the contract every binary relies on (gymnasium's and SB3's
//! `check_env`), so that a broken env gets one clear error before a run, not a panic in a tensor op later.

use crate::{Action, Env, EnvError, Space};

/// Checks `env` as the binaries use it: its spaces are ones they can read (a non-empty observation box with
/// bounds in order, actions `Discrete`, `MultiDiscrete` or a box), `reset(seed)` writes finite observations within
/// the observation box and gives the same ones for the same seed (seeding is what makes a run repeatable), and
/// `steps` steps of valid actions (the first of each space, then cycling through it) give finite observations
/// within the box and finite rewards, with a reset after each episode's end. The error names what broke, at
/// which step. The env is left reset with seed 0.
pub fn check_env(env: &mut dyn Env<Obs = f32>, steps: usize) -> Result<(), EnvError> {
    let err = |msg: String| Err(EnvError(format!("your env breaks the Env contract: {msg} (docs/your-env.md)")));
    let (low, high) = match env.observation_space() {
        Space::Box { shape, low, high } if shape.iter().product::<usize>() > 0 && low.len() == high.len() => {
            if let Some(i) = (0..low.len()).find(|&i| !(low[i] <= high[i])) {
                return err(format!("its observation box has low {} above high {} at {i}", low[i], high[i]));
            }
            (low, high)
        }
        other => return err(format!("its observation space is {other}; a binary reads a non-empty Box")),
    };
    let action_space = env.action_space();
    let empty = match &action_space {
        Space::Discrete(n) => *n == 0,
        Space::MultiDiscrete(nvec) => nvec.is_empty() || nvec.contains(&0),
        Space::Box { low, .. } => low.is_empty(),
    };
    if empty {
        return err(format!("its action space {action_space} has no actions"));
    }
    let mut obs = vec![0f32; low.len()];
    let check_obs = |obs: &[f32], when: &str| match obs
        .iter()
        .enumerate()
        .find(|(i, x)| !x.is_finite() || **x < low[*i] || **x > high[*i])
    {
        Some((i, x)) => err(format!("{when}, observation[{i}] is {x}, outside [{}, {}]", low[i], high[i])),
        None => Ok(()),
    };
    env.reset(Some(0), &mut obs);
    check_obs(&obs, "after reset(Some(0))")?;
    let first = obs.clone();
    env.reset(Some(0), &mut obs);
    if obs != first {
        return err(format!("reset(Some(0)) twice gave {first:?}, then {obs:?}: a seed must fix the start"));
    }
    for t in 0..steps {
        let (discrete, continuous) = valid_action(&action_space, t);
        let action = match &action_space {
            Space::Box { .. } => Action::Continuous(&continuous),
            _ => Action::Discrete(&discrete),
        };
        let step = env.step(action, &mut obs);
        if !step.reward.is_finite() {
            return err(format!("step {t} returned the reward {}", step.reward));
        }
        check_obs(&obs, &format!("after step {t}"))?;
        if step.terminated || step.truncated {
            env.reset(None, &mut obs);
            check_obs(&obs, &format!("after the reset that followed step {t}"))?;
        }
    }
    env.reset(Some(0), &mut obs);
    Ok(())
}

/// A valid action of `space` for step `t`: component `i` cycles through its values; a box's values cycle through
/// low, the middle and high (0 where a bound is infinite).
fn valid_action(space: &Space, t: usize) -> (Vec<i64>, Vec<f32>) {
    match space {
        Space::Discrete(n) => (vec![(t % n) as i64], Vec::new()),
        Space::MultiDiscrete(nvec) => (nvec.iter().map(|n| ((t + 1) % n) as i64).collect(), Vec::new()),
        Space::Box { low, high, .. } => {
            let pick = |(l, h): (&f32, &f32)| match (l.is_finite() && h.is_finite(), t % 3) {
                (false, _) => 0.0,
                (true, 0) => *l,
                (true, 1) => (l + h) / 2.0,
                (true, _) => *h,
            };
            (Vec::new(), low.iter().zip(high).map(pick).collect())
        }
    }
}
