/* MPI_Allreduce baseline for tools/bench/collnet.sh: float sum, sizes from argv[1] to
 * argv[2] bytes (x2 steps), argv[3] timed iterations after one warm-up; rank 0 prints
 * "bytes time_us" per size (the slowest rank's mean, as nccl-tests reports). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  const long lo = argc > 1 ? atol(argv[1]) : 8192, hi = argc > 2 ? atol(argv[2]) : 16 << 20;
  const int iters = argc > 3 ? atoi(argv[3]) : 3;
  float* in = malloc((size_t)hi);
  float* out = malloc((size_t)hi);
  for (long i = 0; i < hi / 4; ++i) in[i] = (float)(rank + i % 7);
  for (long bytes = lo; bytes <= hi; bytes *= 2) {
    const int count = (int)(bytes / 4);
    MPI_Allreduce(in, out, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int it = 0; it < iters; ++it) MPI_Allreduce(in, out, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double us = (MPI_Wtime() - t0) * 1e6 / iters, worst = 0;
    MPI_Reduce(&us, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) printf("%ld %.1f\n", bytes, worst);
  }
  free(in);
  free(out);
  MPI_Finalize();
  return 0;
}
