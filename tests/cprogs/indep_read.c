/* Rank 0 writes a file of PIECES x nprocs pieces of BYTES bytes with 1 MiB POSIX writes; then every rank reads
 * its pieces (piece i of rank r at (i * nprocs + r) * BYTES) with independent MPI_File_read_at calls, and rank 0
 * prints a checksum.  argv[1] the file, argv[2] pieces per rank, argv[3] bytes per piece.  Every rank opens the
 * file, one writes it: Darshan reduces its POSIX record over the ranks (rank -1, writes included). */
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, np;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    if (argc < 4) {
        if (rank == 0) fprintf(stderr, "usage: %s FILE PIECES BYTES\n", argv[0]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int n = atoi(argv[2]);
    long b = atol(argv[3]), chunk = 1 << 20;
    char *buf = malloc(chunk > b ? chunk : b);
    memset(buf, 'r', chunk > b ? chunk : b);
    if (rank == 0) {
        long total = b * n * np;
        int fd = open(argv[1], O_CREAT | O_WRONLY | O_TRUNC, 0644);
        for (long o = 0; o < total; o += chunk) {
            long k = total - o < chunk ? total - o : chunk;
            if (write(fd, buf, k) != k) MPI_Abort(MPI_COMM_WORLD, 1);
        }
        close(fd);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_File fh;
    MPI_File_open(MPI_COMM_WORLD, argv[1], MPI_MODE_RDONLY, MPI_INFO_NULL, &fh);
    unsigned long sum = 0;
    for (int i = 0; i < n; i++) {
        MPI_File_read_at(fh, ((MPI_Offset)i * np + rank) * b, buf, (int)b, MPI_BYTE, MPI_STATUS_IGNORE);
        sum += (unsigned char)buf[0];
    }
    MPI_File_close(&fh);
    if (rank == 0) printf("%lu\n", sum);
    free(buf);
    MPI_Finalize();
    return 0;
}
