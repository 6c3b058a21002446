/* Every rank opens and closes one shared file OPENS times, then rank 0 alone writes MIB MiB to it in 1 MiB
 * writes: argv[1] the file, argv[2] opens per rank, argv[3] MiB rank 0 writes.  With Darshan's shared-record
 * reduction the file is one record (rank -1) whose metadata seconds add up over the ranks while the opens all lie
 * inside the record's open-timestamp span, and whose slowest rank (rank 0) is slow because of its writes. */
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
        if (rank == 0) fprintf(stderr, "usage: %s FILE OPENS MIB\n", argv[0]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int opens = atoi(argv[2]), mib = atoi(argv[3]);
    if (rank == 0) close(open(argv[1], O_CREAT | O_WRONLY, 0644));
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < opens; i++) {
        int fd = open(argv[1], O_RDONLY);
        if (fd >= 0) close(fd);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        char *buf = malloc(1 << 20);
        memset(buf, 'y', 1 << 20);
        int fd = open(argv[1], O_WRONLY);
        for (int i = 0; i < mib; i++) {
            if (write(fd, buf, 1 << 20) != (1 << 20)) { perror("write"); return 1; }
        }
        fsync(fd);
        close(fd);
        free(buf);
    }
    MPI_Finalize();
    return 0;
}
