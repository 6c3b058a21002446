/* IOR-like writes with an fsync after every write: argv[1] output file, argv[2] writes, argv[3] bytes per write.
 * Under MPI each rank writes its own file (argv[1].RANK); without MPI (built with -DNO_MPI) one file. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifndef NO_MPI
#include <mpi.h>
#endif

int main(int argc, char **argv) {
    int rank = 0;
#ifndef NO_MPI
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
#endif
    if (argc < 4) {
        fprintf(stderr, "usage: %s FILE WRITES BYTES\n", argv[0]);
        return 2;
    }
    int writes = atoi(argv[2]);
    size_t bytes = (size_t)atol(argv[3]);
    char path[4096];
#ifndef NO_MPI
    snprintf(path, sizeof path, "%s.%d", argv[1], rank);
#else
    snprintf(path, sizeof path, "%s", argv[1]);
#endif
    char *buf = malloc(bytes);
    memset(buf, 'x', bytes);
    int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    if (fd < 0) {
        perror(path);
        return 1;
    }
    for (int i = 0; i < writes; i++) {
        if (write(fd, buf, bytes) != (ssize_t)bytes) {
            perror("write");
            return 1;
        }
        fsync(fd);
    }
    close(fd);
    free(buf);
#ifndef NO_MPI
    MPI_Finalize();
#endif
    return 0;
}
