/* Ping-pong between ranks 0 and 1: prints the MPI library's version line, then the one-way
 * latency (us) and bandwidth (MB/s) for each message size named on the command line
 * (default: 8 and 1048576 bytes). Used by bench/mpi/run.sh and the e2e MPI test. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(version, &len);
  char* nl = strchr(version, '\n');
  if (nl) *nl = '\0';
  printf("rank %d of %d: %s\n", rank, size, version);
  fflush(stdout);
  if (size < 2) {
    MPI_Finalize();
    return 0;
  }
  long sizes[8] = {8, 1048576};
  int nsizes = 2;
  if (argc > 1) {
    nsizes = 0;
    for (int i = 1; i < argc && nsizes < 8; ++i) sizes[nsizes++] = atol(argv[i]);
  }
  for (int s = 0; s < nsizes; ++s) {
    long n = sizes[s];
    char* buf = calloc((size_t)n, 1);
    int iters = n <= 4096 ? 20000 : 500;
    for (int phase = 0; phase < 2; ++phase) { /* phase 0 warms up */
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = MPI_Wtime();
      for (int i = 0; i < iters; ++i) {
        if (rank == 0) {
          MPI_Send(buf, (int)n, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
          MPI_Recv(buf, (int)n, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (rank == 1) {
          MPI_Recv(buf, (int)n, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
          MPI_Send(buf, (int)n, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
        }
      }
      double t = MPI_Wtime() - t0;
      if (phase == 1 && rank == 0)
        printf("size %ld latency_us %.3f bandwidth_MBps %.1f\n", n, t / iters / 2 * 1e6,
               (double)n * iters * 2 / t / 1e6);
    }
    free(buf);
  }
  MPI_Finalize();
  return 0;
}
