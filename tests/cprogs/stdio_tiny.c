/* Reads a file through STDIO in tiny pieces: argv[1] the file, argv[2] bytes per fread (e.g. 2), optional
 * argv[3] "seek" to ftell/fseek before each fread (as parsers that remember positions do).  Prints a checksum so
 * the reads cannot be optimised away. */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s FILE BYTES [seek]\n", argv[0]);
        return 2;
    }
    size_t n = (size_t)atol(argv[2]);
    int seek = argc > 3;
    FILE *fp = fopen(argv[1], "rb");
    if (!fp) {
        perror(argv[1]);
        return 1;
    }
    char buf[4096];
    unsigned long sum = 0;
    size_t got;
    for (;;) {
        if (seek) {
            long pos = ftell(fp);
            fseek(fp, pos, SEEK_SET);
        }
        got = fread(buf, 1, n, fp);
        if (got == 0) break;
        for (size_t i = 0; i < got; i++) sum += (unsigned char)buf[i];
    }
    fclose(fp);
    printf("%lu\n", sum);
    return 0;
}
