"""Shared helpers for the HTML/compare tests: corpus paths, a real Dask task
stream, a headless-Chromium driver (DevTools protocol over a pipe).

The tests in this module check the helpers themselves (that the browser
checks can fail), so a broken harness cannot make the report tests pass.
"""

from __future__ import annotations

import base64
import functools
import glob
import json
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO.parent / "shared" / "darshan-logs"

DXT_1024 = "dxt-explorer/sample/*.darshan"
DASK_DXT = "generated/dask-localcluster-2workers-dxt-jobid/*.darshan"
# counters only: no DXT, no HEATMAP (POSIX, MPI-IO, STDIO; 4 processes, shared file)
COUNTERS_ONLY = "darshan-logs/darshan_logs/release_logs/mpi-io-test-ppc64-3.1.2.darshan"
HEATMAP_1PROC = "generated/xarray-nc2zarr-1proc/*.darshan"

def leaked_names(names, text: str) -> list[str]:
    """Names found in a page (embedded images removed; names shorter than 4 characters only as whole words)."""
    import re

    text = re.sub(r"base64,[A-Za-z0-9+/=]+", "", text)
    out = []
    for n in names:
        if len(n) < 4:
            if re.search(r"(?<![A-Za-z0-9])" + re.escape(n) + r"(?![A-Za-z0-9])", text):
                out.append(n)
        elif n in text:
            out.append(n)
    return out


XSS_NAMES = ("<script>alert(1)</script>", '"><img src=x onerror=alert(1)>')


def corpus_logs(pattern: str) -> list[str]:
    logs = sorted(glob.glob(str(CORPUS / pattern)))
    if not logs:
        pytest.skip(f"corpus log {pattern} not found under {CORPUS}")
    return logs


@functools.lru_cache(maxsize=None)
def load(pattern: str):
    from iodiag.analyzers.load import load_job

    return load_job(corpus_logs(pattern))


# -- a real Dask task stream ---------------------------------------------
def _slow_inc(x: int) -> int:
    import time as _t

    _t.sleep(1.6 if x == 5 else 0.04)  # task 5 is the straggler
    return x + 1


def _double(x: int) -> int:
    return 2 * x


@functools.lru_cache(maxsize=None)
def real_task_stream():
    """Run a small distributed LocalCluster (2 worker processes x 2 threads); return (records, worker pids, slow key)."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=2, processes=True, dashboard_address=":0",
                                  silence_logs=50) as cluster, distributed.Client(cluster) as client:
        pids = client.run(os.getpid)
        with distributed.get_task_stream(client) as ts:
            incs = client.map(_slow_inc, range(16), pure=False)
            doubles = client.map(_double, incs, pure=False)
            client.gather(doubles)
        slow_key = str(incs[5].key)
    return list(ts.data), dict(pids), slow_key


def task_table_from_stream(records, pids: dict, *, pid_map: dict | None = None, shift_s: float = 0.0):
    """Dask task-stream records -> the profile's ``tasks`` Table (key, prefix, worker, pid, thread, phase, start_s, end_s)."""
    from dask.utils import key_split

    from iodiag.profile import Table

    cols = {k: [] for k in ("key", "prefix", "worker", "pid", "thread", "phase", "start_s", "end_s")}
    for rec in records:
        key = str(rec["key"])
        for ss in rec["startstops"]:
            worker = rec["worker"]
            pid = pids.get(worker, -1)
            cols["key"].append(key)
            cols["prefix"].append(key_split(rec["key"]))
            cols["worker"].append(worker)
            cols["pid"].append((pid_map or {}).get(pid, pid))
            cols["thread"].append(int(rec.get("thread") or -1))
            cols["phase"].append(ss["action"])
            cols["start_s"].append(ss["start"] + shift_s)
            cols["end_s"].append(ss["stop"] + shift_s)
    return Table({k: np.asarray(v, dtype=object if k in ("key", "prefix", "worker", "phase") else ("i8" if k in ("pid", "thread") else "f8"))
                  for k, v in cols.items()})


