/* Every rank pwrites WRITES requests of BYTES bytes (e.g. 1000: unaligned) back to back into its own region of
 * one shared file, with POSIX calls only: argv[1] the file, argv[2] writes per rank, argv[3] bytes per write.
 * Darshan reduces the file's record over the ranks (one record, rank -1): no single process owns it. */
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (argc < 4) {
        if (rank == 0) fprintf(stderr, "usage: %s FILE WRITES BYTES\n", argv[0]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int n = atoi(argv[2]);
    long b = atol(argv[3]);
    char *buf = malloc(b);
    memset(buf, 'p', b);
    if (rank == 0) close(open(argv[1], O_CREAT | O_WRONLY | O_TRUNC, 0644));
    MPI_Barrier(MPI_COMM_WORLD);
    int fd = open(argv[1], O_WRONLY);
    off_t base = (off_t)rank * n * b;
    for (int i = 0; i < n; i++) {
        if (pwrite(fd, buf, b, base + (off_t)i * b) != b) {
            perror("pwrite");
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    close(fd);
    MPI_Barrier(MPI_COMM_WORLD);
    free(buf);
    MPI_Finalize();
    return 0;
}
