"""Engine worker: runs the MaskBench protocol for one engine, one schema at a time.

Runs in its own process (started by ``runner``), so a segfault, hang or memory blow-up inside
an engine costs one schema. The process sets the engine up once (imports, tokenizer, the engine's
tokenizer tables: 1.5-6 s of CPU) and then serves as a template: on each ``"fork"`` request it
forks a *runner*, a copy of itself with the engine already set up, which serves tasks over a
socket of its own. A runner killed after a timeout or an out-of-memory is replaced by a new fork
in milliseconds instead of a new process set up from scratch. Messages:

- template -> supervisor: ``("ready", {"engine", "version"})`` once the engine is set up, or
  ``("init_error", text)``; per fork: ``("forked", pid)`` followed by the runner's socket (passed
  as a file descriptor), and ``("exited", exitcode)`` when that runner ends (exit codes as
  ``multiprocessing.Process.exitcode``: negative for a signal);
- runner -> supervisor, per task (``data.Task``): ``("compiled", ttfm_us)`` as soon as
  time-to-first-mask is known (so the supervisor can tell a compile hang from a matching hang),
  then ``("done", result)``, or ``("oom", text)`` after a MemoryError (the runner then exits).

The template never runs a task, so every runner starts from the same state: the engine set up and
nothing compiled. It forks only while no other thread of its own is busy (the engines start no
threads during set-up; numpy's BLAS pool is idle and fork-safe).

Protocol per schema (``run_task``): TTFM = compile + matcher creation + first mask, the mask
written into a bitmask the adapter allocated before (``engines.BitmaskPool``; allocated per
matcher, inside the TTFM, with ``bitmask_per_request``). Then for every
instance, on a fresh matcher: for each token, compute the mask (timed), check the token against it,
accept it (timed); a mask/accept disagreement is counted; the first rejected token ends the
instance. If every token was accepted, the mask is computed once more and a stop token must be
allowed and accepted. A valid instance that is not accepted through the stop token is "valid
rejected"; an invalid one that is, "invalid accepted".
"""

from __future__ import annotations

import os
import resource
import socket
import sys
import time
import traceback
from multiprocessing.connection import Connection
from multiprocessing.reduction import send_handle
from typing import Any

import numpy as np

from .data import Task

_ns = time.perf_counter_ns