@functools.lru_cache(maxsize=None)
def dask_profile():
    """The corpus Dask job (4 Darshan logs with DXT) plus a real task stream.

    The task stream comes from a LocalCluster run here, not from the run that
    wrote those logs (the collector that captures both together lives on
    another branch).  To overlay them, the two test workers' pids are mapped
    onto the two worker logs' pids (in sorted order) and task times are shifted
    so that the stream starts when the first worker log starts.  The I/O and
    the tasks are each real; only their alignment is made here.
    """
    import dataclasses

    prof = load(DASK_DXT)
    records, pids, slow_key = real_task_stream()
    workers = sorted(pids)
    worker_logs = [pid for pid, path in zip(prof.processes["pid"].tolist(), prof.processes["log_path"].tolist())
                   if pid in (2070, 2073)]
    pid_map = {pids[w]: lp for w, lp in zip(workers, sorted(worker_logs))}
    t_first = min(ss["start"] for r in records for ss in r["startstops"])
    start = float(prof.processes["start_s"][np.isin(prof.processes["pid"], worker_logs)].min())
    tasks = task_table_from_stream(records, pids, pid_map=pid_map, shift_s=start - t_first)
    return dataclasses.replace(prof, tasks=tasks), slow_key


def xss_profile():
    """A real small profile whose file paths are replaced by hostile names.

    The embedded collector that would record such names from a real run is on
    another branch; here the files table of the real 1024-process DXT log
    (3 files) is rewritten so the two hostile names (and a directory holding
    one) reach every section that shows paths: summary, tables, plots, findings.
    """
    import dataclasses

    prof = load(DXT_1024)
    paths = prof.files["path"].copy()
    order = np.argsort([-len(p) for p in paths.tolist()])  # the big .h5 file first
    new = paths.copy()
    new[order[0]] = f"/scratch/{XSS_NAMES[1]}/{XSS_NAMES[0]}.h5"
    new[order[1]] = XSS_NAMES[0]
    new[order[2]] = XSS_NAMES[1]
    files = prof.files.with_columns(path=new)
    job = dataclasses.replace(prof.job, exe=f"/bin/{XSS_NAMES[0]}", args=XSS_NAMES[1])
    return dataclasses.replace(prof, files=files, job=job)


# -- headless Chromium over the DevTools pipe ---------------------------
def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def require_chromium() -> str:
    path = find_chromium()
    if path is None:
        pytest.skip("headless Chromium not installed (Debian: apt-get install chromium); browser checks skipped")
    return path


