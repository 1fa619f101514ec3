"""The documentation is tested like code (issue 12).

1. Every public name has a docstring: the names of ``grammask.__all__`` and of the ``__all__`` of
   its public submodules (``grammask.exception``, ``grammask.testing``, ``grammask.contrib.hf``),
   and every public method and property of their classes. Names that are data, not code
   (``__version__``, ``bitmask_dtype``), cannot carry a docstring and must be described on an API
   reference page instead. ``test_public_names_have_docstrings`` fails listing every name that
   lacks one; ``python tests/test_docs.py`` prints the count of documented names.
2. Every ````python`` block in ``docs/**/*.md`` and ``README.md`` runs. The blocks of one page run
   in order, in one fresh interpreter (a subprocess), so a block may use names an earlier block of
   the same page defined; tracebacks point at the Markdown file and line. A block is skipped only
   when the line right before its opening fence is ``<!-- no-run: REASON -->`` (keep such blocks
   rare: use the offline byte vocabulary, or the shared tokenizers through ``$GRAMMASK_SHARED``
   and random logits instead of a model). A page whose blocks read ``GRAMMASK_SHARED`` is skipped
   when the shared data is missing, as other tests that need it are.
"""

from __future__ import annotations

import importlib
import inspect
import os
import re
import subprocess
import sys
import textwrap
from enum import Enum
from pathlib import Path
from typing import Iterator, List, Tuple

import pytest
from conftest import REPO_ROOT, shared_dir

# Public modules whose ``__all__`` is API, besides ``grammask`` itself.
PUBLIC_MODULES = ["grammask", "grammask.exception", "grammask.testing", "grammask.contrib.hf"]

