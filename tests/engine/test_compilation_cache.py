"""The persistent compilation cache: sealed entries, so a damaged one is compiled again
instead of run (jaxlib 0.10.2 runs a damaged executable whose compressed stream is whole, and
the process dies), and its folder held to its cap."""

import hashlib
import math
import subprocess
import sys
import textwrap
from pathlib import Path

from rnnviz.engine.compile import _seal, _unseal, _unseal_timed

PROGRAM = textwrap.dedent("""
    import logging, sys
    logging.basicConfig(level=logging.WARNING)
    import jax, jax.numpy as jnp
    from rnnviz.engine.compile import enable_compilation_cache
    enable_compilation_cache(sys.argv[1], max_bytes=int(sys.argv[2]))
    f = jax.jit(lambda x: jnp.tanh(x) @ x.T + 1.0)
    print(repr(float(f(jnp.arange(64.0).reshape(8, 8) / 64).sum())))
""")


def _run(folder: Path, max_bytes: int = 64 * 2**20) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", PROGRAM, str(folder), str(max_bytes)],
        capture_output=True,
        text=True,
        timeout=300,
    )


def _damage_machine_code(entry: Path) -> None:
    """Flip 16 bytes in the middle of the executable's object code and compress it again, so
    the entry still decompresses and parses (what a checksum-less cache cannot tell)."""
    from jax._src import compilation_cache as cc

    blob = entry.read_bytes()
    raw = bytearray(cc.decompress_executable(_unseal(blob)))
    start = raw.find(b"\x7fELF")
    assert start > 0
    at = start + int((len(raw) - start) * 0.3)  # unsealed, this damage kills the process here (SIGSEGV)
    raw[at : at + 16] = bytes(b ^ 0xFF for b in raw[at : at + 16])
    head = len(_seal(b""))  # the seal and the digest of the value as it was written
    entry.write_bytes(blob[:head] + cc.compress_executable(bytes(raw)))


def test_seal_round_trips_and_refuses_what_it_did_not_seal():
    value = b"an executable"
    assert _unseal(_seal(value)) == value
    damaged = bytearray(_seal(value))
    damaged[-1] ^= 1
    assert _unseal(bytes(damaged)) is None and _unseal(value) is None and _unseal(b"") is None
    # the compile's seconds travel with the value, under the digest
    assert _unseal_timed(_seal(value, 1.25)) == (value, 1.25)
    timed = bytearray(_seal(value, 1.25))
    timed[len(b"rnnviz-sha256-s:")] ^= 1  # the seconds changed: refused like a damaged value
    assert _unseal_timed(bytes(timed))[0] is None
    # an entry sealed before the seconds were recorded is still read, with none
    old = b"rnnviz-sha256:" + hashlib.sha256(value).digest() + value
    value_read, seconds = _unseal_timed(old)
    assert value_read == value and math.isnan(seconds)


def test_a_damaged_entry_is_compiled_again_not_run(tmp_path):
    first = _run(tmp_path)
    assert first.returncode == 0, first.stderr
    entries = sorted(tmp_path.glob("jit__lambda*-cache"))
    assert len(entries) == 1 and _unseal(entries[0].read_bytes()) is not None  # written sealed
    _damage_machine_code(entries[0])
    second = _run(tmp_path)
    assert second.returncode == 0, second.stderr
    assert second.stdout == first.stdout and "is damaged or not sealed: compiling it again" in second.stderr
    assert _unseal(entries[0].read_bytes()) is not None  # rewritten, sealed, from a fresh compile
    third = _run(tmp_path)
    assert third.returncode == 0 and third.stdout == first.stdout and "damaged" not in third.stderr


def test_the_folder_is_held_to_its_cap(tmp_path):
    for i in range(3):
        (tmp_path / f"old{i}-cache").write_bytes(b"x" * 40_000)
        (tmp_path / f"old{i}-atime").write_bytes((i + 1).to_bytes(8, "little"))
    done = _run(tmp_path, max_bytes=100_000)
    assert done.returncode == 0, done.stderr
    size = sum(p.stat().st_size for p in tmp_path.glob("*-cache"))
    assert size <= 100_000 and not (tmp_path / "old0-cache").exists()  # the least recently used went
    assert any(tmp_path.glob("jit__lambda*-cache"))


ANALYSIS = textwrap.dedent("""
    import sys, jax
    from rnnviz import RunConfig, analyze
    from rnnviz.engine.compile import enable_compilation_cache
    hits = []
    count = lambda event, **_: hits.append(event) if event.endswith("/cache_hits") else None
    jax.monitoring.register_event_listener(count)
    enable_compilation_cache(sys.argv[1])
    t = analyze(RunConfig(cell="gru", hidden_size=8, seq_len=10), repeats=1).timing
    print(t.compile_s, t.fresh_compile_s, len(hits))
""")


def test_an_analysis_read_from_the_cache_knows_what_compiling_it_took(tmp_path):
    """Read from the persistent cache, an analysis takes a fraction of its compile to arrive
    (``compile_s``), and ``fresh_compile_s`` is the compile that its entry recorded (JAX's own
    record keeps whole seconds: 0 here), which is what compiling another executable of its
    shape is judged against (``sweep_reusing``)."""

    def run() -> tuple[float, float, float]:
        done = subprocess.run(
            [sys.executable, "-c", ANALYSIS, str(tmp_path)], capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, done.stderr
        compile_s, fresh_s, hits = map(float, done.stdout.split())
        return compile_s, fresh_s, hits

    compiled, compiled_fresh, hits = run()
    assert hits == 0 and compiled_fresh == compiled  # compiled here: the same seconds
    read, read_fresh, hits = run()
    # read: the seconds the first process recorded as its compile ended (its check of the
    # LAPACK calls aside), or the read's own where that took longer
    assert hits > 0 and 0.8 * compiled <= read_fresh <= max(compiled, read)
