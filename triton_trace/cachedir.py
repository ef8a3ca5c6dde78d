"""The cache folder (``TRITON_TRACE_CACHE_DIR``, default ``~/.cache/triton_trace``) and the local key.

What the cache holds is later loaded or believed: C builds (``native/``), kernel modules and their compiles
(``modules/``, ``compiled/``), and ``key``, which signs the trace files this user saves. A folder that
another local user could write (a shared or pre-created cache, a symlink planted in it) would let them run
code in this process or forge what is shown, so every folder is checked before use: owned by this user,
not a symlink, not writable by group or others, and the same for the cache root. A folder that fails is
not used (``CacheUnusable`` says why); callers then work without the cache.
"""
from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import stat

from .errors import CacheUnusable

KEY_FILE = "key"
KEY_BYTES = 32


def cache_dir() -> str:
    return os.environ.get("TRITON_TRACE_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "triton_trace")


def _check(path: str, is_dir: bool) -> None:
    """Refuse ``path`` unless it is this user's alone (and, for a folder, a real folder)."""
    try:
        st = os.lstat(path)
    except OSError as e:
        raise CacheUnusable(f"{path}: {e.strerror}") from None
    if stat.S_ISLNK(st.st_mode):
        raise CacheUnusable(f"{path} is a symlink: not using it (set TRITON_TRACE_CACHE_DIR to a private folder)")
    if is_dir != stat.S_ISDIR(st.st_mode):
        raise CacheUnusable(f"{path} is not a {'folder' if is_dir else 'regular file'}")
    if hasattr(os, "getuid") and (st.st_uid != os.getuid() or st.st_mode & 0o022):
        raise CacheUnusable(f"{path} is not this user's alone (owner uid {st.st_uid}, mode "
                            f"{oct(st.st_mode & 0o777)}): not using it; set TRITON_TRACE_CACHE_DIR to a "
                            f"private folder or run chmod go-w on it")


def private_dir(sub: str = "") -> str:
    """The cache root, or its folder ``sub``, created 0700 where missing and checked as the module docstring
    says. Raises CacheUnusable naming the folder and the fix."""
    root = cache_dir()
    try:
        os.makedirs(root, mode=0o700, exist_ok=True)
    except OSError as e:
        raise CacheUnusable(f"cache folder {root} cannot be made ({e.strerror}); set TRITON_TRACE_CACHE_DIR "
                            f"to a folder you can write") from None
    _check(root, True)
    if not sub:
        return root
    path = os.path.join(root, sub)
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as e:
        raise CacheUnusable(f"cache folder {path} cannot be made ({e.strerror})") from None
    _check(path, True)
    if not os.access(path, os.W_OK | os.X_OK):
        raise CacheUnusable(f"cache folder {path} cannot be written")
    return path


def check_file(path: str) -> None:
    """Refuse a cached file another user could have written (or a symlink to anything)."""
    _check(path, False)


def local_key(create: bool = True) -> bytes:
    """This user's key (32 random bytes, a 0600 file in the private cache root), made on first use.
    Raises CacheUnusable where there is no usable cache (nothing is then signed or verified)."""
    path = os.path.join(private_dir(), KEY_FILE)
    if not os.path.lexists(path):
        if not create:
            raise CacheUnusable(f"no key at {path} yet")
        fd, tmp = _new_file(os.path.dirname(path), ".key")
        try:
            os.write(fd, secrets.token_bytes(KEY_BYTES))
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)          # the first process to make the key wins; later ones read it
        except FileExistsError:
            pass
        finally:
            os.unlink(tmp)
    check_file(path)
    with open(path, "rb") as f:
        key = f.read(KEY_BYTES + 1)
    if len(key) != KEY_BYTES:
        raise CacheUnusable(f"{path} is not a triton_trace key ({len(key)} bytes); delete it to make a new one")
    return key


def _new_file(folder: str, suffix: str) -> tuple:
    import tempfile
    return tempfile.mkstemp(suffix=suffix, dir=folder)


def mac(key: bytes, *parts: bytes) -> str:
    """HMAC-SHA256 of the parts (each length-prefixed, so no two splits of one byte string collide)."""
    h = hmac.new(key, digestmod=hashlib.sha256)
    for p in parts:
        h.update(len(p).to_bytes(8, "little"))
        h.update(p)
    return h.hexdigest()


def same_mac(a: str, b: str) -> bool:
    return isinstance(a, str) and isinstance(b, str) and hmac.compare_digest(a.encode(), b.encode())
