"""g2: a parent writes one 4 KiB file, then three forked children write 500, 1,000 and 1,500 records of 256 B."""
import multiprocessing as mp
import os
import sys


def work(i: int, out: str) -> None:
    fd = os.open(os.path.join(out, f"part{i}.dat"), os.O_CREAT | os.O_WRONLY | os.O_TRUNC)
    for _ in range(500 * (i + 1)):
        os.write(fd, b"p" * 256)
    os.close(fd)


if __name__ == "__main__":
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "shared.dat"), "wb") as fh:
        fh.write(b"s" * 4096)
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=work, args=(i, out)) for i in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
