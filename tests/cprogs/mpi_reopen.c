/* An MPI-IO program that opens its shared file around every step: STEPS times MPI_File_open (collective), each
 * rank writes BYTES bytes at (step * nprocs + rank) * BYTES with MPI_File_write_at_all, MPI_File_close.
 * argv[1] the file, argv[2] steps, argv[3] bytes per rank and step. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, np;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    if (argc < 4) {
        if (rank == 0) fprintf(stderr, "usage: %s FILE STEPS BYTES\n", argv[0]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int n = atoi(argv[2]);
    long b = atol(argv[3]);
    char *buf = malloc(b);
    memset(buf, 'm', b);
    for (int i = 0; i < n; i++) {
        MPI_File fh;
        if (MPI_File_open(MPI_COMM_WORLD, argv[1], MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &fh) != MPI_SUCCESS)
            MPI_Abort(MPI_COMM_WORLD, 1);
        MPI_File_write_at_all(fh, ((MPI_Offset)i * np + rank) * b, buf, (int)b, MPI_BYTE, MPI_STATUS_IGNORE);
        MPI_File_close(&fh);
    }
    free(buf);
    MPI_Finalize();
    return 0;
}
