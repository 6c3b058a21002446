/* Rank 0 does all the I/O while the other ranks wait in a barrier: it writes MIB MiB in 1 MiB POSIX writes,
 * fsyncs, reads the file back and prints a checksum to stdout.  argv[1] the file, argv[2] MiB. */
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
    if (argc < 3) {
        if (rank == 0) fprintf(stderr, "usage: %s FILE MIB\n", argv[0]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int mib = atoi(argv[2]);
    if (rank == 0) {
        char *buf = malloc(1 << 20);
        memset(buf, 'z', 1 << 20);
        int fd = open(argv[1], O_CREAT | O_WRONLY | O_TRUNC, 0644);
        for (int i = 0; i < mib; i++) {
            if (write(fd, buf, 1 << 20) != (1 << 20)) MPI_Abort(MPI_COMM_WORLD, 1);
        }
        fsync(fd);
        close(fd);
        fd = open(argv[1], O_RDONLY);
        unsigned long sum = 0;
        for (int i = 0; i < mib; i++) {
            if (read(fd, buf, 1 << 20) <= 0) break;
            sum += (unsigned char)buf[i];
        }
        close(fd);
        printf("%lu\n", sum);
        free(buf);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
