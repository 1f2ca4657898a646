/* A stand-in driver library with no CUDA entry points. */
int berth_fake_gpu_library(void) {
  return 1;
}
