/* A dynamically linked program for the GPU end-to-end tests: what an unmodified CUDA
 * application's loader does. For each library name given, dlopen() it as an application
 * would and print where the loader found it (and the file behind the links); for libcuda, also ask
 * the driver's version. Prints key=value lines; exits 1 when a library cannot be loaded. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  int status = 0;
  for (int i = 1; i < argc; ++i) {
    void* h = dlopen(argv[i], RTLD_NOW);
    if (h == NULL) {
      printf("missing.%s=%s\n", argv[i], dlerror());
      status = 1;
      continue;
    }
    struct link_map* map = NULL;
    if (dlinfo(h, RTLD_DI_LINKMAP, &map) == 0 && map != NULL) {
      char real[PATH_MAX];
      printf("lib.%s=%s\n", argv[i], map->l_name);
      if (realpath(map->l_name, real) != NULL) printf("real.%s=%s\n", argv[i], real);
    }
    int (*get_version)(int*) = (int (*)(int*))dlsym(h, "cuDriverGetVersion");
    int version = 0;
    if (get_version != NULL && get_version(&version) == 0)
      printf("cuda_driver_version=%d\n", version);
  }
  return status;
}
