"""Opening the files a crawl writes: private (0600) when the crawl sends credentials.

By default a new output or WARC file gets the umask's mode (0644 usually), as any file a
program creates. A crawl that sends credentials (``crawler.config.credentials``) archives the
pages they open and the site's ``Set-Cookie`` values: its files are created 0600, and a
regular file that already exists (truncated, or appended to on resume) loses its group and
other permissions too, before anything is written to it.
"""

from __future__ import annotations

import os
import stat
from typing import IO

__all__ = ["open_output", "private_fd", "temp_mode"]


def private_fd(fd: int) -> None:
    """Make the regular file open at ``fd`` readable by its owner only (not a device or a
    FIFO: /dev/null keeps its mode; a file of another owner is left as it is)."""
    st = os.fstat(fd)
    if stat.S_ISREG(st.st_mode) and st.st_mode & 0o077:
        try:
            os.fchmod(fd, 0o600)
        except PermissionError:
            pass  # another user's file we may write to: not ours to change


def open_output(path: str, *, append: bool, private: bool) -> IO[bytes]:
    """``open(path, "ab" if append else "wb")``; with ``private`` created 0600 (and an
    existing regular file made 0600) before the first byte is written."""
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else os.O_TRUNC)
    fd = os.open(path, flags, 0o600 if private else 0o666)
    try:
        if private:
            private_fd(fd)
        return os.fdopen(fd, "ab" if append else "wb")
    except BaseException:
        os.close(fd)
        raise


def temp_mode(private: bool) -> int:
    """The mode of a temporary file renamed into place: 0600 when ``private``, else what a new
    file gets under the umask."""
    if private:
        return 0o600
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask
