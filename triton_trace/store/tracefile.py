"""The versioned trace file: the contract between recording and viewing. ``save`` writes it; ``load`` reads
the header, has store/header.py check every field, and store/reader.py build the Trace from its blocks.

Layout: an 8-byte magic, a little-endian uint32 format version, a uint64 header length, a UTF-8 JSON
header, then the array blocks it describes (each zlib-compressed). Version 2 stores the lanes in their
compact form (``lanes.*`` arrays, see triton_trace.model.lanes); version 1 stored flat ``offsets`` and
``mask`` arrays and is still read. A launch's kernel module (``Launch.module``) is its header's
``meta.module`` object. Loading never unpickles anything; every dtype comes from a whitelist, every block's
offset and length is checked against the file before it is read, and the declared decompressed sizes are
checked against a memory budget before anything is allocated, so a crafted file is refused instead of
exhausting memory.
"""
from __future__ import annotations

import json
import os
import stat
import tempfile
import zlib

import numpy as np

from . import header as H
from . import signing
from .reader import LAUNCH_ARRAYS, PLAUSIBLE_RATIO, bad as _bad, build
from ..errors import TraceFileError
from ..model import KINDS, OP_COLUMNS, Trace

MAGIC = b"TTRACE\x00\x01"
VERSION = 2
MAX_HEADER = H.MAX_HEADER_BYTES
TMP_SUFFIX = ".ttrace-tmp"
DEFAULT_MAX_BYTES = 8 << 30


def _describe(arr: np.ndarray, f, pos: int) -> tuple:
    arr = np.ascontiguousarray(arr)
    raw = arr.tobytes()
    comp = zlib.compress(raw, 1)
    f.write(comp)
    return {"dtype": arr.dtype.str, "shape": list(arr.shape), "offset": pos, "nbytes": len(comp),
            "raw_nbytes": len(raw)}, pos + len(comp)


def save(trace: Trace, path) -> None:
    """Write ``trace`` to ``path``: into a temporary file of a fresh name in the same folder (made with
    O_EXCL, so no planted file or symlink is followed or overwritten), renamed into place, so two processes
    saving one path each leave a whole trace and a crash leaves no partial file. The header carries this
    user's signature (store/signing.py) when the local key can be used."""
    path = os.fspath(path)
    folder, base = os.path.split(os.path.abspath(path))
    _clean_stale(folder, base)
    fd, tmp = tempfile.mkstemp(prefix=f".{base}.{os.getpid()}.", suffix=TMP_SUFFIX, dir=folder)
    try:
        if hasattr(os, "fchmod"):          # mkstemp makes it 0600; a saved trace gets the usual mode
            os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as f, tempfile.TemporaryFile(dir=folder) as blobs:
            header = signing.sign(_write_blocks(trace, blobs))
            f.write(MAGIC + VERSION.to_bytes(4, "little") + len(header).to_bytes(8, "little"))
            f.write(header)
            blobs.seek(0)
            while chunk := blobs.read(1 << 24):
                f.write(chunk)
        os.replace(tmp, path)
    except BaseException:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        raise


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _clean_stale(folder: str, base: str) -> None:
    """Remove this user's temporaries of ``base`` whose saving process is gone (a SIGKILL mid-save)."""
    prefix = f".{base}."
    try:
        names = [n for n in os.listdir(folder) if n.startswith(prefix) and n.endswith(TMP_SUFFIX)]
    except OSError:
        return
    for name in names:
        pid = name[len(prefix):].split(".", 1)[0]
        if not pid.isdigit() or _alive(int(pid)):
            continue
        p = os.path.join(folder, name)
        try:
            st = os.lstat(p)
            if stat.S_ISREG(st.st_mode) and st.st_uid == getattr(os, "getuid", lambda: st.st_uid)():
                os.unlink(p)
        except OSError:
            pass            # another save removed it first


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:         # another user's process: alive
        return True
    return True


