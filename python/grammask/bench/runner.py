"""Supervisor: feeds schemas to one isolated worker process per engine and classifies outcomes.

Takes the engine names, the tokenizer folder and the list of MaskBench files; produces one record
per (schema, engine) plus the raw mask/accept/TTFM times per engine. Each worker is a spawned
process (``worker.worker_main``) that the supervisor watches while a schema runs:

- no answer within ``timeout_s`` -> the worker is killed, the schema counts as ``timeout``;
- resident memory (``/proc/PID/status`` VmRSS) above ``memory_mb``, or a MemoryError in the
  worker, or death by SIGKILL that we did not send -> ``oom``;
- any other death (segfault, abort) -> ``crash`` (the signal or exit code is recorded).

A killed or dead worker is replaced before the next schema by a fresh fork of the engine's
template process, which was set up once (see ``worker``): a replacement costs milliseconds, where
setting an engine up from scratch costs 1.5-6 s of CPU (imports, tokenizer, the engine's
tokenizer tables), and with a few percent of schemas timing out that was a large part of a run.
Engines run one after the other on each schema (never in parallel), so their timings see the same
machine load.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import resource
import signal
import sys
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from multiprocessing.reduction import recv_handle
from pathlib import Path
from typing import Any

import numpy as np

from .data import Task
from .worker import worker_main

#: How long a worker may take to import its engine and build its tokenizer tables.
INIT_TIMEOUT_S = 600.0
_POLL_S = 0.05


class EngineUnavailable(RuntimeError):
    """The engine's worker could not start (library missing, setup error)."""


def _rss_mb(pid: int) -> float | None:
    """Resident set size of `pid` in MiB, or None where /proc is not available."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        return None
    return None


def _limit_address_space(memory_mb: int) -> None:
    """Fallback for systems without /proc: cap the worker's address space (set in the child)."""
    if not Path("/proc/self/status").exists():
        limit = memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _child_entry(conn, engine, tokenizer_dir, log_path, memory_mb, bitmask_per_request):
    _limit_address_space(memory_mb)
    worker_main(conn, engine, tokenizer_dir, log_path, bitmask_per_request)


