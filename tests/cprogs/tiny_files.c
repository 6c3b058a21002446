/* File per process, many times over: every rank creates FILES files of BYTES bytes each (DIR/r<rank>_<i>.dat),
 * one open-write-close per file.  argv[1] the directory, argv[2] files per rank, argv[3] bytes per file; with
 * argv[4] "read" the ranks read those files instead (one open-read-close each) and print a checksum. */
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
        if (rank == 0) fprintf(stderr, "usage: %s DIR FILES BYTES\n", argv[0]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int n = atoi(argv[2]);
    long b = atol(argv[3]);
    char *buf = malloc(b);
    memset(buf, 'x', b);
    char path[4096];
    int reading = argc > 4 && strcmp(argv[4], "read") == 0;
    unsigned long sum = 0;
    for (int i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s/r%d_%d.dat", argv[1], rank, i);
        int fd = reading ? open(path, O_RDONLY) : open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
        if (fd < 0 || (reading ? read(fd, buf, b) : write(fd, buf, b)) != b) {
            perror(path);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        sum += (unsigned char)buf[b - 1];
        close(fd);
    }
    if (reading) printf("rank %d read %d files, checksum %lu\n", rank, n, sum);
    MPI_Barrier(MPI_COMM_WORLD);
    free(buf);
    MPI_Finalize();
    return 0;
}
