/* Every rank writes a file of its own (argv[1].RANK, MIB MiB in 1 MiB writes), then reads READS pieces of BYTES
 * bytes at random piece-aligned offsets with lseek + read, and rank 0 prints a checksum.  argv[1] the file
 * prefix, argv[2] MiB, argv[3] reads, argv[4] bytes per read. */
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
    if (argc < 5) {
        if (rank == 0) fprintf(stderr, "usage: %s PREFIX MIB READS BYTES\n", argv[0]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    long size = atol(argv[2]) << 20, b = atol(argv[4]);
    int n = atoi(argv[3]);
    char path[4096];
    snprintf(path, sizeof path, "%s.%d", argv[1], rank);
    char *buf = malloc(1 << 20);
    memset(buf, 's', 1 << 20);
    int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    for (long o = 0; o < size; o += 1 << 20) {
        if (write(fd, buf, 1 << 20) != 1 << 20) MPI_Abort(MPI_COMM_WORLD, 1);
    }
    close(fd);
    fd = open(path, O_RDONLY);
    srand(rank + 1);
    unsigned long sum = 0;
    for (int i = 0; i < n; i++) {
        lseek(fd, (off_t)(rand() % (size / b)) * b, SEEK_SET);
        if (read(fd, buf, b) != b) MPI_Abort(MPI_COMM_WORLD, 1);
        sum += (unsigned char)buf[0];
    }
    close(fd);
    if (rank == 0) printf("%lu\n", sum);
    free(buf);
    MPI_Finalize();
    return 0;
}
