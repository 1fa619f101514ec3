"""Address space and memory at import: `import grammask` must not reserve a large range (mimalloc's
default 1 GiB arena reservation broke processes under `ulimit -v` that also load torch)."""

from __future__ import annotations

import sys

import pytest

from conftest import run_python

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")


@linux_only
def test_import_reserves_little_address_space():
    r = run_python(
        """
        import re
        def vm_kib():
            return int(re.search(r"VmSize:\\s+(\\d+)", open("/proc/self/status").read()).group(1))
        import numpy
        before = vm_kib()
        import grammask as xgr
        info = xgr.TokenizerInfo([b"a", b"b", b"</s>"], xgr.VocabType.RAW, stop_token_ids=[2])
        m = xgr.GrammarMatcher(xgr.GrammarCompiler(info).compile_json_schema({"type": "object"}))
        m.accept_string("{}")
        print((vm_kib() - before) // 1024)
        """
    )
    assert r.returncode == 0, r.stderr
    grown_mib = int(r.stdout.strip())
    assert grown_mib < 256, f"import and a first compile grew the address space by {grown_mib} MiB"


@linux_only
def test_import_works_under_a_virtual_memory_limit():
    # 1 GiB of address space is plenty for numpy (one BLAS thread) and grammask, and less than
    # the 1 GiB arena reservation alone.
    r = run_python(
        """
        import os, resource
        os.environ["OPENBLAS_NUM_THREADS"] = os.environ["OMP_NUM_THREADS"] = "1"
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
        import numpy, grammask as xgr
        info = xgr.TokenizerInfo([b"a", b"</s>"], xgr.VocabType.RAW, stop_token_ids=[1])
        xgr.GrammarCompiler(info).compile_builtin_json_grammar()
        print("ok")
        """
    )
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


def _dynamic_flags(path: str) -> int:
    """DT_FLAGS of an ELF shared object, either class and byte order (0 when absent)."""
    import struct

    data = open(path, "rb").read()
    assert data[:4] == b"\x7fELF", f"{path} is not an ELF file"
    wide, order = data[4] == 2, "<" if data[5] == 1 else ">"
    # Header offsets and layouts of ELF64 / ELF32: e_phoff, e_phentsize + e_phnum, a program
    # header (p_type, p_offset, p_filesz) and a dynamic entry (d_tag, d_val).
    phoff = struct.unpack_from(order + ("Q" if wide else "I"), data, 0x20 if wide else 0x1C)[0]
    phentsize, phnum = struct.unpack_from(order + "HH", data, 0x36 if wide else 0x2A)
    phdr, dyn = ("IIQQQQ", "qQ") if wide else ("IIIIII", "iI")
    for i in range(phnum):
        fields = struct.unpack_from(order + phdr, data, phoff + i * phentsize)
        p_type, p_offset, p_filesz = (fields[0], fields[2], fields[5]) if wide else (fields[0], fields[1], fields[4])
        if p_type == 2:  # PT_DYNAMIC: (tag, value) pairs up to DT_NULL
            for off in range(p_offset, p_offset + p_filesz, struct.calcsize(dyn)):
                tag, value = struct.unpack_from(order + dyn, data, off)
                if tag == 0:
                    break
                if tag == 30:  # DT_FLAGS
                    return value
    return 0


@linux_only
def test_extension_needs_no_static_tls():
    # A module flagged DF_STATIC_TLS (initial-exec TLS, mimalloc's default) takes its whole TLS
    # block from glibc's small static surplus when loaded with dlopen; once our thread-locals grew
    # past ~1.5 KB, `import grammask` then `import torch` failed in libgomp ("cannot allocate
    # memory in static TLS block"). mimalloc is built with `local_dynamic_tls`.
    import grammask._core as core

    df_static_tls = 0x10
    assert _dynamic_flags(core.__file__) & df_static_tls == 0, f"{core.__file__} is flagged DF_STATIC_TLS"


@linux_only
def test_torch_imports_after_grammask():
    # The order users write (`import grammask as xgr` at the top, a model library after it).
    r = run_python(
        """
        import grammask as xgr
        import torch
        bitmask = xgr.allocate_token_bitmask(1, 64)
        print(bitmask.dtype)
        """,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "torch.int32"


@linux_only
def test_allocator_does_not_ask_for_huge_pages():
    # mimalloc madvises its arenas MADV_HUGEPAGE unless built with `no_thp`; under THP "madvise"
    # (a common default) each first touch of a 2 MiB page then zeroes (and may compact) a whole
    # huge page inside one mask fill, milliseconds on some VMs. `hg` in smaps' VmFlags marks
    # such a mapping; numpy alone (no torch) maps none.
    r = run_python(
        """
        import numpy, grammask as xgr
        info = xgr.TokenizerInfo([b"a", b"b", b"</s>"], xgr.VocabType.RAW, stop_token_ids=[2])
        m = xgr.GrammarMatcher(xgr.GrammarCompiler(info).compile_json_schema({"type": "object"}))
        m.accept_string("{}")
        flags = [line.split()[1:] for line in open("/proc/self/smaps") if line.startswith("VmFlags")]
        print(sum("hg" in f for f in flags))
        """
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "0", f"{r.stdout.strip()} mappings advised MADV_HUGEPAGE"


def test_vocabulary_memory_counts_the_token_index():
    """The per-vocabulary tables (counted in no grammar's memory_size_bytes) have a figure of
    their own, per part; the Rust test tests/index_memory.rs checks each part against the heap."""
    import grammask as xgr

    tokens = [bytes([b]) for b in range(0x20, 0x7F)] + [b'{"', b'":', b"true", b"</s>"]
    info = xgr.TokenizerInfo(tokens, xgr.VocabType.RAW, stop_token_ids=[len(tokens) - 1])
    compiler = xgr.GrammarCompiler(info)
    parts = compiler.get_vocabulary_memory_bytes()
    assert parts["total"] == sum(v for k, v in parts.items() if k != "total")
    for eager in ("vocabulary", "trie", "body_slice", "run_bases"):
        assert parts[eager] > 0, (eager, parts)
    compiler.compile_json_schema({"type": "object", "properties": {"a": {"type": "string"}}})
    assert compiler.get_vocabulary_memory_bytes()["total"] >= parts["total"]
