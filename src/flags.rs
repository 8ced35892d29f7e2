//! Value parsers for clap: the range in which each numeric flag can work, so that a flag out of
//! range is one line naming the flag, the value and the range (exit code 2).

pub fn at_least_one(s: &str) -> Result<usize, String> {
    s.parse().map_err(|e| format!("{e}")).and_then(|n| if n >= 1 { Ok(n) } else { Err("must be at least 1".into()) })
}

pub fn float_where(s: &str, ok: fn(f64) -> bool, range: &str) -> Result<f64, String> {
    s.parse().map_err(|e| format!("{e}")).and_then(|x| if ok(x) { Ok(x) } else { Err(format!("must be {range}")) })
}

pub fn positive(s: &str) -> Result<f64, String> {
    float_where(s, |x| x > 0.0 && x.is_finite(), "finite and > 0")
}

pub fn kl_target(s: &str) -> Result<f64, String> {
    float_where(s, |x| x >= 0.0, ">= 0 (inf: never stop)")
}

pub fn finite(s: &str) -> Result<f64, String> {
    float_where(s, f64::is_finite, "finite")
}

pub fn unit_interval(s: &str) -> Result<f64, String> {
    float_where(s, |x| (0.0..=1.0).contains(&x), "in [0, 1]")
}

/// The largest `--seed`: env i is seeded with seed + i, which must fit in 64 bits for any number of envs.
pub const MAX_SEED: u64 = u64::MAX - (1 << 32);

pub fn seed(s: &str) -> Result<u64, String> {
    let seed: u64 = s.parse().map_err(|e| format!("{e}"))?;
    (seed <= MAX_SEED).then_some(seed).ok_or(format!("must be at most {MAX_SEED}: env i is seeded with seed + i"))
}

/// `--exp-name` names a directory inside runs/, so it is a plain name.
pub fn plain_name(s: &str) -> Result<String, String> {
    let plain = !s.is_empty() && !s.contains(['/', '\\']) && !s.contains("..");
    plain.then(|| s.to_string()).ok_or_else(|| "must be a plain name, without '/', '\\' or '..'".into())
}

/// `--env-kwargs`: a JSON object, `gymnasium.make`'s keyword arguments.
pub fn json_object(s: &str) -> Result<serde_json::Map<String, serde_json::Value>, String> {
    let kind = match serde_json::from_str(s) {
        Ok(serde_json::Value::Object(kwargs)) => return Ok(kwargs),
        Ok(serde_json::Value::Array(_)) => "a list",
        Ok(serde_json::Value::String(_)) => "a string",
        Ok(serde_json::Value::Null) => "null",
        Ok(_) => "a scalar",
        Err(e) => return Err(format!("not JSON ({e}); give an object, e.g. '{{\"continuous\": true}}'")),
    };
    Err(format!("{kind}, not a JSON object of gymnasium.make's keyword arguments, e.g. '{{\"continuous\": true}}'"))
}
