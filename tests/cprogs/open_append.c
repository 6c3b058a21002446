/* Every rank appends WRITES records of BYTES bytes to a file of its own (argv[1].RANK), opening it with O_APPEND
 * and closing it around every write (a log-style writer): argv[1] the file prefix, argv[2] writes, argv[3] bytes.
 * Darshan's offset restarts at each open and it cannot see O_APPEND: every write but the first looks like a step
 * backwards to offset 0. */
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
        if (rank == 0) fprintf(stderr, "usage: %s PREFIX WRITES BYTES\n", argv[0]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int n = atoi(argv[2]);
    long b = atol(argv[3]);
    char *buf = malloc(b);
    memset(buf, 'q', b);
    char path[4096];
    snprintf(path, sizeof path, "%s.%d", argv[1], rank);
    unlink(path);
    for (int i = 0; i < n; i++) {
        int fd = open(path, O_CREAT | O_WRONLY | O_APPEND, 0644);
        if (fd < 0 || write(fd, buf, b) != b) {
            perror(path);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        close(fd);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    free(buf);
    MPI_Finalize();
    return 0;
}
