/* Collective writes of a shared file: every rank writes BLOCKS blocks of BLOCK bytes with MPI_File_write_at_all,
 * interleaved (block i of rank r at (i * nprocs + r) * BLOCK).  argv[1]: output file, argv[2]: cb_nodes (the
 * number of collective-buffering aggregators; "0" leaves ROMIO's default), argv[3]: blocks per rank, argv[4]:
 * block bytes.  Collective buffering is forced (romio_cb_write=enable) and aggregators may share a node
 * (cb_config_list "*:*"), so cb_nodes=1 funnels every byte through rank 0 while the others wait in the call. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, nprocs;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    if (argc < 5) {
        if (rank == 0) fprintf(stderr, "usage: %s FILE CB_NODES BLOCKS BLOCK_BYTES\n", argv[0]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int cb_nodes = atoi(argv[2]), blocks = atoi(argv[3]);
    long block = atol(argv[4]);
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "romio_cb_write", "enable");
    MPI_Info_set(info, "cb_config_list", "*:*");
    if (cb_nodes > 0) {
        MPI_Info_set(info, "cb_nodes", argv[2]);
    }
    char *buf = malloc(block);
    memset(buf, 'a' + rank % 26, block);
    MPI_File fh;
    if (MPI_File_open(MPI_COMM_WORLD, argv[1], MPI_MODE_CREATE | MPI_MODE_WRONLY, info, &fh) != MPI_SUCCESS) {
        fprintf(stderr, "cannot open %s\n", argv[1]);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (int i = 0; i < blocks; i++) {
        MPI_Offset off = ((MPI_Offset)i * nprocs + rank) * block;
        MPI_File_write_at_all(fh, off, buf, (int)block, MPI_BYTE, MPI_STATUS_IGNORE);
    }
    MPI_File_sync(fh);
    MPI_File_close(&fh);
    MPI_Info_free(&info);
    free(buf);
    MPI_Finalize();
    return 0;
}