def run_task(adapter, task: Task, send, fill_cpu: list | None = None) -> dict[str, Any]:
    """Run one schema; ``send`` receives the ("compiled", ttfm_us) message. Returns the result.

    ``mask_cpu_us`` holds each timed fill's thread CPU time beside its wall time in ``mask_us``
    (read outside the wall clock's window): a fill that waited for a core shows a wall time well
    above its CPU time. With ``fill_cpu``, each timed fill also appends ``(instance, token
    position, thread CPU ns)`` to it, in the order of ``mask_us`` (the stop token's fill at
    position ``len(tokens)``).
    """
    res: dict[str, Any] = {
        "compile_error": None,
        "ttfm_us": None,
        "valid_rejected": 0,
        "invalid_accepted": 0,
        "disagreements": 0,
        "matcher_errors": 0,
        "first_failure": None,
    }
    t0 = _ns()
    try:
        compiled = adapter.compile(task.schema)
        m = adapter.matcher(compiled)
        m.fill()
    except MemoryError:
        raise
    except Exception as e:  # noqa: BLE001 (any engine error on compile is a compile error)
        res["compile_error"] = f"{type(e).__name__}: {e}"[:500]
        send(("compiled", None))
        res["mask_us"] = np.zeros(0)
        res["accept_us"] = np.zeros(0)
        res["mask_cpu_us"] = np.zeros(0)
        return res
    res["ttfm_us"] = (_ns() - t0) / 1000.0
    send(("compiled", res["ttfm_us"]))
    res["grammar_bytes"] = adapter.memory_bytes(compiled)

    mask_ns: list[int] = []
    accept_ns: list[int] = []
    mask_cpu_ns: list[int] = []
    cpu = time.thread_time_ns

    def timed_fill(m) -> tuple[int, int]:
        """(wall ns, thread CPU ns) of one fill."""
        ta = cpu()
        a = _ns()
        m.fill()
        b = _ns()
        return b - a, cpu() - ta

    def record_fill(times: tuple[int, int], i: int, pos: int) -> None:
        mask_ns.append(times[0])
        mask_cpu_ns.append(times[1])
        if fill_cpu is not None:
            fill_cpu.append((i, pos, times[1]))

    def fail(kind: str, i: int, detail: str) -> None:
        if res["first_failure"] is None:
            res["first_failure"] = f"{kind}: instance {i}: {detail}"[:500]

    for i, inst in enumerate(task.instances):
        accepted = False
        try:
            m = adapter.matcher(compiled)
            ok = True
            for pos, tok in enumerate(inst.tokens):
                fill = timed_fill(m)
                allowed = m.allowed(tok)
                c = _ns()
                acc = m.accept(tok)
                d = _ns()
                record_fill(fill, i, pos)
                accept_ns.append(d - c)
                if allowed != acc:
                    res["disagreements"] += 1
                    fail("mask disagrees with accept", i, f"token {pos} id {tok}: mask "
                         f"{'allows' if allowed else 'forbids'}, accept says {acc}")
                if not acc:
                    ok = False
                    break
            if ok:
                record_fill(timed_fill(m), i, len(inst.tokens))
                stops = m.stop_tokens
                allowed_stops = [s for s in stops if m.allowed(s)]
                stop = allowed_stops[0] if allowed_stops else stops[0]
                c = _ns()
                acc = m.accept(stop)
                accept_ns.append(_ns() - c)
                if bool(allowed_stops) != acc:
                    res["disagreements"] += 1
                    fail("mask disagrees with accept", i, f"stop token {stop}: mask "
                         f"{'allows' if allowed_stops else 'forbids'}, accept says {acc}")
                accepted = acc
        except MemoryError:
            raise
        except Exception as e:  # noqa: BLE001 (any engine error while matching is counted)
            res["matcher_errors"] += 1
            fail("matcher exception", i, f"{type(e).__name__}: {e}")
            accepted = None
        if accepted is None:
            continue
        if inst.valid and not accepted:
            res["valid_rejected"] += 1
            fail("valid rejected", i, inst.text[:200])
        elif not inst.valid and accepted:
            res["invalid_accepted"] += 1
            fail("invalid accepted", i, inst.text[:200])

    res["mask_us"] = np.asarray(mask_ns, dtype=np.float64) / 1000.0
    res["accept_us"] = np.asarray(accept_ns, dtype=np.float64) / 1000.0
    res["mask_cpu_us"] = np.asarray(mask_cpu_ns, dtype=np.float64) / 1000.0
    # After every instance: the compiled grammar with the masks it memoized along the way.
    res["grammar_cached_bytes"] = adapter.memory_bytes(compiled)
    # The per-vocabulary tables as grown so far (their lazy parts grow with the schemas run).
    res["vocab_index_bytes"] = adapter.vocabulary_memory_bytes()
    res["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    return res


def _quiet_output(log_path: str | None) -> None:
    """Send this process's stdout/stderr (engine warnings) to a log file."""
    if not log_path:
        return
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def worker_main(conn, engine: str, tokenizer_dir: str, log_path: str | None,
                bitmask_per_request: bool = False) -> None:
    """Process entry point: set up the engine, then fork runners on request until a None arrives."""
    for var in ("RAYON_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = "1"
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    _quiet_output(log_path)
    try:
        from .data import load_hf_tokenizer
        from .engines import ENGINES

        tok = load_hf_tokenizer(tokenizer_dir)
        adapter = ENGINES[engine](tok, bitmask_per_request=bitmask_per_request)
    except BaseException as e:  # noqa: BLE001 (report any setup failure, including ImportError)
        conn.send(("init_error", f"{type(e).__name__}: {e}\n{traceback.format_exc()[-2000:]}"))
        return
    conn.send(("ready", {"engine": engine, "version": adapter.version}))
    while True:
        try:
            request = conn.recv()
        except EOFError:
            return
        if request != "fork":
            return
        ours, theirs = socket.socketpair()
        pid = os.fork()
        if pid == 0:  # the runner: serve tasks on its own socket, never return into the template
            code = 1
            try:
                conn.close()
                ours.close()
                _prefer_oom_kill()
                code = serve_tasks(Connection(theirs.detach()), adapter)
            except BaseException:  # noqa: BLE001 (logged; the exit code tells the supervisor)
                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        theirs.close()
        conn.send(("forked", pid))
        send_handle(conn, ours.fileno(), os.getppid())
        ours.close()
        _, status = os.waitpid(pid, 0)
        try:
            conn.send(("exited", os.waitstatus_to_exitcode(status)))
        except OSError:  # the supervisor is gone
            return


def serve_tasks(conn, adapter) -> int:
    """A runner's loop: run tasks until a None or end of input; returns the exit code."""
    adapter.after_fork()
    while True:
        try:
            task = conn.recv()
        except EOFError:
            return 0
        if task is None:
            return 0
        print(f"--- {task.name}", flush=True)
        try:
            res = run_task(adapter, task, conn.send)
        except MemoryError:
            conn.send(("oom", "MemoryError"))
            return 1
        conn.send(("done", res))


def _prefer_oom_kill() -> None:
    """Make the kernel's OOM killer pick this runner before its template (best effort)."""
    try:
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write("1000")
    except OSError:
        pass