NO_RUN = re.compile(r"^<!--\s*no-run:\s*(?P<reason>\S.*?)\s*-->$")
FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`]*)$")


# ------------------------------------------------------------------------------------- docstrings


def _is_data(obj: object) -> bool:
    return not (inspect.ismodule(obj) or inspect.isclass(obj) or callable(obj) or isinstance(obj, property))


def _members(cls: type) -> Iterator[Tuple[str, object]]:
    """The public methods and properties a class defines (enum members are values, not API)."""
    for name, attr in vars(cls).items():
        if name.startswith("_") and name != "__call__":
            continue
        if isinstance(attr, (staticmethod, classmethod)):
            attr = attr.__func__
        if isinstance(attr, property) or inspect.isfunction(attr):
            yield name, attr
        elif issubclass(cls, Enum) and isinstance(attr, cls):
            continue


def public_names() -> List[Tuple[str, object]]:
    """(qualified name, object) for every public name, method and property, each object once."""
    seen = set()
    out: List[Tuple[str, object]] = []

    def add(qualname: str, obj: object) -> None:
        key = qualname if _is_data(obj) else id(obj)
        if key in seen:
            return
        seen.add(key)
        out.append((qualname, obj))

    for modname in PUBLIC_MODULES:
        module = importlib.import_module(modname)
        add(modname, module)
        for name in module.__all__:
            obj = getattr(module, name)
            if inspect.isclass(obj) and id(obj) in seen:
                continue  # re-exported (grammask.exception names in grammask.__all__)
            add(f"{modname}.{name}", obj)
            if inspect.isclass(obj) and obj.__module__.startswith("grammask"):
                for member, attr in _members(obj):
                    add(f"{modname}.{name}.{member}", attr)
    return out


def _reference_text() -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in sorted((REPO_ROOT / "docs" / "reference").glob("*.md")))


def _undocumented() -> List[str]:
    reference = _reference_text()
    missing = []
    for qualname, obj in public_names():
        if _is_data(obj):
            # A constant cannot carry a docstring: its reference page must describe it.
            if f"`{qualname.rsplit('.', 1)[-1]}`" not in reference:
                missing.append(f"{qualname} (data: describe `{qualname.rsplit('.', 1)[-1]}` on a page of docs/reference/)")
            continue
        # The object's own docstring: inspect.getdoc would inherit one from a base class.
        doc = (obj.fget if isinstance(obj, property) else obj).__doc__
        if not doc or not doc.strip():
            missing.append(qualname)
    return missing


def test_public_names_have_docstrings() -> None:
    missing = _undocumented()
    assert not missing, f"{len(missing)} public names have no docstring:\n  " + "\n  ".join(missing)


def test_public_names_cover_the_api() -> None:
    """The walk sees the whole public surface (a guard against a walk that finds nothing)."""
    names = {q for q, _ in public_names()}
    for expected in [
        "grammask.GrammarCompiler.compile_json_schema",
        "grammask.GrammarMatcher.fill_next_token_bitmask",
        "grammask.TokenizerInfo.vocab_size",
        "grammask.apply_token_bitmask_inplace",
        "grammask.exception.InternalError",
        "grammask.testing.bool_mask_to_bitmask",
        "grammask.contrib.hf.LogitsProcessor.__call__",
    ]:
        assert expected in names


def test_every_public_module_has_a_reference_page() -> None:
    reference = _reference_text()
    for modname in PUBLIC_MODULES:
        module = importlib.import_module(modname)
        for name in module.__all__:
            obj = getattr(module, name)
            if inspect.ismodule(obj) or _is_data(obj):
                continue
            places = {f"::: {m}.{name}\n" for m in PUBLIC_MODULES + [obj.__module__]}
            # or a whole-module block that lists the name under `members:`
            listed = f"::: {modname}\n" in reference and f"- {name}\n" in reference
            assert listed or any(p in reference for p in places), (
                f"{modname}.{name} is on no page of docs/reference/: add a `::: {modname}.{name}` line "
                "to a page there (a new page also needs an entry in mkdocs.yml's nav)"
            )


# ------------------------------------------------------------------------------------- code blocks


def doc_pages() -> List[Path]:
    pages = sorted((REPO_ROOT / "docs").rglob("*.md"))
    return [REPO_ROOT / "README.md"] + pages


def python_blocks(path: Path) -> Tuple[List[Tuple[int, str]], List[Tuple[int, str]]]:
    """([(first code line, code)], [(fence line, no-run reason)]) of the ````python`` blocks."""
    lines = path.read_text(encoding="utf-8").splitlines()
    run: List[Tuple[int, str]] = []
    skipped: List[Tuple[int, str]] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, lang = m.group("fence"), m.group("info").strip().split(" ")[0].lower()
        start = i + 1
        j = start
        while j < len(lines) and not (lines[j].strip().startswith(fence) and lines[j].strip().strip(fence[0]) == ""):
            j += 1
        if j == len(lines):
            raise AssertionError(f"{path}:{i + 1}: the code fence is never closed")
        if lang in ("python", "py"):
            code = textwrap.dedent("\n".join(lines[start:j]))
            prev = lines[i - 1].strip() if i > 0 else ""
            no_run = NO_RUN.match(prev)
            if no_run:
                skipped.append((i + 1, no_run.group("reason")))
            else:
                run.append((start + 1, code))
        i = j + 1
    return run, skipped


_RUNNER = """
import sys
path = sys.argv[1]
blocks = eval(sys.stdin.read())
namespace = {"__name__": "__main__"}
for first_line, code in blocks:
    exec(compile("\\n" * (first_line - 1) + code, path, "exec"), namespace)
"""


def _pages_with_blocks() -> List[Path]:
    return [p for p in doc_pages() if python_blocks(p)[0]]


@pytest.mark.parametrize("page", _pages_with_blocks(), ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_doc_examples_run(page: Path) -> None:
    blocks, _ = python_blocks(page)
    env = dict(os.environ)
    if any("GRAMMASK_SHARED" in code for _, code in blocks):
        shared = shared_dir()
        if shared is None:
            pytest.skip(f"{page.name}: the shared data dir is missing ($GRAMMASK_SHARED or ../shared)")
        env["GRAMMASK_SHARED"] = str(shared)
    rel = str(page.relative_to(REPO_ROOT))
    result = subprocess.run(
        [sys.executable, "-c", _RUNNER, rel],
        input=repr(blocks),
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        env=env,
        timeout=600,
    )
    assert result.returncode == 0, f"a code block of {rel} failed:\n{result.stderr[-6000:]}"


def test_no_run_blocks_give_a_reason() -> None:
    """Blocks marked ``<!-- no-run: ... -->`` say why; list them so they stay few."""
    for page in doc_pages():
        for line, reason in python_blocks(page)[1]:
            assert len(reason) >= 10, f"{page}:{line}: no-run needs a reason"


if __name__ == "__main__":
    names = public_names()
    missing = _undocumented()
    print(f"{len(names) - len(missing)} of {len(names)} public names documented")
    for q in missing:
        print("  missing:", q)
    skipped = [(p, line, r) for p in doc_pages() for line, r in python_blocks(p)[1]]
    ran = sum(len(python_blocks(p)[0]) for p in doc_pages())
    print(f"{ran} python code blocks run, {len(skipped)} marked no-run")
    for p, line, r in skipped:
        print(f"  no-run {p.relative_to(REPO_ROOT)}:{line}: {r}")
