// bench/interleave: starts commands in turn, one start of each per turn, and prints for each
// the mean, median and fastest wall time and the median CPU time (user + system of the process
// and its children), in milliseconds, one line per command in the order given:
//   MEAN MEDIAN FASTEST CPU
// Side by side in time, the commands see the same machine: on a shared or virtual machine whose
// speed drifts over seconds, hyperfine's one-command-after-another blocks each see another one.
// Each turn starts at the next command (A B C, B C A, C A B, ...).
// Each command is one argument, split at spaces (no quoting), found in PATH and run without a
// shell; its output goes to /dev/null, and a start that fails ends the run (status 1).
//
// Usage: interleave RUNS WARMUP COMMAND...   (built by bench/start: cc -O2)
#define _GNU_SOURCE
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char** environ;

enum { kMaxCommands = 16, kMaxWords = 64 };

static int by_value(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

static double microseconds(const struct timespec* t) {
  return (double)t->tv_sec * 1e6 + (double)t->tv_nsec / 1e3;
}

// One start of `argv`: its wall and CPU time in microseconds; 0 when it exited 0.
static int start_once(char** argv, const posix_spawn_file_actions_t* quiet, double* wall,
                      double* cpu) {
  struct timespec a, b;
  struct rusage ru;
  int status;
  pid_t pid;
  clock_gettime(CLOCK_MONOTONIC, &a);
  if (posix_spawnp(&pid, argv[0], quiet, NULL, argv, environ) != 0) return -1;
  if (wait4(pid, &status, 0, &ru) != pid) return -1;
  clock_gettime(CLOCK_MONOTONIC, &b);
  *wall = microseconds(&b) - microseconds(&a);
  *cpu = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 +
         (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: interleave RUNS WARMUP COMMAND...\n");
    return 2;
  }
  int runs = atoi(argv[1]), warmup = atoi(argv[2]), n = argc - 3;
  if (runs < 1 || warmup < 0 || n > kMaxCommands) {
    fprintf(stderr, "interleave: RUNS >= 1, WARMUP >= 0, at most %d commands\n", kMaxCommands);
    return 2;
  }
  char* words[kMaxCommands][kMaxWords + 1];
  double* wall[kMaxCommands];
  double* cpu[kMaxCommands];
  for (int c = 0; c < n; c++) {
    int w = 0;
    for (char* tok = strtok(argv[c + 3], " "); tok != NULL && w < kMaxWords;
         tok = strtok(NULL, " "))
      words[c][w++] = tok;
    words[c][w] = NULL;
    wall[c] = calloc((size_t)runs, sizeof(double));
    cpu[c] = calloc((size_t)runs, sizeof(double));
    if (w == 0 || wall[c] == NULL || cpu[c] == NULL) return 2;
  }
  posix_spawn_file_actions_t quiet;
  posix_spawn_file_actions_init(&quiet);
  posix_spawn_file_actions_addopen(&quiet, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  for (int r = -warmup; r < runs; r++) {
    // Each turn begins one command further on, so that each follows each of the others as
    // often: a start runs faster after one that warmed the same caches.
    for (int k = 0; k < n; k++) {
      int c = (k + (r + warmup)) % n;
      double w, u;
      if (start_once(words[c], &quiet, &w, &u) != 0) {
        fprintf(stderr, "interleave: %s failed\n", words[c][0]);
        return 1;
      }
      if (r < 0) continue;
      wall[c][r] = w;
      cpu[c][r] = u;
    }
  }
  for (int c = 0; c < n; c++) {
    double sum = 0;
    for (int i = 0; i < runs; i++) sum += wall[c][i];
    qsort(wall[c], (size_t)runs, sizeof(double), by_value);
    qsort(cpu[c], (size_t)runs, sizeof(double), by_value);
    printf("%.3f %.3f %.3f %.3f\n", sum / runs / 1e3, wall[c][runs / 2] / 1e3, wall[c][0] / 1e3,
           cpu[c][runs / 2] / 1e3);
  }
  return 0;
}
