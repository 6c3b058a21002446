/* Rank 0 writes an N x N array of doubles row by row with POSIX write(); then every rank reads its block of a
 * 2-D decomposition through a subarray file view with MPI_File_read_at_all, REPS times.  argv[1] the file,
 * argv[2] N, argv[3] REPS.  MPI-IO only reads this file (collectively); the writes are POSIX calls of rank 0. */
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, np;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    if (argc < 4) {
        if (rank == 0) fprintf(stderr, "usage: %s FILE N REPS\n", argv[0]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int n = atoi(argv[2]), reps = atoi(argv[3]);
    int dims[2] = {0, 0};
    MPI_Dims_create(np, 2, dims);
    if (rank == 0) {
        double *row = malloc(sizeof(double) * n);
        int fd = open(argv[1], O_CREAT | O_WRONLY | O_TRUNC, 0644);
        for (int i = 0; i < n; i++) {
            for (int j = 0; j < n; j++) row[j] = (double)i * n + j;
            if (write(fd, row, sizeof(double) * n) != (ssize_t)(sizeof(double) * n)) MPI_Abort(MPI_COMM_WORLD, 1);
        }
        close(fd);
        free(row);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    int gs[2] = {n, n}, ls[2] = {n / dims[0], n / dims[1]};
    int st[2] = {(rank / dims[1]) * ls[0], (rank % dims[1]) * ls[1]};
    MPI_Datatype sub;
    MPI_Type_create_subarray(2, gs, ls, st, MPI_ORDER_C, MPI_DOUBLE, &sub);
    MPI_Type_commit(&sub);
    double *buf = malloc(sizeof(double) * ls[0] * ls[1]), sum = 0;
    MPI_File fh;
    MPI_File_open(MPI_COMM_WORLD, argv[1], MPI_MODE_RDONLY, MPI_INFO_NULL, &fh);
    MPI_File_set_view(fh, 0, MPI_DOUBLE, sub, "native", MPI_INFO_NULL);
    for (int r = 0; r < reps; r++) {
        MPI_File_read_at_all(fh, 0, buf, ls[0] * ls[1], MPI_DOUBLE, MPI_STATUS_IGNORE);
        sum += buf[ls[0] * ls[1] - 1];
    }
    MPI_File_close(&fh);
    if (rank == 0) printf("%g\n", sum);
    MPI_Type_free(&sub);
    free(buf);
    MPI_Finalize();
    return 0;
}