class Browser:
    """One headless Chromium driven over --remote-debugging-pipe (no network port, no extra package)."""

    FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--disable-dev-shm-usage", "--remote-debugging-pipe", "--hide-scrollbars", "--mute-audio")

    def __init__(self, exe: str) -> None:
        self._tmp = tempfile.mkdtemp(prefix="iodiag-chromium-")
        import fcntl

        a, self._to_child_w = os.pipe()
        self._from_child_r, b = os.pipe()
        # move the child's ends above 4 so that wiring them to 3 and 4 cannot clobber one another
        to_child_r, from_child_w = fcntl.fcntl(a, fcntl.F_DUPFD, 10), fcntl.fcntl(b, fcntl.F_DUPFD, 10)
        os.close(a)
        os.close(b)

        def wire():  # Chromium reads DevTools commands on fd 3 and answers on fd 4
            os.dup2(to_child_r, 3)
            os.dup2(from_child_w, 4)

        self.proc = subprocess.Popen(
            [exe, *self.FLAGS, f"--user-data-dir={self._tmp}", "about:blank"],
            close_fds=False, preexec_fn=wire,
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        os.close(to_child_r)
        os.close(from_child_w)
        self._id = 0
        self._q: queue.Queue = queue.Queue()
        self._responses: dict[int, dict] = {}
        self.events: list[dict] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        buf = b""
        while True:
            try:
                chunk = os.read(self._from_child_r, 1 << 16)
            except OSError:
                break
            if not chunk:
                break
            buf += chunk
            while b"\0" in buf:
                msg, buf = buf.split(b"\0", 1)
                self._q.put(json.loads(msg))
        self._q.put(None)

    def _pump(self, timeout: float) -> bool:
        try:
            msg = self._q.get(timeout=timeout)
        except queue.Empty:
            return False
        if msg is None:
            raise RuntimeError("Chromium closed the DevTools pipe")
        if "id" in msg:
            self._responses[msg["id"]] = msg
        else:
            self.events.append(msg)
            if msg.get("method") == "Page.javascriptDialogOpening":
                # a dialog blocks the page: dismiss it (and remember it happened)
                self.send("Page.handleJavaScriptDialog", {"accept": False}, session=msg.get("sessionId"), wait=False)
        return True

    def send(self, method: str, params: dict | None = None, *, session: str | None = None, wait: bool = True, timeout: float = 60.0):
        self._id += 1
        mid = self._id
        msg = {"id": mid, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._to_child_w, json.dumps(msg).encode() + b"\0")
        if not wait:
            return None
        deadline = time.monotonic() + timeout
        while mid not in self._responses:
            if time.monotonic() > deadline:
                raise TimeoutError(f"no answer to {method}")
            self._pump(0.2)
        resp = self._responses.pop(mid)
        if "error" in resp:
            raise RuntimeError(f"{method}: {resp['error']}")
        return resp.get("result", {})

    def wait_event(self, method: str, session: str, timeout: float = 60.0) -> dict:
        deadline = time.monotonic() + timeout
        seen = 0
        while True:
            for ev in self.events[seen:]:
                if ev.get("method") == method and ev.get("sessionId") == session:
                    return ev
            seen = len(self.events)
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {method} event")
            self._pump(0.2)

    def settle(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self._pump(max(0.0, min(0.1, end - time.monotonic())))

    def load(self, path: Path, *, width: int = 1100, screenshot: Path | None = None) -> dict:
        """Open a file, wait for load, collect errors, scripts, dialogs, images, text and a full-page screenshot."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Debugger"):
            self.send(f"{domain}.enable", session=session)
        self.send("Emulation.setDeviceMetricsOverride", {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": False}, session=session)
        first = len(self.events)
        self.send("Page.navigate", {"url": path.resolve().as_uri()}, session=session)
        self.wait_event("Page.loadEventFired", session)
        self.settle(0.5)
        page_events = [e for e in self.events[first:] if e.get("sessionId") == session]
        scripts = [e["params"] for e in page_events if e.get("method") == "Debugger.scriptParsed"]
        probe = (
            "JSON.stringify({"
            "images: Array.from(document.images).map(i => ({id: i.closest('figure') ? i.closest('figure').id : '', src: i.getAttribute('src').slice(0, 40),"
            " w: i.naturalWidth, h: i.naturalHeight, cw: i.clientWidth, ch: i.clientHeight, complete: i.complete})),"
            "script_elements: document.querySelectorAll('script').length,"
            "handlers: Array.from(document.querySelectorAll('*')).filter(e => Array.from(e.attributes).some(a => a.name.startsWith('on'))).length,"
            "text: document.body ? document.body.innerText : '',"
            "height: document.documentElement.scrollHeight, title: document.title})"
        )
        info = json.loads(self.send("Runtime.evaluate", {"expression": probe, "returnByValue": True}, session=session)["result"]["value"])
        # inline SVG plots: rendered box, data marks with a non-zero box, and every embedded raster decoded by the browser
        svg_probe = (
            "(async () => JSON.stringify(await Promise.all(Array.from(document.querySelectorAll('figure svg')).map(async s => {"
            " const r = s.getBoundingClientRect(); const marks = Array.from(s.querySelectorAll('.mark'));"
            " const rasters = await Promise.all(Array.from(s.querySelectorAll('image')).map(im => new Promise(done => {"
            "   const i = new Image(); i.onload = () => done([i.naturalWidth, i.naturalHeight]); i.onerror = () => done([0, 0]);"
            "   i.src = im.getAttribute('href'); })));"
            " return {id: s.closest('figure').id, w: r.width, h: r.height, marks: marks.length,"
            "  drawn: marks.filter(m => { const b = m.getBoundingClientRect(); return b.width > 0 && b.height > 0; }).length,"
            "  rasters: rasters}; }))))()"
        )
        info["svgs"] = json.loads(self.send("Runtime.evaluate", {"expression": svg_probe, "returnByValue": True, "awaitPromise": True},
                                            session=session)["result"]["value"])
        errors = []
        for e in page_events:
            m, p = e.get("method"), e.get("params", {})
            if m == "Runtime.exceptionThrown":
                errors.append(("exception", json.dumps(p.get("exceptionDetails", {}))[:300]))
            elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                errors.append(("console", json.dumps(p.get("args", []))[:300]))
            elif m == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                errors.append(("log", p["entry"].get("text", "")[:300]))
        dialogs = [e["params"] for e in page_events if e.get("method") == "Page.javascriptDialogOpening"]
        if screenshot is not None:
            height = min(int(info["height"]), 16000)
            self.send("Emulation.setDeviceMetricsOverride", {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}, session=session)
            self.settle(0.2)
            shot = self.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True}, session=session)
            screenshot.write_bytes(base64.b64decode(shot["data"]))
        self.send("Target.closeTarget", {"targetId": target})
        return {"errors": errors, "scripts": scripts, "dialogs": dialogs, **info}

    def close(self) -> None:
        try:
            self.send("Browser.close", wait=False)
            self.proc.wait(timeout=10)
        except Exception:  # noqa: BLE001 - best effort, then kill our own child
            self.proc.kill()
            self.proc.wait()
        for fd in (self._to_child_w, self._from_child_r):
            try:
                os.close(fd)
            except OSError:
                pass
        shutil.rmtree(self._tmp, ignore_errors=True)


@pytest.fixture(scope="module")
def browser():
    b = Browser(require_chromium())
    try:
        yield b
    finally:
        b.close()


def screenshot_dir(tmp_path: Path) -> Path:
    """Screenshots go to $IODIAG_SCREENSHOT_DIR when set (to look at them), else to the test's tmp dir."""
    d = os.environ.get("IODIAG_SCREENSHOT_DIR")
    if d:
        Path(d).mkdir(parents=True, exist_ok=True)
        return Path(d)
    return tmp_path


# -- the harness must be able to fail -------------------------------------
@pytest.mark.chromium
def test_browser_harness_sees_console_errors_and_scripts(browser, tmp_path):
    page = tmp_path / "bad.html"
    page.write_text("<!DOCTYPE html><html><body><p>x</p><script>console.error('boom'); undefinedFunction();</script>"
                    "<img src=x onerror=alert(1)></body></html>")
    r = browser.load(page)
    kinds = {k for k, _ in r["errors"]}
    assert "console" in kinds and "exception" in kinds
    assert r["scripts"], "scriptParsed events must be seen for a page with a script"
    assert r["dialogs"] and r["dialogs"][0]["message"] == "1"
    assert r["script_elements"] == 1 and r["handlers"] == 1


@pytest.mark.chromium
def test_browser_harness_sees_broken_images(browser, tmp_path):
    page = tmp_path / "img.html"
    page.write_text('<!DOCTYPE html><html><body><img id="a" src="data:image/png;base64,AAAA"></body></html>')
    r = browser.load(page)
    assert r["images"][0]["w"] == 0  # a broken image has no natural size: the report test's size check can fail


@pytest.mark.chromium
def test_browser_harness_sees_empty_svgs_and_broken_rasters(browser, tmp_path):
    page = tmp_path / "svg.html"
    page.write_text('<!DOCTYPE html><html><body>'
                    '<figure id="empty"><svg viewBox="0 0 10 10" width="0" height="0"><rect class="mark" width="5" height="5"/></svg></figure>'
                    '<figure id="flat"><svg viewBox="0 0 100 100" width="100" height="100"><rect class="mark" width="0" height="5"/>'
                    '<image href="data:image/png;base64,AAAA" width="10" height="10"/></svg></figure></body></html>')
    r = browser.load(page)
    svgs = {s["id"]: s for s in r["svgs"]}
    assert svgs["empty"]["w"] == 0 and svgs["empty"]["h"] == 0  # a plot squashed to nothing is seen
    assert svgs["flat"]["w"] == 100 and svgs["flat"]["marks"] == 1 and svgs["flat"]["drawn"] == 0
    assert svgs["flat"]["rasters"] == [[0, 0]]  # an undecodable embedded PNG is seen
