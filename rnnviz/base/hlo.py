"""Which LAPACK calls a compiled executable makes, and whether two of them may run at once.

jaxlib 0.10.2 runs a batched LAPACK custom call on the CPU by scheduling its batch on
XLA's intra-op thread pool and blocking a pool thread until that work is done. XLA:CPU
runs independent instructions concurrently, so two LAPACK calls with no data dependency
between them can each hold a pool thread while waiting for work queued behind the other:
with as many such calls as threads (2 on a 2-core machine), the process hangs for good
(``gdb`` shows ``lapack_sgeqrf_ffi → jax::ParallelBatchMap → absl::BlockingCounter::Wait``
on every pool thread). :func:`concurrent_lapack` finds such pairs in the optimised HLO
text of an executable; :func:`check_serial_lapack` refuses an executable that has one.

Two calls are *ordered* when, in the computation where both are reached, the instruction
that reaches one is a transitive operand of the instruction that reaches the other (a
``while``, ``call`` or ``conditional`` reaches every call in the computations it runs; a
``while`` body runs its iterations one after another). Anything else may overlap.
Plain text parsing: no JAX needed, so the check also runs on a saved HLO dump.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

_COMPUTATION = re.compile(r"^(?:ENTRY\s+)?%?([\w.\-]+)\s*\(.*\{\s*$")
_INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*(.*)$")
_REFERENCE = re.compile(r"%([\w.\-]+)")
_LAPACK = re.compile(r'custom_call_target="(lapack_\w+)"')


class LapackCall(NamedTuple):
    """One LAPACK custom call: ``target`` (e.g. ``lapack_sgeqrf_ffi``), the instruction
    ``name`` and the ``computation`` it sits in."""

    target: str
    name: str
    computation: str


class _Instruction(NamedTuple):
    operands: tuple[str, ...]
    called: tuple[str, ...]
    lapack: str | None


def _parse(text: str) -> dict[str, dict[str, _Instruction]]:
    """``{computation: {instruction: _Instruction}}`` from optimised HLO text."""
    blocks: dict[str, list[tuple[str, str]]] = {}
    current: list[tuple[str, str]] | None = None
    for line in text.splitlines():
        head = _COMPUTATION.match(line)
        if head and "=" not in line.split("(", 1)[0]:
            current = blocks.setdefault(head.group(1), [])
            continue
        if line.strip() == "}":
            current = None
            continue
        inst = _INSTRUCTION.match(line) if current is not None else None
        if inst:
            current.append((inst.group(1), inst.group(2)))
    names = set(blocks)
    parsed: dict[str, dict[str, _Instruction]] = {}
    for comp, lines in blocks.items():
        local = {name for name, _ in lines}
        table = {}
        for name, rest in lines:
            refs = _REFERENCE.findall(rest)
            target = _LAPACK.search(rest)
            table[name] = _Instruction(
                operands=tuple(r for r in refs if r in local and r != name),
                called=tuple(r for r in refs if r in names and r not in local),
                lapack=target.group(1) if target else None,
            )
        parsed[comp] = table
    return parsed


def lapack_calls(text: str) -> list[LapackCall]:
    """Every LAPACK custom call in the HLO ``text``, in order of appearance."""
    return [
        LapackCall(i.lapack, name, comp)
        for comp, table in _parse(text).items()
        for name, i in table.items()
        if i.lapack
    ]


def concurrent_lapack(text: str) -> list[tuple[LapackCall, LapackCall]]:
    """Pairs of LAPACK calls in the HLO ``text`` that nothing orders (see the module doc).

    Returns:
      ``[(a, b), ...]``; empty when every LAPACK call waits for the previous one.

    >>> concurrent_lapack("ENTRY %main (p: f32[2,4,4]) -> f32[2,4,4] {\\n"
    ...   '  %a = f32[2,4,4] custom-call(%p), custom_call_target="lapack_sgeqrf_ffi"\\n'
    ...   '  ROOT %b = f32[2,4,4] custom-call(%a), custom_call_target="lapack_sorgqr_ffi"\\n}')
    []
    """
    parsed = _parse(text)
    reached: dict[str, frozenset[LapackCall]] = {}

    def reach(comp: str) -> frozenset[LapackCall]:
        if comp not in reached:
            reached[comp] = frozenset()  # a cycle cannot happen in HLO; this only guards recursion
            found: set[LapackCall] = set()
            for name, inst in parsed.get(comp, {}).items():
                if inst.lapack:
                    found.add(LapackCall(inst.lapack, name, comp))
                for callee in inst.called:
                    found |= reach(callee)
            reached[comp] = frozenset(found)
        return reached[comp]

    pairs: list[tuple[LapackCall, LapackCall]] = []
    for comp, table in parsed.items():
        holders = {name: _holds(name, inst, comp, reach) for name, inst in table.items()}
        holders = {n: calls for n, calls in holders.items() if calls}
        if len(holders) < 2:
            continue
        ancestors = _ancestors(table)
        names = sorted(holders)
        for i, a in enumerate(names):
            for b in names[i + 1 :]:
                if a not in ancestors[b] and b not in ancestors[a]:
                    pairs.append((min(holders[a]), min(holders[b])))
    return pairs


def _holds(name: str, inst: _Instruction, comp: str, reach) -> frozenset[LapackCall]:
    own = {LapackCall(inst.lapack, name, comp)} if inst.lapack else set()
    for callee in inst.called:
        own |= reach(callee)
    return frozenset(own)


def _ancestors(table: dict[str, _Instruction]) -> dict[str, set[str]]:
    """Transitive operands of every instruction of one computation."""
    memo: dict[str, set[str]] = {}
    for start in table:
        stack, order = [start], []
        while stack:  # iterative post-order: scan bodies can be thousands of instructions long
            name = stack.pop()
            if name in memo or name in order:
                continue
            order.append(name)
            stack.extend(o for o in table[name].operands if o not in memo)
        for name in reversed(order):
            if name not in memo:
                out: set[str] = set()
                for o in table[name].operands:
                    out.add(o)
                    out |= memo.get(o, set())
                memo[name] = out
    return memo


class ConcurrentLapackError(RuntimeError):
    """An executable holds LAPACK calls that XLA:CPU may run at once (a possible deadlock)."""


def check_serial_lapack(compiled: Any, what: str) -> None:
    """Raise :class:`ConcurrentLapackError` when the compiled CPU executable ``compiled``
    (``jax.stages.Compiled``) holds two LAPACK calls that may run at once.

    Args:
      compiled: the executable; only its ``as_text()`` is read.
      what: names it in the message (e.g. ``"the lstm analysis"``).

    Raises:
      ConcurrentLapackError: naming the calls, so the code that made them can be found.
    """
    text = compiled.as_text() or ""
    if "lapack_" not in text:
        return
    pairs = concurrent_lapack(text)
    if pairs:
        a, b = pairs[0]
        raise ConcurrentLapackError(
            f"{what}: {len(pairs)} pair(s) of LAPACK calls could run at once and deadlock jaxlib's CPU "
            "thread pool, "
            f"e.g. {a.target} ({a.name} in {a.computation}) and {b.target} ({b.name} in {b.computation}); "
            "order them (one stacked call, or a data dependency) or compute them without LAPACK "
            "(rnnviz.engine.linalg)"
        )


__all__ = ["ConcurrentLapackError", "LapackCall", "check_serial_lapack", "concurrent_lapack", "lapack_calls"]
