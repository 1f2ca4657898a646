/* A stand-in libcuda whose constructor crashes: loading it must not harm Berth. */
__attribute__((constructor)) static void berth_fake_crash(void) {
  __builtin_trap();
}
int cuDriverGetVersion(int* version) {
  *version = 1;
  return 0;
}
