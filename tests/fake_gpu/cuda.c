/* A stand-in libcuda for tests: answers cuDriverGetVersion like a 12.4 driver. */
int cuDriverGetVersion(int* version) {
  *version = 12040;
  return 0;
}
