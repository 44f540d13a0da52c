/*
 * Open MPI from a fresh job's first call: 4 B send/recv round trips between 2
 * processes (`rtt`), or MPI_Allreduce of BYTES float32 bytes at any -np
 * (`allreduce`), timed from the first call after MPI_Init's barrier, the
 * clock read only at the given call counts: the means over spans of a job's
 * calls from its start (cold) to far in (warm), as bench/cold-calls.ts times
 * tensorcomm's.
 *
 *   mpicc -O2 -o mpi_cold_calls mpi_cold_calls.c
 *   mpirun --allow-run-as-root --oversubscribe -np 2 ./mpi_cold_calls rtt 4 1000 3000 10000
 *
 * Rank 0 prints {"ms": [the milliseconds from the first call to the end of call COUNT, for each COUNT]}.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_COUNTS 16

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (argc < 4 || argc - 3 > MAX_COUNTS) {
    if (rank == 0) fprintf(stderr, "usage: mpi_cold_calls rtt|allreduce BYTES COUNT...\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  int rtt = strcmp(argv[1], "rtt") == 0;
  int elements = atoi(argv[2]) / 4;
  int ncounts = argc - 3;
  long counts[MAX_COUNTS];
  double at[MAX_COUNTS];
  for (int k = 0; k < ncounts; k++) counts[k] = atol(argv[3 + k]);
  float *a = calloc(elements, sizeof(float)), *b = calloc(elements, sizeof(float));
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  int k = 0;
  for (long i = 1; k < ncounts; i++) {
    if (!rtt) {
      MPI_Allreduce(a, b, elements, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    } else if (rank == 0) {
      MPI_Send(a, elements, MPI_FLOAT, 1, 0, MPI_COMM_WORLD);
      MPI_Recv(a, elements, MPI_FLOAT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else if (rank == 1) {
      MPI_Recv(a, elements, MPI_FLOAT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(a, elements, MPI_FLOAT, 0, 0, MPI_COMM_WORLD);
    }
    if (i == counts[k]) at[k++] = (MPI_Wtime() - t0) * 1e3;
  }
  if (rank == 0) {
    printf("{\"ms\": [");
    for (int j = 0; j < ncounts; j++) printf("%s%.6f", j ? ", " : "", at[j]);
    printf("]}\n");
  }
  free(a);
  free(b);
  MPI_Finalize();
  return 0;
}
