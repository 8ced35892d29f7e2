fn main() {
    let t = tch::Tensor::from_slice(&[1.0f32, 2.0]);
    println!("{}", f64::try_from(t.sum(tch::Kind::Float)).unwrap());
}