def _write_blocks(trace: Trace, bf) -> bytes:
    """Write every array block to the open file ``bf``; returns the JSON header that describes them."""
    launches = []
    pos = 0
    for lc in trace.launches:
        arrays = {}
        for name in OP_COLUMNS:
            arrays["ops." + name], pos = _describe(lc.ops[name], bf, pos)
        for name, arr in sorted(lc.lanes.to_arrays().items()):
            arrays["lanes." + name], pos = _describe(arr, bf, pos)
        for name in LAUNCH_ARRAYS:
            if getattr(lc, name) is not None:
                arrays[name], pos = _describe(getattr(lc, name), bf, pos)
        launches.append({
            "kernel_name": lc.kernel_name, "source": lc.source, "source_file": lc.source_file,
            "source_line": lc.source_line, "grid": list(lc.grid), "args": lc.args,
            "tensors": [t.to_dict() for t in lc.tensors], "files": list(lc.files),
            "value_dtypes": list(lc.value_dtypes), "config": lc.config, "outputs": list(lc.outputs),
            "recorded_programs": lc.recorded_programs, "skipped_programs": lc.skipped_programs,
            "values_truncated": lc.values_truncated, "completed": lc.completed, "error": lc.error,
            "meta": lc.meta if lc.module is None else {**lc.meta, "module": lc.module.to_dict()},
            "lanes": lc.lanes.size, "arrays": arrays})
    return json.dumps({"format": "triton_trace", "version": VERSION, "kinds": list(KINDS),
                       "launches": launches}, sort_keys=True, separators=(",", ":")).encode()


def load(path, max_bytes: int = DEFAULT_MAX_BYTES, trust: bool = False, max_ratio: int = PLAUSIBLE_RATIO) -> Trace:
    """Read a trace file. Refuses damaged files, newer format versions and files whose arrays would need
    more than ``max_bytes`` of memory, or more than ``max_ratio`` times the file's size (real traces
    compress at most ~75x; a zlib bomb ~1000x).

    The launches of a file this user saved (signed with their local key) keep their kernel code usable;
    any other file's kernels are never imported, compiled or run (compiled layouts are skipped, a
    reproducer refuses to run) unless ``trust=True``, and then only code that passes the Triton-language
    allowlist (compiled/bodycheck.py)."""
    path = os.fspath(path)
    f = _open_regular(path)
    with f:
        size = os.fstat(f.fileno()).st_size
        head = f.read(20)
        if len(head) < 20 or head[:8] != MAGIC:
            raise _bad(path, "it does not start with the triton_trace magic bytes")
        version = int.from_bytes(head[8:12], "little")
        if version > VERSION:
            raise TraceFileError(f"{path}: trace format version {version} is newer than this triton_trace "
                                 f"understands (version {VERSION}); upgrade triton_trace to read it")
        if version < 1:
            raise _bad(path, f"format version {version}")
        hlen = int.from_bytes(head[12:20], "little")
        if hlen > min(MAX_HEADER, size - 20):
            raise _bad(path, "header length exceeds the file")
        raw = f.read(hlen)
        try:
            header = H.parse(raw)
            H.check_header(header, version)
        except H.HeaderError as e:
            raise _bad(path, str(e)) from None
        provenance = "signed" if signing.verify(raw) else "trusted" if trust else "untrusted"
        data_start = 20 + hlen
        try:
            return build(path, header, f, data_start, size, max_bytes, version, max_ratio, provenance)
        except TraceFileError:
            raise
        except (KeyError, TypeError, ValueError, IndexError, AttributeError, OverflowError) as e:
            raise _bad(path, f"inconsistent header: {type(e).__name__}: {e}") from None


def _open_regular(path: str):
    """The file, opened for reading, if it is a regular file. A FIFO or a device would block ``open()``
    or never end: opened without blocking, checked, and refused."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as e:
        raise TraceFileError(f"{path}: cannot open trace file ({e.strerror})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = "a folder" if stat.S_ISDIR(st.st_mode) else "not a regular file (a pipe, socket or device)"
            raise TraceFileError(f"{path}: is {kind}; give the path of a .ttrace file")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
