"""g1: one process; 40 writes of 1 MiB, 3,000 writes of 64 B, 47 reads of 100 B, 200 stats of missing files."""
import os
import sys

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
with open(os.path.join(out, "big.bin"), "wb") as fh:
    for _ in range(40):
        fh.write(b"\0" * (1 << 20))
small = os.path.join(out, "small.bin")
fd = os.open(small, os.O_CREAT | os.O_WRONLY | os.O_TRUNC)
for _ in range(3000):
    os.write(fd, b"x" * 64)
os.close(fd)
fd = os.open(small, os.O_RDONLY)
for _ in range(47):
    os.read(fd, 100)
os.close(fd)
for i in range(200):
    try:
        os.stat(os.path.join(out, f"nope{i}"))
    except FileNotFoundError:
        pass
