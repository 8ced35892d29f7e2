// libtorch's global context, for what tch does not wrap: cuDNN's deterministic algorithms (what
// `torch.backends.cudnn.deterministic = True` sets in CleanRL) and the settings read back in tests.
#include <ATen/Context.h>

extern "C" {
void ppo_set_cudnn_deterministic(bool on) { at::globalContext().setDeterministicCuDNN(on); }
bool ppo_cudnn_deterministic() { return at::globalContext().deterministicCuDNN(); }
bool ppo_cudnn_benchmark() { return at::globalContext().benchmarkCuDNN(); }
bool ppo_cudnn_allow_tf32() { return at::globalContext().allowTF32CuDNN(); }
bool ppo_cublas_allow_tf32() { return at::globalContext().allowTF32CuBLAS(); }
}
