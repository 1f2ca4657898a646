/* A stand-in libnvidia-ml for tests: NVML's C entry points (nvml.h's stable API, declared here
 * by hand), answering from a state file that the test writes, named by $BERTH_FAKE_NVML_STATE
 * and read again on every call. One directive a line; a GPU not named by a directive answers
 * NVML_ERROR_NOT_SUPPORTED for it:
 *
 *   driver 550.54.15                      nvmlSystemGetDriverVersion
 *   gpu UUID BUS-ID NAME...               one GPU, in NVML index order (the name is the rest)
 *   util INDEX GPU% MEM% [GPU% MEM% ...]  the n-th call answers the n-th pair, the last repeats
 *   mem INDEX TOTAL-MiB USED-MiB          nvmlDeviceGetMemoryInfo_v2's used
 *   reserved INDEX MiB                    the driver's reservation: v1's used counts it too
 *   temp INDEX CELSIUS
 *   power INDEX MILLIWATTS
 *   cc INDEX MAJOR MINOR                  nvmlDeviceGetCudaComputeCapability ("9 0": 9.0)
 *   proc INDEX PID USED-MiB|-             a compute process ("-": NVML_VALUE_NOT_AVAILABLE)
 *   fail FUNCTION CODE                    FUNCTION returns CODE
 *   hang FUNCTION                         FUNCTION never returns
 *
 * Without the variable (or with a file that cannot be read) nvmlInit_v2 answers
 * NVML_ERROR_DRIVER_NOT_LOADED. Built with -DFAKE_NVML_MINIMAL, the library lacks the optional
 * entry points (PCI info, temperature, power, processes, compute capability), as an old or partial
 * driver would. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum {
  kSuccess = 0,
  kUninitialized = 1,
  kInvalidArgument = 2,
  kNotSupported = 3,
  kInsufficientSize = 7,
  kDriverNotLoaded = 9,
  kMaxGpus = 8,
  kMaxSamples = 16,
};

typedef struct {
  int index;
} fake_device;
typedef fake_device* nvmlDevice_t;

typedef struct {
  unsigned int gpu, memory;
} nvmlUtilization_t;
typedef struct {
  unsigned long long total, free, used;
} nvmlMemory_t;
typedef struct {
  unsigned int version;
  unsigned long long total, reserved, free, used;
} nvmlMemory_v2_t;
typedef struct {
  char busIdLegacy[16];
  unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
} nvmlPciInfo_t;
typedef struct {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_t;

struct proc {
  unsigned pid;
  unsigned long long used; /* bytes, or ~0 */
};
struct gpu {
  char uuid[80], bus[32], name[96];
  int nutil;
  unsigned util[kMaxSamples][2];
  int has_mem, has_temp, has_power, has_cc;
  int cc_major, cc_minor;
  unsigned long long mem_total, mem_used, mem_reserved; /* MiB */
  unsigned temp, power;
  int nproc;
  struct proc procs[16];
};
struct state {
  int ok;
  char driver[80];
  int ngpus;
  struct gpu gpus[kMaxGpus];
  char fail[8][64];
  int fail_code[8];
  int nfail;
  char hang[8][64];
  int nhang;
};

static fake_device devices[kMaxGpus];
static int util_calls[kMaxGpus];
static int initialised;

static void copy(char* to, size_t size, const char* from) {
  size_t n = strlen(from);
  if (n >= size) n = size - 1;
  memcpy(to, from, n);
  to[n] = '\0';
}