@dataclass
class EngineWorker:
    """One engine's worker: a template process set up once, and the runner forked from it that
    runs the schemas (``worker``). A runner that dies or is killed is replaced by a new fork; the
    template is set up again only if it dies itself."""

    engine: str
    tokenizer_dir: str
    memory_mb: int
    log_path: str | None = None
    #: Each matcher allocates its bitmask inside the TTFM (else one pooled bitmask, reused).
    bitmask_per_request: bool = False
    version: str = "?"
    restarts: int = 0
    _proc: Any = None  # the template process
    _conn: Any = None  # control connection to the template
    _ready: bool = False
    _spawned_at: float = 0.0
    _runner_pid: int | None = None
    _runner: Any = None  # connection to the runner
    _ctx: Any = field(default_factory=lambda: mp.get_context("spawn"))

    def start(self) -> None:
        """Start the template (unless one is starting), wait until set up, and fork a runner."""
        if self._proc is None:
            self.spawn()
        self._wait_ready()
        if self._runner is None:
            self._fork_runner()

    def spawn(self) -> None:
        """Start the template process without waiting for its engine setup."""
        parent, child = self._ctx.Pipe()
        p = self._ctx.Process(
            target=_child_entry,
            args=(child, self.engine, self.tokenizer_dir, self.log_path, self.memory_mb,
                  self.bitmask_per_request),
            daemon=True,
        )
        p.start()
        child.close()
        self._proc, self._conn, self._ready = p, parent, False
        self._spawned_at = time.monotonic()

    def _respawn(self, kill: bool = True) -> int | None:
        """Replace the runner at once (killing it first unless it ended) with a new fork, or
        with a new template if the template died too (its setup, untimed, then overlaps other
        work). Returns the old runner's exit code, None when the template died with it."""
        code = self._end_runner(kill)
        self.restarts += 1
        if code is not None:
            try:
                self._fork_runner()
                return code
            except EngineUnavailable:
                pass
        self.kill()
        self.spawn()
        return None

    def _wait_ready(self) -> None:
        if self._ready:
            return
        p, parent = self._proc, self._conn
        deadline = self._spawned_at + INIT_TIMEOUT_S
        while True:
            if parent.poll(_POLL_S):
                try:
                    kind, payload = parent.recv()
                except EOFError:
                    kind, payload = "init_error", f"worker died during setup ({self._exit_desc()})"
                if kind == "ready":
                    self.version = payload["version"]
                    self._ready = True
                    return
                self.kill()
                raise EngineUnavailable(str(payload).strip())
            if not p.is_alive():
                self.kill()
                raise EngineUnavailable(f"worker died during setup ({self._exit_desc()})")
            if time.monotonic() > deadline:
                self.kill()
                raise EngineUnavailable(f"worker setup took over {INIT_TIMEOUT_S:.0f} s")

    def _fork_runner(self) -> None:
        """Ask the template for a runner and take over the runner's socket."""
        try:
            self._conn.send("fork")
            kind = None
            while kind != "forked":  # skipping a late ("exited", code) of an earlier runner
                if not self._conn.poll(INIT_TIMEOUT_S):
                    raise EngineUnavailable("the worker template did not fork a runner")
                kind, pid = self._conn.recv()
            fd = recv_handle(self._conn)
        except (OSError, EOFError) as e:
            raise EngineUnavailable(f"the worker template is gone ({self._exit_desc()})") from e
        self._runner_pid, self._runner = pid, Connection(fd)

    def _end_runner(self, kill: bool = True) -> int | None:
        """Kill the runner (unless it has ended already) and return its exit code from the
        template; None when the template cannot tell (it died as well)."""
        if self._runner is None:
            return None
        if kill:
            try:
                os.kill(self._runner_pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self._runner.close()
        self._runner = None
        code = None
        try:
            if self._conn.poll(10):
                kind, code = self._conn.recv()
                assert kind == "exited", kind
        except (OSError, EOFError):
            pass
        self._runner_pid = None
        return code

    def _exit_desc(self, code: int | None = None) -> str:
        if code is None:
            code = self._proc.exitcode if self._proc is not None else None
        if code is None:
            return "still running"
        if code < 0:
            try:
                return f"signal {signal.Signals(-code).name}"
            except ValueError:
                return f"signal {-code}"
        return f"exit code {code}"

    def kill(self) -> None:
        self._end_runner()
        if self._proc is not None:
            if self._proc.is_alive():
                self._proc.kill()
            self._proc.join(10)
        if self._conn is not None:
            self._conn.close()
        self._proc = self._conn = None

    def stop(self) -> None:
        if self._runner is not None:
            try:
                self._runner.send(None)
            except OSError:
                pass
            self._end_runner(kill=False)
        if self._proc is not None and self._proc.is_alive():
            try:
                self._conn.send(None)
                self._proc.join(5)
            except OSError:
                pass
        self.kill()

    def run(self, task: Task, timeout_s: float) -> dict[str, Any]:
        """Run one schema; always returns a result dict with a ``status`` key."""
        if self._proc is None:
            self.restarts += 1
        self.start()
        assert self._runner is not None
        start = time.monotonic()
        compiled_seen = False
        ttfm = None
        try:
            self._runner.send(task)
        except OSError:
            return self._died(start, compiled_seen, ttfm)
        while True:
            ready = wait([self._runner, self._conn], _POLL_S)
            if self._runner in ready:
                try:
                    kind, payload = self._runner.recv()
                except EOFError:
                    return self._died(start, compiled_seen, ttfm)
                if kind == "compiled":
                    compiled_seen, ttfm = True, payload
                    continue
                if kind == "oom":
                    self._respawn()
                    return _abnormal("oom", start, compiled_seen, ttfm, "MemoryError in worker")
                res = payload
                res["status"] = _classify(res)
                res["wall_s"] = time.monotonic() - start
                return res
            if ready:  # the template spoke first: the runner ended, or the template died
                return self._died(start, compiled_seen, ttfm)
            if time.monotonic() - start > timeout_s:
                self._respawn()
                return _abnormal("timeout", start, compiled_seen, ttfm, f"over {timeout_s:g} s")
            rss = _rss_mb(self._runner_pid)
            if rss is not None and rss > self.memory_mb:
                self._respawn()
                return _abnormal(
                    "oom", start, compiled_seen, ttfm, f"RSS {rss:.0f} MiB > {self.memory_mb} MiB"
                )

    def _died(self, start, compiled_seen, ttfm) -> dict[str, Any]:
        code = self._respawn(kill=False)
        if code is None:
            status, desc = "crash", "worker died: its template process died as well"
        else:  # a SIGKILL we did not send comes from the kernel's OOM killer
            status = "oom" if code == -signal.SIGKILL else "crash"
            desc = f"worker died: {self._exit_desc(code)}"
        return _abnormal(status, start, compiled_seen, ttfm, desc)


def _classify(res: dict[str, Any]) -> str:
    if res["compile_error"] is not None:
        return "compile_error"
    bad = res["valid_rejected"] or res["invalid_accepted"] or res["disagreements"]
    return "fail" if bad or res["matcher_errors"] else "pass"


def _abnormal(status: str, start: float, compiled: bool, ttfm, detail: str) -> dict[str, Any]:
    return {
        "status": status,
        "detail": detail,
        "compiled": compiled,
        "ttfm_us": ttfm,
        "compile_error": None,
        "valid_rejected": 0,
        "invalid_accepted": 0,
        "disagreements": 0,
        "matcher_errors": 0,
        "first_failure": None,
        "mask_us": np.zeros(0),
        "accept_us": np.zeros(0),
        "mask_cpu_us": np.zeros(0),
        "wall_s": time.monotonic() - start,
    }


def progress(total: int, desc: str):
    """A tqdm bar when tqdm is installed, else a plain stderr line updated in place."""
    try:
        from tqdm import tqdm

        return tqdm(total=total, desc=desc, unit="schema", file=sys.stderr)
    except ImportError:
        return _PlainProgress(total, desc)


class _PlainProgress:
    def __init__(self, total: int, desc: str):
        self.total, self.desc, self.n, self.t0 = total, desc, 0, time.monotonic()
        self.postfix = ""

    def update(self, k: int = 1) -> None:
        self.n += k
        el = time.monotonic() - self.t0
        sys.stderr.write(f"\r{self.desc}: {self.n}/{self.total} schemas, {el:.0f} s {self.postfix}")
        sys.stderr.flush()

    def set_postfix_str(self, s: str) -> None:
        self.postfix = s

    def close(self) -> None:
        sys.stderr.write("\n")


def worker_log_path(out_dir: Path, engine: str) -> str:
    return str(out_dir / f"worker-{engine}.log")


def environment_note() -> dict[str, Any]:
    """CPU model, core count and memory of this machine, for the report."""
    info: dict[str, Any] = {"nproc": os.cpu_count(), "python": sys.version.split()[0]}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal"):
                    info["memory_gib"] = round(int(line.split()[1]) / 1024 / 1024, 1)
                    break
    except OSError:
        pass
    return info
