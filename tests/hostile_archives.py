"""Builders of hostile (and of good) model archives, small in memory, shared by the archive's
own tests (``tests/checkpoints/test_archive.py``), the upload folder's
(``tests/serve/test_model_files.py``), the Your model tab's and the CLI's.

:data:`HOSTILE` maps each case to ``(name, bytes, what the refusal says)``, judged against a
cap of 2 MiB (:data:`CAP`).
"""

from __future__ import annotations

import gzip
import io
import tarfile
import zipfile

from rnnviz.checkpoints.archive import MAX_MEMBERS
from rnnviz.checkpoints.demo import demo_bytes

#: The cap the hostile archives are judged against (the dashboard's under RNNVIZ_UPLOADS_MB=2).
CAP = 2 * 2**20


def zip_bytes(entries: dict[str, bytes], symlinks: dict[str, str] = {}) -> bytes:  # noqa: B006
    """A zip of ``entries``, and of ``symlinks`` (name → target) as Unix links."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in entries.items():
            z.writestr(name, data)
        for name, target in symlinks.items():
            info = zipfile.ZipInfo(name)
            info.external_attr = 0o120777 << 16
            z.writestr(info, target)
    return buf.getvalue()


def tar_bytes(entries: list[tuple[str, bytes | None, bytes]], gz: bool = False) -> bytes:
    """``(name, data, type)``: a member of each, links to /etc/passwd."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz" if gz else "w") as t:
        for name, data, kind in entries:
            info = tarfile.TarInfo(name)
            info.type, info.size, info.linkname = kind, len(data or b""), "/etc/passwd"
            t.addfile(info, io.BytesIO(data) if data else None)
    return buf.getvalue()


def declaring(size: int) -> bytes:
    """A zip of one small member whose central directory declares ``size`` bytes for it."""
    data = bytearray(zip_bytes({"model/weights.safetensors": b"x" * 100}))
    at = data.index(b"PK\x01\x02")
    data[at + 24 : at + 28] = size.to_bytes(4, "little")  # the entry's uncompressed size
    return bytes(data)


def tar_claiming(size: int) -> bytes:
    """A gzipped tar whose one header declares ``size`` bytes, with none behind it."""
    info = tarfile.TarInfo("model/weights.safetensors")
    info.size = size
    return gzip.compress(info.tobuf(format=tarfile.GNU_FORMAT) + bytes(1024))


def pax_inflating(size: int) -> bytes:
    """A gzipped tar whose extended header is ``size`` bytes of zeros: read whole, it would be
    held in memory before any member's size is known."""
    info = tarfile.TarInfo("././@PaxHeader")
    info.type, info.size = tarfile.XHDTYPE, size
    return gzip.compress(info.tobuf(format=tarfile.USTAR_FORMAT) + bytes(size + 1024))


def demo_folder_zip() -> bytes:
    """A good archive: the demo state dict in a folder ``tiny/``, and a README."""
    return zip_bytes({"tiny/demo.safetensors": demo_bytes(), "tiny/README.md": b"a demo"})


REG, SYM, LNK, CHR = tarfile.REGTYPE, tarfile.SYMTYPE, tarfile.LNKTYPE, tarfile.CHRTYPE
LINK = "is a link or special file; allowed: regular files and folders"
TOO_LARGE = f"declares more than {CAP:,} bytes; allowed: at most {CAP:,}"
HOSTILE = {
    "zip slip": (
        "slip.zip",
        zip_bytes({"m/ok.pt": b"x", "../x": b"x"}),
        "member '../x' leaves the archive's folder",
    ),
    "tar slip": ("slip.tar.gz", tar_bytes([("a/../../x", b"x", REG)], gz=True), "member 'a/../../x' leaves"),
    "absolute path": ("abs.tar", tar_bytes([("/tmp/x", b"x", REG)]), "member '/tmp/x' is an absolute path"),
    "zip symlink": ("link.zip", zip_bytes({"m/ok.pt": b"x"}, {"m/x": "/etc/passwd"}), f"member 'm/x' {LINK}"),
    "tar symlink": ("link.tgz", tar_bytes([("x", None, SYM)], gz=True), f"member 'x' {LINK}"),
    "hard link": ("hard.tar", tar_bytes([("x", None, LNK)]), f"member 'x' {LINK}"),
    "device": ("dev.tar", tar_bytes([("x", None, CHR)]), f"member 'x' {LINK}"),
    "too many members": (
        "many.zip",
        zip_bytes({f"m/{i}.txt": b"" for i in range(MAX_MEMBERS + 1)}),
        f"lists more than {MAX_MEMBERS} members; allowed: at most {MAX_MEMBERS}",
    ),
    "declared size too large": ("big.zip", declaring(3 * 2**20), TOO_LARGE),
    "a tar header claiming 1 TB": ("bomb.tar.gz", tar_claiming(10**12), TOO_LARGE),
    "a header inflating past the cap": ("pax.tar.gz", pax_inflating(3 * 2**20), "inflates past"),
    "a zip bomb": ("bomb.zip", zip_bytes({"m/zeros.pt": bytes(3 * 2**20)}), TOO_LARGE),
    "not an archive": ("junk.zip", b"PK but nothing more", "is not a zip archive"),
}
