"""Which left mmap logs are images that exec replaced, told from the logs' own times (no process watch needed).

A process whose image exec replaces never runs Darshan's shutdown for that image: its mmap log stays, with no pid
in its name.  The same process then writes the next image's log, whose name carries the pid
(``<user>_<exe>_id<jobid>-<pid>_...``).  From the logs alone (darshan-util decodes their job records and
records, see ``log_times`` in the readers):

- an image (an mmap log left behind) started at ``start_s`` (its job record) and was still running at ``last_s``
  (the end of its latest record);
- it ended by exec only if a *successor* exists: a final log of the same job id, under another program name,
  whose image started (``start_s`` of its job record) at or after both;
- each successor follows at most one image; a process that died has no successor;
- the workload's main process's first image is the earliest log of all (``main``); any other image the watch
  missed was short-lived (``MAX_UNSEEN_LIFE_S``) and of a shell or an exec-only wrapper (``EXEC_PRONE``): the
  caller leaves other images out.

The pairs are a bipartite matching.  An image is called exec'd only when it has a successor in *every* maximum
matching (otherwise some assignment leaves it without one: it may be a process that died, and it is left to be
reported so); its pid is named only when that successor is the same in every maximum matching, else the pids
that fit are listed ("several fit") rather than one guessed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# clock rounding between two logs' times: ``last_s`` (see readers' log_times) is already a lower bound of the
# image's last activity and ``start_s`` a clock reading in the next image
TOLERANCE_S = 0.001
# a child's image the process watch missed lived briefly (the watch looks at the start and then every second): a
# forked child that execs does so at once, while a forked worker that ran for long and then died has no successor.
# An image older than this when its supposed successor started is not taken for an exec from times alone
MAX_UNSEEN_LIFE_S = 2.0
# Programs whose forked children exec as a rule: shells (each command of a batch script is a forked shell that
# execs the program; a shell forks, it does not vfork, so every program it starts has such an image before it) and
# wrappers that only exec.  A left image of another program (a Python worker forked by multiprocessing, say) the
# watch missed is not taken for an exec from times alone: its parent may start other programs without a forked
# image before them (``subprocess`` uses vfork or posix_spawn), and such a program's log would fit a worker killed
# just before it as well as an exec would.  The main process's first image is told apart anyway (``main``).
EXEC_PRONE = frozenset({"sh", "bash", "rbash", "dash", "ash", "zsh", "ksh", "ksh93", "mksh", "pdksh", "yash", "posh",
                        "csh", "tcsh", "fish", "busybox", "env", "nice", "nohup", "stdbuf", "taskset", "numactl",
                        "ionice", "chrt", "setsid"})


def exec_prone(exe: str) -> bool:
    """Is ``exe`` (Darshan's program name) a shell or an exec-only wrapper (``EXEC_PRONE``)?"""
    return exe.lstrip("-") in EXEC_PRONE


@dataclass(frozen=True)
class Image:
    """An mmap log left behind: ``exe`` is the program name in its file name."""

    name: str
    exe: str
    jobid: str
    start_s: float
    last_s: float


@dataclass(frozen=True)
class Successor:
    """A final log of one process (its pid from its file name)."""

    name: str
    pid: int
    exe: str
    jobid: str
    start_s: float


@dataclass
class Verdict:
    pid: int | None  # None: several processes fit, which one is not told by the logs
    exec: str  # the program(s) the image exec'd ("cat", or "cat or dd" when several fit)
    fits: list[int] = field(default_factory=list)  # every pid that fits (one when pid is known)
    gap_s: float | None = None  # successor start - the image's last activity (when the pid is known)


def feasible(img: Image, succ: Successor, tol_s: float = TOLERANCE_S) -> bool:
    """Could ``succ`` be the image that replaced ``img`` by exec, by name and time?"""
    return (succ.exe != img.exe and succ.jobid == img.jobid
            and img.start_s <= succ.start_s + tol_s and img.last_s <= succ.start_s + tol_s)


def match_by_time(images: list[Image], successors: list[Successor], *, main: tuple[str, int] | None = None,
                  excluded: dict[int, list[str]] | None = None, tol_s: float = TOLERANCE_S) -> dict[str, Verdict]:
    """image name -> Verdict for each image proven replaced by exec (see the module docstring).

    ``main``: (the image that is the workload's main process's first one, its pid).  Every process of the workload
    descends from the main process, and a child's Darshan starts after its parent's, so when the earliest of all
    the job's logs is a left mmap log, it is the main process's first image: it can only have been replaced by the
    main process's next image, and the main process's log can only follow it (a child's image is never the
    main process's).  ``excluded``: pid -> image names that may not precede that pid (e.g. the process watch saw
    it run its program already before that image started)."""
    excluded = excluded or {}
    first, main_pid = main if main is not None else (None, None)
    adj: list[list[int]] = []
    for img in images:
        cands = [j for j, s in enumerate(successors)
                 if feasible(img, s, tol_s) and img.name not in excluded.get(s.pid, ())
                 and (first is None or (img.name == first) == (s.pid == main_pid))
                 and (img.name == first or s.start_s - img.start_s <= MAX_UNSEEN_LIFE_S)]
        cands.sort(key=lambda j: successors[j].start_s - img.last_s)  # nearest first: finds a matching fast
        adj.append(cands)
    mate_img, mate_succ = _max_matching(adj, len(successors))
    n = len(images)
    # images some maximum matching leaves without a successor: reachable from a free image by an alternating path
    loose = set(i for i in range(n) if mate_img[i] is None)
    todo = list(loose)
    while todo:
        i = todo.pop()
        for j in adj[i]:
            k = mate_succ[j]
            if k is not None and k not in loose:
                loose.add(k)
                todo.append(k)
    # images that can move to another successor keeping the matching's size: a chain ending at a free successor
    movable: set[int] = set()
    back: dict[int, list[int]] = {}  # matched successor j -> images with an unmatched edge to it
    for i in range(n):
        for j in adj[i]:
            if mate_succ[j] is None:
                if mate_img[i] is not None:
                    movable.add(i)
            elif j != mate_img[i]:
                back.setdefault(j, []).append(i)
    todo = list(movable)
    while todo:
        i = todo.pop()
        j = mate_img[i]
        for k in back.get(j, ()):  # k can take j once i moves on
            if k not in movable and mate_img[k] is not None:
                movable.add(k)
                todo.append(k)
    scc = _components(adj, mate_img, mate_succ, n)
    out: dict[str, Verdict] = {}
    for i, img in enumerate(images):
        if i in loose or mate_img[i] is None:
            continue
        mine = mate_img[i]
        fits = {mine}
        for j in adj[i]:
            k = mate_succ[j]
            if j != mine and (k is None or k in movable or scc[k] == scc[i]):
                fits.add(j)
        pids = sorted({successors[j].pid for j in fits})
        exes = sorted({successors[j].exe for j in fits})
        if len(fits) == 1:
            s = successors[mine]
            out[img.name] = Verdict(s.pid, s.exe, [s.pid], gap_s=s.start_s - img.last_s)
        else:
            out[img.name] = Verdict(None, " or ".join(exes), pids)
    return out


def _max_matching(adj: list[list[int]], n_succ: int) -> tuple[list[int | None], list[int | None]]:
    """A maximum bipartite matching (augmenting paths, iterative)."""
    mate_img: list[int | None] = [None] * len(adj)
    mate_succ: list[int | None] = [None] * n_succ
    for root in range(len(adj)):
        # depth-first search for an augmenting path from ``root``; a frame is [image, next edge, successor taken]
        seen: set[int] = set()
        stack: list[list] = [[root, 0, None]]
        while stack:
            fr = stack[-1]
            i, advanced = fr[0], False
            while fr[1] < len(adj[i]):
                j = adj[i][fr[1]]
                fr[1] += 1
                if j in seen:
                    continue
                seen.add(j)
                fr[2] = j
                if mate_succ[j] is None:  # augment: each image on the path takes the successor it reached
                    for ii, _, jj in stack:
                        mate_img[ii], mate_succ[jj] = jj, ii
                    stack = []
                else:
                    stack.append([mate_succ[j], 0, None])
                advanced = True
                break
            if not advanced:
                stack.pop()
    return mate_img, mate_succ


def _components(adj, mate_img, mate_succ, n: int) -> list[int]:
    """Strongly connected components of the alternating graph over matched images (i -> the mate of each other
    successor i could take): i and k in one component lie on an alternating cycle (Tarjan, iterative)."""
    succ_of = [[mate_succ[j] for j in adj[i] if j != mate_img[i] and mate_succ[j] is not None]
               if mate_img[i] is not None else [] for i in range(n)]
    index: list[int | None] = [None] * n
    low = [0] * n
    comp = [-1] * n
    on: set[int] = set()
    st: list[int] = []
    counter = 0
    ncomp = 0
    for root in range(n):
        if index[root] is not None:
            continue
        work = [(root, 0)]
        while work:
            v, pos = work.pop()
            if pos == 0:
                index[v] = low[v] = counter
                counter += 1
                st.append(v)
                on.add(v)
            recurse = False
            while pos < len(succ_of[v]):
                w = succ_of[v][pos]
                pos += 1
                if index[w] is None:
                    work.append((v, pos))
                    work.append((w, 0))
                    recurse = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if recurse:
                continue
            if low[v] == index[v]:
                while True:
                    w = st.pop()
                    on.discard(w)
                    comp[w] = ncomp
                    if w == v:
                        break
                ncomp += 1
            if work:
                u = work[-1][0]
                low[u] = min(low[u], low[v])
    return comp
