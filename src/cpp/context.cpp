// libtorch's global context, for what tch does not wrap: cuDNN's deterministic algorithms (what
// `torch.backends.cudnn.deterministic = True` sets in CleanRL) and the settings read back in tests;
// the CPU generator's state (torch.get_rng_state / torch.set_rng_state), to hand a random stream on.
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <ATen/Functions.h>
#include <cstring>
#include <mutex>

extern "C" {
void ppo_set_cudnn_deterministic(bool on) { at::globalContext().setDeterministicCuDNN(on); }
bool ppo_cudnn_deterministic() { return at::globalContext().deterministicCuDNN(); }
bool ppo_cudnn_benchmark() { return at::globalContext().benchmarkCuDNN(); }
bool ppo_cudnn_allow_tf32() { return at::globalContext().allowTF32CuDNN(); }
bool ppo_cublas_allow_tf32() { return at::globalContext().allowTF32CuBLAS(); }

// The CPU generator's state into `out` when it holds `cap` bytes; its size in bytes, always.
size_t ppo_cpu_rng_state(uint8_t *out, size_t cap) {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  at::Tensor state = gen.get_state();
  size_t n = state.numel();
  if (n <= cap) std::memcpy(out, state.data_ptr<uint8_t>(), n);
  return n;
}
// The CPU generator's state set from `n` bytes that ppo_cpu_rng_state wrote.
void ppo_set_cpu_rng_state(const uint8_t *in, size_t n) {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  at::Tensor state = at::empty({(int64_t)n}, at::kByte);
  std::memcpy(state.data_ptr<uint8_t>(), in, n);
  gen.set_state(state);
}
}
