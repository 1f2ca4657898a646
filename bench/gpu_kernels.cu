// The workload bench/gpu runs bare and in a Berth container: a memory-bandwidth kernel (a
// float4 copy, counting bytes read and written) and a compute kernel (independent FMA chains,
// 2 FLOP each), timed with CUDA events after a warm-up. Built with the CUDA runtime linked
// statically, so the only driver piece it needs is libcuda.so.1, found by dlopen at run time:
// an image built from it carries no driver library at all.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#define CHECK(call)                                                                   \
  do {                                                                                \
    cudaError_t err_ = (call);                                                        \
    if (err_ != cudaSuccess) {                                                        \
      std::fprintf(stderr, "gpubench: %s: %s\n", #call, cudaGetErrorString(err_));    \
      std::exit(1);                                                                   \
    }                                                                                 \
  } while (0)

__global__ void copy_kernel(const float4* __restrict__ in, float4* __restrict__ out, size_t n) {
  size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = in[i];
}

constexpr int kChains = 8;

__global__ void fma_kernel(float* out, int iters, float a, float b) {
  float x[kChains];
#pragma unroll
  for (int c = 0; c < kChains; ++c) x[c] = threadIdx.x * 1e-3f + c;
  for (int i = 0; i < iters; ++i) {
#pragma unroll
    for (int c = 0; c < kChains; ++c) x[c] = fmaf(x[c], a, b);
  }
  float s = 0;
#pragma unroll
  for (int c = 0; c < kChains; ++c) s += x[c];
  out[static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x] = s;
}

int main(int argc, char** argv) {
  // "probe": report the device, make a context and stop (bench/gpu times this for the start-up
  // cost).
  const bool probe = argc > 1 && std::strcmp(argv[1], "probe") == 0;
  int reps = argc > 1 && !probe ? std::atoi(argv[1]) : 20;
  int driver = 0, runtime = 0, count = 0;
  CHECK(cudaDriverGetVersion(&driver));
  CHECK(cudaRuntimeGetVersion(&runtime));
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  CHECK(cudaGetDeviceCount(&count));
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  std::printf("device=%s\ndevices=%d\ncuda_visible_devices=%s\ncuda_driver=%d\ncuda_runtime=%d\nsms=%d\n",
              prop.name, count, visible ? visible : "(unset)", driver, runtime,
              prop.multiProcessorCount);
  CHECK(cudaFree(nullptr));  // a context on the device: what MPS and the compute mode act on
  if (probe) return 0;

  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  float ms = 0;

  // Bandwidth: 2 GiB copied per repetition.
  const size_t bytes = size_t(2) << 30, n = bytes / sizeof(float4);
  float4 *in = nullptr, *out = nullptr;
  CHECK(cudaMalloc(&in, bytes));
  CHECK(cudaMalloc(&out, bytes));
  CHECK(cudaMemset(in, 1, bytes));
  const int threads = 256, blocks = prop.multiProcessorCount * 8;
  copy_kernel<<<blocks, threads>>>(in, out, n);  // warm-up
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaEventRecord(start));
  for (int r = 0; r < reps; ++r) copy_kernel<<<blocks, threads>>>(in, out, n);
  CHECK(cudaEventRecord(stop));
  CHECK(cudaEventSynchronize(stop));
  CHECK(cudaGetLastError());
  CHECK(cudaEventElapsedTime(&ms, start, stop));
  std::printf("bandwidth_GBps=%.1f\n", 2.0 * bytes * reps / (ms * 1e-3) / 1e9);
  CHECK(cudaFree(in));
  CHECK(cudaFree(out));

  // Compute: FP32 FMA chains on every SM.
  const int fblocks = prop.multiProcessorCount * 16, iters = 1 << 16;
  float* sink = nullptr;
  CHECK(cudaMalloc(&sink, sizeof(float) * fblocks * threads));
  fma_kernel<<<fblocks, threads>>>(sink, 1024, 0.9999f, 1e-4f);  // warm-up
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaEventRecord(start));
  for (int r = 0; r < reps; ++r) fma_kernel<<<fblocks, threads>>>(sink, iters, 0.9999f, 1e-4f);
  CHECK(cudaEventRecord(stop));
  CHECK(cudaEventSynchronize(stop));
  CHECK(cudaGetLastError());
  CHECK(cudaEventElapsedTime(&ms, start, stop));
  double flops = 2.0 * kChains * iters * double(fblocks) * threads * reps;
  std::printf("compute_TFLOPs=%.2f\n", flops / (ms * 1e-3) / 1e12);
  CHECK(cudaFree(sink));
  return 0;
}
