"""Stable hashes for paths, user, executable and host names, for sharing reports.

``--obfuscate`` must hold for *every* output (terminal, JSON, HTML, compare),
so it is applied to the inputs of the renderers, not inside each renderer:

    obf = Obfuscator.for_profile(profile)
    profile = obfuscate_profile(profile, obf)
    findings = obfuscate_findings(findings, obf)
    report = obf.scrub(report)          # any dict/list/str, e.g. the JSON report

Hashes are stable: the same name gives the same token in every report made
with the same salt (default: none), so two obfuscated reports of a job before
and after a change can still be compared file by file.  Paths are hashed one
component at a time, keeping ``/`` and a short file extension (``.h5``,
``.zarr``, ``.partial``), so the directory structure and file types - which a
diagnosis needs - survive while every name is gone.

Unsalted hashes of short, guessable names (a user name) can be reversed by
trying candidates; pass a secret ``salt`` when that matters.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from typing import Any, Iterable

import numpy as np

from ..findings import Finding
from ..profile import JobInfo, JobProfile, LoadIssue, ProgramInfo, Table

_EXT_RE = re.compile(r"^(.+?)((?:\.[A-Za-z][A-Za-z0-9]{0,7})+)$")
# an absolute path inside free text (not "MiB/s" or "read/write": the slash must not follow a word character)
_PATH_IN_TEXT = re.compile(r"(?<![\w.~:/])/(?:[^\s/'\"<>,;()\[\]{}|]+/?)+")
_KEEP_COMPONENTS = {"", ".", ".."}
# a component that is already a token (so obfuscating twice changes nothing)
_TOKEN_RE = re.compile(r"^p[0-9a-f]{8}(?:\.[A-Za-z][A-Za-z0-9]{0,7})*$")
_WORD_TOKEN_RE = re.compile(r"^(?:user|host|exe|arg)-[0-9a-f]{8}$")


def _digest(salt: str, kind: str, value: str, n: int = 10) -> str:
    return hashlib.sha256(f"{salt}\0{kind}\0{value}".encode("utf-8", "surrogateescape")).hexdigest()[:n]


class Obfuscator:
    """Maps sensitive names to stable tokens and scrubs them from any text."""

    def __init__(self, salt: str = "") -> None:
        self.salt = salt
        self._known: dict[str, str] = {}  # original -> token, for scrubbing free text
        self._words: dict[str, str] = {}  # short names replaced only as whole words
        self._word_re: re.Pattern | None = None
        self._known_re: re.Pattern | None = None

    # -- single names ---------------------------------------------------
    def component(self, name: str) -> str:
        if name in _KEEP_COMPONENTS or _TOKEN_RE.match(name):
            return name
        m = _EXT_RE.match(name)
        stem, ext = (m.group(1), m.group(2)) if m else (name, "")
        return "p" + _digest(self.salt, "path", stem, 8) + ext

    def path(self, path: str) -> str:
        """Hash every component; keep slashes, extensions and ``<STDOUT>``-style pseudo names."""
        if not path or (path.startswith("<") and path.endswith(">")):
            return path
        out = "/".join(self.component(c) for c in path.split("/"))
        self._remember(path, out)
        return out

    def user(self, user: str | None) -> str | None:
        if not user or _WORD_TOKEN_RE.match(user):
            return user
        tok = "user-" + _digest(self.salt, "user", user, 8)
        self._remember_word(user, tok)
        return tok

    def host(self, host: str | None) -> str | None:
        if not host or _WORD_TOKEN_RE.match(host):
            return host
        tok = "host-" + _digest(self.salt, "host", host, 8)
        self._remember_word(host, tok)
        return tok

    def exe(self, exe: str | None) -> str | None:
        """An executable: a path is hashed like any path; its base name is also scrubbed from text."""
        if not exe or _WORD_TOKEN_RE.match(exe):
            return exe
        if "/" in exe:
            base = exe.rstrip("/").rsplit("/", 1)[-1]
            out = self.path(exe)
            if base:
                self._remember_word(base, out.rsplit("/", 1)[-1])
            return out
        tok = "exe-" + _digest(self.salt, "exe", exe, 8)
        self._remember_word(exe, tok)
        return tok

    def args(self, args: str) -> str:
        """Command-line arguments: options stay, every other word is hashed."""
        out = []
        for word in args.split():
            if _WORD_TOKEN_RE.match(word) or (word.startswith("/") and all(_TOKEN_RE.match(c) or c in _KEEP_COMPONENTS for c in word.split("/"))):
                out.append(word)
            elif word.startswith("-") and "/" not in word and "=" not in word:
                out.append(word)
            elif word.startswith("-") and "=" in word:
                k, v = word.split("=", 1)
                out.append(k + "=" + (self.path(v) if "/" in v else "arg-" + _digest(self.salt, "arg", v, 8)))
            elif "/" in word:
                out.append(self.path(word))
            else:
                out.append("arg-" + _digest(self.salt, "arg", word, 8))
        return " ".join(out)

    def variable(self, name: str | None) -> str | None:
        """An array (variable) name, e.g. from a Zarr store: hashed wherever it appears as a word."""
        if not name or _WORD_TOKEN_RE.match(name):
            return name
        tok = "var-" + _digest(self.salt, "var", name, 6)
        self._remember_word(name, tok)
        return tok

    def worker(self, address: str) -> str:
        """A Dask worker address ``tcp://host:port``: the host is hashed, the port kept."""
        m = re.match(r"^([a-z]+://)?\[?([^\]]+?)\]?(:\d+)?$", address or "")
        if not m:
            return address
        return (m.group(1) or "") + (self.host(m.group(2)) or "") + (m.group(3) or "")

    # -- free text ------------------------------------------------------
    def _remember(self, original: str, token: str) -> None:
        if len(original) >= 2 and original not in self._known:
            self._known[original] = token
            self._known_re = None

    def _remember_word(self, original: str, token: str) -> None:
        if len(original) >= 2 and original not in self._words:
            self._words[original] = token
            self._word_re = None

    def text(self, s: str) -> str:
        """Replace known names, then any other absolute path, in a string (one pass: no token is hashed twice)."""
        if not s:
            return s
        if self._known_re is None:
            alts = "|".join(re.escape(a) for a in sorted(self._known, key=len, reverse=True))
            self._known_re = re.compile((f"(?P<k>{alts})|" if alts else "") + f"(?P<p>{_PATH_IN_TEXT.pattern})")

        def repl(m: re.Match) -> str:
            if m.lastgroup == "k":
                return self._known[m.group(0)]
            return self.path(m.group(0))

        s = self._known_re.sub(repl, s)
        if self._words:
            if self._word_re is None:
                alts = sorted(self._words, key=len, reverse=True)
                self._word_re = re.compile(r"(?<![A-Za-z0-9])(" + "|".join(re.escape(a) for a in alts) + r")(?![A-Za-z0-9])")
            s = self._word_re.sub(lambda m: self._words[m.group(1)], s)
        return s

    def scrub(self, obj: Any) -> Any:
        """Recursively scrub every string (keys too) of a JSON-like object."""
        if isinstance(obj, str):
            return self.text(obj)
        if isinstance(obj, dict):
            return {self.scrub(k) if isinstance(k, str) else k: self.scrub(v) for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            return type(obj)(self.scrub(v) for v in obj)
        return obj

    # -- learning a job's names ----------------------------------------
    @classmethod
    def for_profile(cls, profile: JobProfile, salt: str = "") -> "Obfuscator":
        """An obfuscator that knows every sensitive name of a profile (so text can be scrubbed)."""
        obf = cls(salt)
        obf.learn(profile)
        return obf

    def learn(self, profile: JobProfile) -> None:
        job = profile.job
        self.user(job.user)
        for exe in {job.exe, *(p.exe for p in job.programs), *profile.processes["exe"].tolist()}:
            self.exe(exe)
        for h in set(profile.processes["host"].tolist()):
            self.host(h)
        if job.metadata.get("hostname"):
            self.host(job.metadata["hostname"])
        for p in profile.files["path"].tolist():
            self.path(p)
        for p in {*job.logs, *profile.processes["log_path"].tolist()}:
            self.path(p)
        for a in job.arrays:  # Zarr arrays the job touched: the variable names that advice quotes
            self.path(a["path"])
            self.variable(a["path"].rstrip("/").rsplit("/", 1)[-1])


def _map_column(values: np.ndarray, fn) -> np.ndarray:
    cache: dict[Any, Any] = {}
    out = np.empty(len(values), dtype=object)
    for i, v in enumerate(values.tolist()):
        if v not in cache:
            cache[v] = fn(v) if isinstance(v, str) else v
        out[i] = cache[v]
    return out


def obfuscate_profile(profile: JobProfile, obf: Obfuscator | None = None) -> JobProfile:
    """A copy of the profile with every path, user, executable and host name hashed."""
    obf = obf or Obfuscator.for_profile(profile)
    job: JobInfo = profile.job
    new_job = dataclasses.replace(
        job,
        uid=None,
        user=obf.user(job.user),
        exe=" + ".join(obf.exe(e) or "" for e in job.exe.split(" + ")) if job.exe else job.exe,
        args=obf.args(job.args),
        mounts=[(obf.path(m), t) for m, t in job.mounts],
        metadata={k: obf.text(v) for k, v in job.metadata.items()},
        programs=[ProgramInfo(exe=obf.exe(p.exe) or "", args=obf.args(p.args), nprocs=p.nprocs, logs=[obf.path(x) for x in p.logs]) for p in job.programs],
        logs=[obf.path(x) for x in job.logs],
        blind_spots=[obf.text(x) for x in job.blind_spots],
    )
    procs = profile.processes.with_columns(
        host=_map_column(profile.processes["host"], obf.host),
        exe=_map_column(profile.processes["exe"], obf.exe),
        log_path=_map_column(profile.processes["log_path"], obf.path),
    )
    files = profile.files.with_columns(
        path=_map_column(profile.files["path"], obf.path),
        mount=_map_column(profile.files["mount"], obf.path),
    )
    tasks = profile.tasks
    if len(tasks) and "worker" in tasks:
        tasks = tasks.with_columns(worker=_map_column(tasks["worker"], obf.worker))
    issues = [
        LoadIssue(path=obf.path(i.path), kind=i.kind, cause=obf.text(i.cause), module=i.module,
                  next_step=obf.text(i.next_step) if i.next_step else i.next_step)
        for i in profile.issues_seen
    ]
    return dataclasses.replace(profile, job=new_job, processes=procs, files=files, tasks=tasks, issues_seen=issues)


def obfuscate_findings(findings: Iterable[Finding], obf: Obfuscator) -> list[Finding]:
    return [
        dataclasses.replace(
            f,
            title=obf.text(f.title),
            evidence=obf.scrub(dict(f.evidence)),
            recommendation=obf.text(f.recommendation),
            files=[obf.path(p) for p in f.files],
        )
        for f in findings
    ]


def obfuscate_job(profile: JobProfile, findings: Iterable[Finding], *, salt: str = "", report: dict | None = None):
    """Obfuscate everything a renderer sees: (profile, findings, report-or-None)."""
    obf = Obfuscator.for_profile(profile, salt)
    return (
        obfuscate_profile(profile, obf),
        obfuscate_findings(findings, obf),
        obf.scrub(report) if report is not None else None,
    )


def obfuscate_report(report: dict, *, salt: str = "", obf: Obfuscator | None = None) -> dict:
    """The JSON report (schema iodiag.report/1) with every name hashed, tokens identical to the HTML's.

    Names are learnt from the report's own fields (user, executables, logs,
    mounts, file paths); every other string is then scrubbed.  Obfuscating an
    already obfuscated report changes nothing.
    """
    obf = obf or Obfuscator(salt)
    job = dict(report.get("job") or {})
    obf.user(job.get("user"))
    for prog in job.get("programs") or []:
        obf.exe(prog.get("exe"))
    for e in (job.get("exe") or "").split(" + "):
        obf.exe(e)
    for p in [*(job.get("logs") or []), *(m.get("path", "") for m in job.get("mounts") or [])]:
        obf.path(p)
    for f in report.get("top_files") or []:
        obf.path(f.get("path", ""))
    for f in report.get("findings") or []:
        for p in f.get("files") or []:
            obf.path(p)
    for e in report.get("errors") or []:
        obf.path(e.get("path", ""))
    for f in report.get("findings") or []:  # arrays named in evidence: their paths and variable names
        for key in ("array", "largest_array"):
            v = (f.get("evidence") or {}).get(key)
            if isinstance(v, str) and v:
                obf.path(v)
                obf.variable(v.rstrip("/").rsplit("/", 1)[-1])
    out = obf.scrub(report)
    if "job" in out:
        j = dict(out["job"])
        j["uid"] = None
        if report["job"].get("args"):
            j["args"] = obf.args(report["job"]["args"])
        j["programs"] = [dict(p, args=obf.args(q.get("args") or "")) for p, q in zip(j.get("programs") or [], report["job"].get("programs") or [])]
        out["job"] = j
    return out


def sensitive_names(profile: JobProfile) -> list[str]:
    """Every name --obfuscate must hide (for checks and tests): paths, users, executables, hosts."""
    names: set[str] = set()
    job = profile.job
    if job.user:
        names.add(job.user)
    for e in {job.exe, *profile.processes["exe"].tolist()}:
        if e:
            names.add(e)
            names.add(e.rstrip("/").rsplit("/", 1)[-1])
    names.update(h for h in profile.processes["host"].tolist() if h)
    names.update(p for p in profile.files["path"].tolist() if p and not (p.startswith("<") and p.endswith(">")))
    names.update(p for p in job.logs if p)
    return sorted(n for n in names if len(n) >= 2)
