//! Tensors between the host and the device: read down in one copy (on a GPU, one wait), observations up.

use tch::{kind::Element, Device, Kind, Tensor};

/// A float tensor's values on the host, in one copy (on a GPU, one wait for it).
pub fn to_host(t: &Tensor) -> Vec<f32> {
    copy_down(t)
}

/// Scalar tensors of one device, read to the host in one copy (one wait for a GPU), as f64.
pub fn read_host(ts: &[&Tensor]) -> Vec<f64> {
    if ts.is_empty() {
        return Vec::new();
    }
    copy_down(&Tensor::cat(&ts.iter().map(|t| t.to_kind(Kind::Double).reshape([-1])).collect::<Vec<_>>(), 0))
}

/// A tensor of `T`'s kind, every value of it, in one copy to the host.
fn copy_down<T: Element + Default + Clone>(t: &Tensor) -> Vec<T> {
    let numel = t.numel();
    let mut host = vec![T::default(); numel];
    t.to_device(Device::Cpu).copy_data(&mut host, numel);
    host
}

/// Observations from the host to `device`, `dim` values a row. On a GPU, `pixels` (whole numbers 0 to
/// 255 held as f32) go up as bytes, 4 times fewer, and become f32 there: the same values.
pub fn upload(obs: &[f32], dim: i64, pixels: bool, device: Device) -> Tensor {
    if pixels && device != Device::Cpu {
        let bytes: Vec<u8> = obs.iter().map(|&x| x as u8).collect();
        Tensor::from_slice(&bytes).view([-1, dim]).to_device(device).to_kind(Kind::Float)
    } else {
        Tensor::from_slice(obs).view([-1, dim]).to_device(device)
    }
}
