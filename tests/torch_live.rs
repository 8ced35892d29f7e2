//! The exact pieces against the torch they copy, live: torch 2.11.0 in the set-up's Python runs the same
//! computation on the same inputs, on this machine, and every value must be equal to the bit.

mod common;

use ppo_details::distributions::{Categorical, Normal};
use ppo_details::FlatAdam;
use std::path::Path;
use tch::{nn, Device, Kind, Tensor};

/// torch's global generator: one test seeds and draws from it at a time.
static GENERATOR: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Runs `script` in the set-up's Python with one torch thread; it reads `dir`/in.npz and writes `dir`/out.npz.
fn torch(script: &str, dir: &Path) -> Vec<(String, Tensor)> {
    let out = std::process::Command::new(".venv/bin/python")
        .args(["-c", &format!("import numpy as np, torch\ntorch.set_num_threads(1)\n{script}")])
        .arg(dir)
        .output()
        .expect("the set-up's Python starts");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    Tensor::read_npz(dir.join("out.npz")).expect("out.npz")
}

/// Panics unless `ours` has `theirs`'s tensor of each name, bit for bit.
fn assert_bits(ours: &[(&str, Tensor)], theirs: &[(String, Tensor)], what: &str) {
    for (name, t) in ours {
        let (_, their) = theirs.iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("torch wrote no {name}"));
        let bits = |t: &Tensor| -> Vec<u32> {
            Vec::<f32>::try_from(t.to_kind(Kind::Float).flatten(0, -1))
                .expect("floats")
                .iter()
                .map(|x| x.to_bits())
                .collect()
        };
        let (a, b) = (bits(t), bits(their));
        assert_eq!(a.len(), b.len(), "{what}: {name}'s size");
        let differ = a.iter().zip(&b).filter(|(x, y)| x != y).count();
        assert_eq!(differ, 0, "{what}: {differ} of {} values of {name} differ from torch's", a.len());
    }
}

const NORMAL: &str = r#"
import sys
from torch.distributions import Normal
d = dict(np.load(sys.argv[1] + "/in.npz"))
mean = torch.tensor(d["mean"], requires_grad=True)
logstd = torch.tensor(d["logstd"], requires_grad=True)
torch.manual_seed(11)
probs = Normal(mean, torch.exp(logstd.expand_as(mean)))
sample = probs.sample()
log_prob = probs.log_prob(torch.tensor(d["action"])).sum(1)
entropy = probs.entropy().sum(1)
(log_prob.mean() - entropy.mean() * 0.01).backward()
out = dict(sample=sample, log_prob=log_prob, entropy=entropy, mean_grad=mean.grad, logstd_grad=logstd.grad)
np.savez(sys.argv[1] + "/out.npz", **{k: v.detach().numpy() for k, v in out.items()})
"#;

/// `distributions::Normal` is `torch.distributions.Normal`: with a mean per row and a shared log std, as the
/// continuous binaries use it, the sample (same seed), the summed log-probs and entropies, and the gradients of a
/// loss made of both equal torch's, bit for bit. Shapes of 4 x 1 and 64 x 6: torch draws normals one by one below
/// 16 values and 16 at a time from there.
#[test]
fn normal_is_torchs_normal() {
    let _one_at_a_time = GENERATOR.lock().unwrap_or_else(|e| e.into_inner());
    for (rows, actions) in [(4, 1), (64, 6)] {
        let dir = tempfile::tempdir().expect("temp dir");
        tch::manual_seed(rows);
        let opts = (Kind::Float, Device::Cpu);
        let mean = Tensor::randn([rows, actions], opts).set_requires_grad(true);
        let logstd = (Tensor::randn([1, actions], opts) * 0.5).set_requires_grad(true);
        let action = Tensor::randn([rows, actions], opts);
        let inputs = [("mean", mean.detach()), ("logstd", logstd.detach()), ("action", action.shallow_clone())];
        Tensor::write_npz(&inputs, dir.path().join("in.npz")).expect("in.npz");
        tch::manual_seed(11);
        let probs = Normal::new(&mean, &logstd.expand_as(&mean).exp());
        let sample = probs.sample();
        let log_prob = probs.log_prob(&action).sum_dim_intlist(1, false, Kind::Float);
        let entropy = probs.entropy().sum_dim_intlist(1, false, Kind::Float);
        (log_prob.mean(Kind::Float) - entropy.mean(Kind::Float) * 0.01).backward();
        let ours = [
            ("sample", sample),
            ("log_prob", log_prob),
            ("entropy", entropy),
            ("mean_grad", mean.grad()),
            ("logstd_grad", logstd.grad()),
        ];
        assert_bits(&ours, &torch(NORMAL, dir.path()), &format!("{rows} x {actions}"));
    }
}