static void load(struct state* s) {
  memset(s, 0, sizeof *s);
  const char* path = getenv("BERTH_FAKE_NVML_STATE");
  FILE* f = path ? fopen(path, "r") : NULL;
  if (!f) return;
  s->ok = 1;
  char line[512];
  while (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\n")] = '\0';
    char key[16] = "", a[96] = "";
    int i = -1, used = 0;
    if (sscanf(line, "%15s%n", key, &used) != 1) continue;
    const char* rest = line + used;
    if (strcmp(key, "driver") == 0 && sscanf(rest, "%79s", s->driver) == 1) continue;
    if (strcmp(key, "gpu") == 0 && s->ngpus < kMaxGpus) {
      struct gpu* g = &s->gpus[s->ngpus];
      int n = 0;
      if (sscanf(rest, "%79s %31s %n", g->uuid, g->bus, &n) >= 2 && n > 0) {
        copy(g->name, sizeof g->name, rest + n);
        s->ngpus++;
      }
      continue;
    }
    if (strcmp(key, "fail") == 0 && s->nfail < 8 &&
        sscanf(rest, "%63s %d", s->fail[s->nfail], &s->fail_code[s->nfail]) == 2) {
      s->nfail++;
      continue;
    }
    if (strcmp(key, "hang") == 0 && s->nhang < 8 && sscanf(rest, "%63s", s->hang[s->nhang]) == 1) {
      s->nhang++;
      continue;
    }
    if (sscanf(rest, "%d%n", &i, &used) != 1 || i < 0 || i >= kMaxGpus) continue;
    struct gpu* g = &s->gpus[i];
    rest += used;
    if (strcmp(key, "util") == 0) {
      unsigned u, m;
      g->nutil = 0; /* a later line replaces an earlier one */
      while (g->nutil < kMaxSamples && sscanf(rest, "%u %u%n", &u, &m, &used) == 2) {
        g->util[g->nutil][0] = u;
        g->util[g->nutil][1] = m;
        g->nutil++;
        rest += used;
      }
    } else if (strcmp(key, "reserved") == 0) {
      sscanf(rest, "%llu", &g->mem_reserved);
    } else if (strcmp(key, "mem") == 0) {
      g->has_mem = sscanf(rest, "%llu %llu", &g->mem_total, &g->mem_used) == 2;
    } else if (strcmp(key, "temp") == 0) {
      g->has_temp = sscanf(rest, "%u", &g->temp) == 1;
    } else if (strcmp(key, "cc") == 0) {
      g->has_cc = sscanf(rest, "%d %d", &g->cc_major, &g->cc_minor) == 2;
    } else if (strcmp(key, "power") == 0) {
      g->has_power = sscanf(rest, "%u", &g->power) == 1;
    } else if (strcmp(key, "proc") == 0 && g->nproc < 16) {
      struct proc* p = &g->procs[g->nproc];
      if (sscanf(rest, "%u %95s", &p->pid, a) == 2) {
        p->used = strcmp(a, "-") == 0 ? ~0ULL : strtoull(a, NULL, 10) * 1024 * 1024;
        g->nproc++;
      }
    }
  }
  fclose(f);
}

/* What a call of `fn` answers before doing its work: hangs, a configured failure, or -1 to go on.
 */
static int enter(const struct state* s, const char* fn) {
  for (int i = 0; i < s->nhang; ++i)
    if (strcmp(s->hang[i], fn) == 0)
      for (;;) pause();
  for (int i = 0; i < s->nfail; ++i)
    if (strcmp(s->fail[i], fn) == 0) return s->fail_code[i];
  return -1;
}

/* The GPU behind a handle, or NULL. */
static const struct gpu* gpu_of(const struct state* s, nvmlDevice_t d) {
  if (!d || d->index < 0 || d->index >= s->ngpus) return NULL;
  return &s->gpus[d->index];
}

#define ENTER(fn)               \
  struct state st;              \
  load(&st);                    \
  int early = enter(&st, fn);   \
  if (early >= 0) return early; \
  if (!initialised) return kUninitialized

const char* nvmlErrorString(int result) {
  switch (result) {
    case 0:
      return "Success";
    case 1:
      return "Uninitialized";
    case 2:
      return "Invalid Argument";
    case 3:
      return "Not Supported";
    case 4:
      return "Insufficient Permissions";
    case 7:
      return "Insufficient Size";
    case 9:
      return "Driver Not Loaded";
    default:
      return "Unknown Error";
  }
}

int nvmlInit_v2(void) {
  struct state st;
  load(&st);
  int early = enter(&st, "nvmlInit_v2");
  if (early >= 0) return early;
  if (!st.ok) return kDriverNotLoaded;
  initialised = 1;
  return kSuccess;
}

int nvmlShutdown(void) {
  ENTER("nvmlShutdown");
  initialised = 0;
  return kSuccess;
}

int nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  ENTER("nvmlSystemGetDriverVersion");
  if (!st.driver[0]) return kNotSupported;
  if (strlen(st.driver) >= length) return kInsufficientSize;
  copy(version, length, st.driver);
  return kSuccess;
}

int nvmlDeviceGetCount_v2(unsigned int* count) {
  ENTER("nvmlDeviceGetCount_v2");
  *count = (unsigned)st.ngpus;
  return kSuccess;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  ENTER("nvmlDeviceGetHandleByIndex_v2");
  if (index >= (unsigned)st.ngpus) return kInvalidArgument;
  devices[index].index = (int)index;
  *device = &devices[index];
  return kSuccess;
}

int nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned int length) {
  ENTER("nvmlDeviceGetUUID");
  const struct gpu* g = gpu_of(&st, device);
  if (!g) return kInvalidArgument;
  if (strlen(g->uuid) >= length) return kInsufficientSize;
  copy(uuid, length, g->uuid);
  return kSuccess;
}

int nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned int length) {
  ENTER("nvmlDeviceGetName");
  const struct gpu* g = gpu_of(&st, device);
  if (!g) return kInvalidArgument;
  if (strlen(g->name) >= length) return kInsufficientSize;
  copy(name, length, g->name);
  return kSuccess;
}

int nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t* u) {
  ENTER("nvmlDeviceGetUtilizationRates");
  const struct gpu* g = gpu_of(&st, device);
  if (!g) return kInvalidArgument;
  if (g->nutil == 0) return kNotSupported;
  int n = util_calls[device->index]++;
  if (n >= g->nutil) n = g->nutil - 1;
  u->gpu = g->util[n][0];
  u->memory = g->util[n][1];
  return kSuccess;
}

int nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* m) {
  ENTER("nvmlDeviceGetMemoryInfo");
  const struct gpu* g = gpu_of(&st, device);
  if (!g) return kInvalidArgument;
  if (!g->has_mem) return kNotSupported;
  m->total = g->mem_total * 1024 * 1024;
  m->used = (g->mem_used + g->mem_reserved) * 1024 * 1024;
  m->free = m->total - m->used;
  return kSuccess;
}

#ifndef FAKE_NVML_MINIMAL
int nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t* m) {
  ENTER("nvmlDeviceGetMemoryInfo_v2");
  const struct gpu* g = gpu_of(&st, device);
  if (!g) return kInvalidArgument;
  /* nvmlMemory_v2: the struct's size and version 2 in the top byte */
  if (m->version != (unsigned)(sizeof(nvmlMemory_v2_t) | (2u << 24))) return kInvalidArgument;
  if (!g->has_mem) return kNotSupported;
  m->total = g->mem_total * 1024 * 1024;
  m->reserved = g->mem_reserved * 1024 * 1024;
  m->used = g->mem_used * 1024 * 1024;
  m->free = m->total - m->used - m->reserved;
  return kSuccess;
}
#endif

#ifndef FAKE_NVML_MINIMAL
int nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  ENTER("nvmlDeviceGetPciInfo_v3");
  const struct gpu* g = gpu_of(&st, device);
  if (!g) return kInvalidArgument;
  memset(pci, 0, sizeof *pci);
  copy(pci->busId, sizeof pci->busId, g->bus);
  copy(pci->busIdLegacy, sizeof pci->busIdLegacy, g->bus);
  return kSuccess;
}

int nvmlDeviceGetTemperature(nvmlDevice_t device, int sensor, unsigned int* temp) {
  ENTER("nvmlDeviceGetTemperature");
  const struct gpu* g = gpu_of(&st, device);
  if (!g || sensor != 0) return kInvalidArgument;
  if (!g->has_temp) return kNotSupported;
  *temp = g->temp;
  return kSuccess;
}

int nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int* major, int* minor) {
  ENTER("nvmlDeviceGetCudaComputeCapability");
  const struct gpu* g = gpu_of(&st, device);
  if (!g || !major || !minor) return kInvalidArgument;
  if (!g->has_cc) return kNotSupported;
  *major = g->cc_major;
  *minor = g->cc_minor;
  return kSuccess;
}

int nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int* milliwatts) {
  ENTER("nvmlDeviceGetPowerUsage");
  const struct gpu* g = gpu_of(&st, device);
  if (!g) return kInvalidArgument;
  if (!g->has_power) return kNotSupported;
  *milliwatts = g->power;
  return kSuccess;
}

/* NVML's sizing protocol: too small a buffer gets the count needed and INSUFFICIENT_SIZE. */
int nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int* count,
                                            nvmlProcessInfo_t* infos) {
  ENTER("nvmlDeviceGetComputeRunningProcesses_v3");
  const struct gpu* g = gpu_of(&st, device);
  if (!g || !count) return kInvalidArgument;
  if (*count < (unsigned)g->nproc) {
    *count = (unsigned)g->nproc;
    return kInsufficientSize;
  }
  for (int i = 0; i < g->nproc; ++i) {
    infos[i].pid = g->procs[i].pid;
    infos[i].usedGpuMemory = g->procs[i].used;
    infos[i].gpuInstanceId = 0xFFFFFFFFu;
    infos[i].computeInstanceId = 0xFFFFFFFFu;
  }
  *count = (unsigned)g->nproc;
  return kSuccess;
}
#endif
