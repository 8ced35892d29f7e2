//! The end of a run with `--save-model`: the saved weights, and eval.csv with the evaluation's episodes (CleanRL's
//! `cleanrl_utils/evals/ppo_eval.py`), played by [`play`].

use super::RunLog;
use crate::durable::{rename_durably, tmp_path};
use crate::exit::fail;
use envs::VecEnv;
use tch::{nn, Device, Tensor};

impl RunLog {
    /// Saves the weights as `<name>.safetensors` in the run directory: written to a temporary
    /// file, then renamed, so a crash never leaves a half-written model. Fails with exit code 1.
    /// With seeds, each seed's weights alone too, `<name>_seed<seed>.safetensors` (the seeds' first
    /// dimension taken away: the file of a one-seed network).
    pub fn save(&self, vs: &nn::VarStore, name: &str) -> std::path::PathBuf {
        let path = self.dir.join(format!("{name}.safetensors"));
        let tmp = tmp_path(&path);
        let saved = vs.save(&tmp).and_then(|()| Ok(rename_durably(&tmp, &path)?));
        saved.unwrap_or_else(|e| fail(1, format!("cannot save {}: {e}", path.display())));
        for (k, seed) in self.seeds.iter().enumerate() {
            let path = self.dir.join(format!("{name}_seed{}.safetensors", seed.seed));
            let (tmp, vars) = (tmp_path(&path), vs.variables());
            let named: Vec<(&String, Tensor)> =
                vars.iter().map(|(n, t)| (n, t.get(k as i64).to_device(Device::Cpu))).collect();
            let saved = Tensor::write_safetensors(&named, &tmp).map_err(std::io::Error::other);
            saved
                .and_then(|()| rename_durably(&tmp, &path))
                .unwrap_or_else(|e| fail(1, format!("cannot save {}: {e}", path.display())));
        }
        println!("model saved to {}", path.display());
        path
    }

    /// Writes eval.csv (one row per episode, CleanRL's tag) and the same to TensorBoard (CleanRL's
    /// `writer.add_scalar("eval/episodic_return", episodic_return, idx)`), and prints the mean.
    pub fn eval(&mut self, returns: &[f64]) {
        self.eval_each(&[returns.to_vec()]);
    }

    /// [`RunLog::eval`] of each seed (with seeds, [`RunLog::with_seeds`]): `returns[k]`, seed k's, in eval.csv with
    /// a column `seed` and in seed k's events.
    pub fn eval_each(&mut self, returns: &[Vec<f64>]) {
        let seeds: Vec<Option<u64>> = match &self.seeds[..] {
            [] => vec![None],
            seeds => seeds.iter().map(|seed| Some(seed.seed)).collect(),
        };
        let write = || -> std::io::Result<()> {
            let (path, tmp) = (self.dir.join("eval.csv"), tmp_path(&self.dir.join("eval.csv")));
            let mut w = csv::Writer::from_path(&tmp)?;
            let seed_column = (!self.seeds.is_empty()).then_some("seed");
            w.write_record(["episode", "eval/episodic_return"].into_iter().chain(seed_column))?;
            for (seed, returns) in seeds.iter().zip(returns) {
                for (i, r) in returns.iter().enumerate() {
                    w.write_record([i.to_string(), r.to_string()].into_iter().chain(seed.map(|s| s.to_string())))?;
                }
            }
            w.flush()?;
            drop(w);
            rename_durably(&tmp, &path)
        };
        write().unwrap_or_else(|e| fail(1, format!("cannot write eval.csv: {e}")));
        for (k, returns) in returns.iter().enumerate() {
            let tb = self.seeds.get_mut(k).map_or(&mut self.tb, |seed| &mut seed.tb);
            for (i, r) in returns.iter().enumerate() {
                let written = tb.write_scalar(i as i64, "eval/episodic_return", *r as f32);
                written.unwrap_or_else(|e| fail(1, format!("cannot write TensorBoard's events: {e}")));
            }
        }
        let all: Vec<f64> = returns.concat();
        let mean = all.iter().sum::<f64>() / all.len() as f64;
        match seeds.len() {
            1 if self.seeds.is_empty() => println!("eval: mean episodic return {mean:.1} over {} episodes", all.len()),
            n => println!("eval: mean episodic return {mean:.1} over {} episodes of {n} seeds", all.len()),
        }
    }
}

/// After CleanRL's evaluation loop for `--save-model` (`cleanrl_utils/evals/ppo_eval.py`): 10 episodes of `env`,
/// seeded here from `seed` (CleanRL's resets unseeded), `act` choosing and taking every action; their returns, for
/// eval.csv.
pub fn play<O>(env: Box<dyn envs::Env<Obs = O>>, seed: u64, mut act: impl FnMut(&mut VecEnv<O>)) -> Vec<f64>
where
    O: Copy + Default + Send + Sync + 'static,
{
    let mut env = VecEnv::new(vec![env]);
    env.reset(Some(seed));
    let mut returns = Vec::new();
    while returns.len() < 10 {
        act(&mut env);
        returns.extend(env.finished.iter().map(|ep| ep.r));
    }
    returns
}