const ADAM: &str = r#"
import sys
d = dict(np.load(sys.argv[1] + "/in.npz"))
names = sorted({k.split(":")[1] for k in d if k.startswith("param:")}, key=int)
params = [torch.tensor(d["param:" + n], requires_grad=True) for n in names]
adam = torch.optim.Adam(params, lr=1.0, eps=1e-5)
norms = []
for t, lr in enumerate(d["lrs"]):
    for n, p in zip(names, params):
        p.grad = torch.tensor(d["grad:" + n][t])
    norms.append(torch.nn.utils.clip_grad_norm_(params, 0.5))
    adam.param_groups[0]["lr"] = float(lr)
    adam.step()
out = {"norms": torch.stack(norms), **{"param:" + n: p for n, p in zip(names, params)}}
np.savez(sys.argv[1] + "/out.npz", **{k: v.detach().numpy() for k, v in out.items()})
"#;

/// `FlatAdam` is `torch.optim.Adam` (eps 1e-5) after `nn.utils.clip_grad_norm_` (0.5), as every binary steps
/// them: 300 steps on CartPole's actor and critic with random gradients, some norms above 0.5 and some below, and
/// CleanRL's annealed learning rate. Each step's norm and the parameters after the last step equal torch's, bit for
/// bit.
#[test]
fn flat_adam_and_clipping_are_torchs() {
    let _one_at_a_time = GENERATOR.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().expect("temp dir");
    let steps = 300;
    tch::manual_seed(5);
    let vs = nn::VarStore::new(Device::Cpu);
    let dims: [&[i64]; 12] =
        [&[64, 4], &[64], &[64, 64], &[64], &[1, 64], &[1], &[64, 4], &[64], &[64, 64], &[64], &[2, 64], &[2]];
    let params: Vec<Tensor> =
        dims.iter().enumerate().map(|(i, d)| vs.root().randn(&i.to_string(), d, 0.0, 0.1)).collect();
    let opts = (Kind::Float, Device::Cpu);
    // gradients of a global norm about 0.1 at even steps and 9 at odd ones: clipped at odd steps only
    let scale: Vec<f32> = (0..steps).map(|t| if t % 2 == 0 { 1e-3 } else { 0.1 }).collect();
    let grads: Vec<Tensor> = dims
        .iter()
        .map(|d| {
            let per_step = Tensor::from_slice(&scale).view([[steps].as_slice(), &vec![1; d.len()]].concat().as_slice());
            Tensor::randn([&[steps], *d].concat(), opts) * per_step
        })
        .collect();
    let lrs: Vec<f64> = (0..steps).map(|t| 2.5e-4 * (1.0 - t as f64 / steps as f64)).collect();
    let mut inputs: Vec<(String, Tensor)> = Vec::new();
    for (i, (p, g)) in params.iter().zip(&grads).enumerate() {
        inputs.push((format!("param:{i}"), p.detach().copy()));
        inputs.push((format!("grad:{i}"), g.shallow_clone()));
    }
    inputs.push(("lrs".into(), Tensor::from_slice(&lrs)));
    Tensor::write_npz(&inputs, dir.path().join("in.npz")).expect("in.npz");
    let mut adam = FlatAdam::new(&vs, 1e-5);
    let mut norms = Vec::new();
    for (t, &lr) in lrs.iter().enumerate() {
        tch::no_grad(|| {
            for (p, g) in params.iter().zip(&grads) {
                let _ = p.grad().copy_(&g.get(t as i64));
            }
        });
        norms.push(adam.clip_grad_norm(0.5));
        adam.step(lr);
    }
    let mut ours: Vec<(String, Tensor)> = vec![("norms".into(), Tensor::stack(&norms, 0))];
    ours.extend(params.iter().enumerate().map(|(i, p)| (format!("param:{i}"), p.detach())));
    let ours: Vec<(&str, Tensor)> = ours.iter().map(|(n, t)| (n.as_str(), t.shallow_clone())).collect();
    assert_bits(&ours, &torch(ADAM, dir.path()), "300 steps");
}

const CATEGORICAL: &str = r#"
import sys
from torch.distributions import Categorical
d = dict(np.load(sys.argv[1] + "/in.npz"))
logits = torch.tensor(d["logits"], requires_grad=True)
probs = Categorical(logits=logits)  # as in the update: the log-prob, then the entropy, then the gradient
log_prob = probs.log_prob(torch.tensor(d["action"]))
entropy = probs.entropy()
(log_prob.mean() - entropy.mean() * 0.01).backward()
with torch.no_grad():  # as in the rollout
    rollout = Categorical(logits=logits)
    torch.manual_seed(11)
    sample = rollout.sample()
out = dict(logits=probs.logits, log_prob=log_prob, entropy=entropy, grad=logits.grad, rollout_logits=rollout.logits,
           probs=rollout.probs, sample=sample)
np.savez(sys.argv[1] + "/out.npz", **{k: v.detach().numpy() for k, v in out.items()})
"#;

/// `distributions::Categorical` is `torch.distributions.Categorical(logits=...)`. As the update uses it: the
/// normalized logits, the log-probs of given actions, the entropies, and the gradient of a loss made of both. As
/// the rollout uses it, outside autograd: the normalized logits, the probabilities and the actions drawn from one
/// seed. All equal torch's, bit for bit, for 2 and 18 actions: 4096 rows, and a step's 4 and 8 rows.
#[test]
fn categorical_is_torchs_categorical() {
    let _one_at_a_time = GENERATOR.lock().unwrap_or_else(|e| e.into_inner());
    for (rows, actions) in [(4096, 2), (4096, 18), (4, 2), (8, 18)] {
        let dir = tempfile::tempdir().expect("temp dir");
        tch::manual_seed(actions);
        let logits = (Tensor::randn([rows, actions], (Kind::Float, Device::Cpu)) * 2.0).set_requires_grad(true);
        let action = Tensor::randint(actions, [rows], (Kind::Int64, Device::Cpu));
        Tensor::write_npz(&[("logits", &logits), ("action", &action)], dir.path().join("in.npz")).expect("in.npz");
        let probs = Categorical::new(&logits);
        let (log_prob, entropy) = (probs.log_prob(&action), probs.entropy());
        (log_prob.mean(Kind::Float) - entropy.mean(Kind::Float) * 0.01).backward();
        let rollout = tch::no_grad(|| Categorical::new(&logits.detach())); // a rollout's logits need no graph
        tch::manual_seed(11);
        let sample = rollout.sample();
        let ours = [
            ("logits", probs.logits.detach()),
            ("log_prob", log_prob.detach()),
            ("entropy", entropy.detach()),
            ("grad", logits.grad()),
            ("rollout_logits", rollout.logits.shallow_clone()),
            ("probs", rollout.probs().shallow_clone()),
            ("sample", sample),
        ];
        assert_bits(&ours, &torch(CATEGORICAL, dir.path()), &format!("{rows} rows of {actions} actions"));
    }
}

/// The networks CleanRL's scripts build, layer by layer in the order they make them: each `nn.Linear` or
/// `nn.Conv2d` draws its default init, then `orthogonal_` with the layer's gain draws again; biases are zeros.
const INIT: &str = r#"
import math, sys
from torch import nn
seed, variant = int(sys.argv[2]), sys.argv[3]
def init(layer, gain):
    nn.init.orthogonal_(layer.weight, gain)
    nn.init.zeros_(layer.bias)
    return layer
def mlp(name, inputs, outputs, gain):  # 64-64 tanh; tanh at 1 and 3
    sizes = [(inputs, 64, math.sqrt(2)), (64, 64, math.sqrt(2)), (64, outputs, gain)]
    return {f"{name}.{2 * k}": init(nn.Linear(i, o), g) for k, (i, o, g) in enumerate(sizes)}
torch.manual_seed(seed)
if variant == "ppo":
    layers = {**mlp("critic", 4, 1, 1.0), **mlp("actor", 4, 2, 0.01)}
elif variant == "ppo_continuous":
    layers = {**mlp("critic", 3, 1, 1.0), **mlp("actor_mean", 3, 1, 0.01)}
else:
    g = math.sqrt(2)
    layers = {"network.0": init(nn.Conv2d(4, 32, 8, stride=4), g), "network.2": init(nn.Conv2d(32, 64, 4, stride=2), g),
              "network.4": init(nn.Conv2d(64, 64, 3, stride=1), g), "network.7": init(nn.Linear(3136, 512), g),
              "actor": init(nn.Linear(512, 4), 0.01), "critic": init(nn.Linear(512, 1), 1.0)}
out = {f"init.{name}.{p}": getattr(layer, p) for name, layer in layers.items() for p in ("weight", "bias")}
np.savez(sys.argv[1] + "/out.npz", **{k: v.detach().numpy() for k, v in out.items()})
"#;

/// The initial weights of `ppo` on CartPole-v1, `ppo_continuous` on Pendulum-v1 and `ppo_atari` on Breakout are the
/// ones CleanRL's script draws from the same seed: seed 7 (and 1 for `ppo`), read from the run's first update
/// (`PPO_TRACE`) and compared with torch's `nn.Linear`, `nn.Conv2d` and `orthogonal_`, bit for bit.
#[test]
fn each_binarys_initial_weights_are_torchs() {
    let _one_at_a_time = GENERATOR.lock().unwrap_or_else(|e| e.into_inner());
    for (variant, steps, env) in [
        ("ppo", "512", "CartPole-v1"),
        ("ppo_continuous", "2048", "Pendulum-v1"),
        ("ppo_atari", "1024", "BreakoutNoFrameskip-v4"),
    ] {
        for seed in if variant == "ppo" { &["1", "7"][..] } else { &["7"] } {
            let dir = tempfile::tempdir().expect("temp dir");
            let trace = dir.path().join("trace.safetensors");
            let trace_var = trace.to_str().expect("a UTF-8 path");
            let args = ["--seed", seed, "--env-id", env, "--total-timesteps", steps, "--torch-threads", "1"];
            common::run_with_env(&common::bin(variant), &args, &[("PPO_TRACE", trace_var)]).assert_ok();
            let ours = Tensor::read_safetensors(&trace).expect("the trace");
            let script = INIT.replace("int(sys.argv[2]), sys.argv[3]", &format!("{seed}, {variant:?}"));
            let theirs = torch(&script, dir.path());
            let ours: Vec<(&str, Tensor)> = ours
                .iter()
                .filter(|(n, _)| n.starts_with("init.") && theirs.iter().any(|(m, _)| m == n))
                .map(|(n, t)| (n.as_str(), t.shallow_clone()))
                .collect();
            assert_eq!(ours.len(), theirs.len(), "{variant}: the trace lacks some of torch's layers");
            assert_bits(&ours, &theirs, &format!("{variant}, seed {seed}"));
        }
    }
}
