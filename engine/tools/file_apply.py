"""Applying a file change exactly as it was shown, atomically (issue 32 section 2).

A `Proposal` keeps what the diff was computed from: the file's real path, the name the
model gave (as joined with the working directory), and the SHA-256 of the bytes read
(or that there was no file). `apply` runs after the person approved, and first checks
that all of that still holds -- the name still resolves to the same real path (a
swapped symlink is refused), the directory opened is that path's, the file's bytes
hash the same (or it is still absent) -- and only then replaces it. Anything else is
refused with a message telling the model to read the file again; the file is left as
it is. (Between that check and the rename there is no window a file tool opens, but
another process writing the file in that instant is not seen: the change is still
exactly the bytes shown, over a file that changed a moment before.)

**Atomic.** The new bytes go to a temporary file in the same directory (opened
relative to the directory's descriptor, exclusive, never through a symlink), written,
given the mode, flushed to disk, then renamed over the file (``rename(2)``), so a
reader sees the old file or the new one, never a part. A new file is linked into place
instead (``link(2)``), which fails if a file of that name appeared meanwhile.

**Mode.** An existing file keeps its permission bits (the new inode gets them; its
owner is the daemon's user, and other hard links to the old file keep the old bytes).
A new file gets ``0666`` less the daemon's umask -- ``0644`` with the usual ``022`` --
as any program creating it would.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import secrets
import stat
from typing import Final

import attrs

__all__ = ["NEW_FILE_MODE_DEFAULT", "CurrentFile", "Proposal", "apply", "current_umask"]

#: The mode a new file gets when the umask cannot be read (``0666`` less ``022``).
NEW_FILE_MODE_DEFAULT: Final = 0o644


@attrs.frozen
class CurrentFile:
    """A file as read for a change: its bytes and permission bits."""

    data: bytes
    mode: int

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.data).hexdigest()


@attrs.frozen
class Proposal:
    """A change as it was shown: write ``new`` at ``real`` (reached as ``text``),
    over the file whose bytes hashed ``old_digest`` (None: there was no file)."""

    text: str
    real: str
    old_digest: str | None
    mode: int
    new: bytes


def current_umask() -> int:
    """The process's umask, read from ``/proc/self/status`` (setting it to read it
    would race other threads); ``022`` when it cannot be read."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022


def _read_at(directory: int, name: str) -> CurrentFile | None:
    """The regular file ``name`` in the open ``directory``, or None when there is
    none; raises `OSError` for anything else (a symlink put there: ``ELOOP``)."""
    try:
        fd = os.open(
            name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=directory
        )
    except FileNotFoundError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(f"{name} is no longer a regular file")
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return CurrentFile(data=b"".join(chunks), mode=stat.S_IMODE(info.st_mode))
    finally:
        os.close(fd)


def _changed(proposal: Proposal, directory: int, name: str) -> str:
    """Why ``proposal`` no longer applies, or ``""``."""
    where = posixpath.dirname(proposal.real)
    if os.path.realpath(proposal.text) != proposal.real:
        return f"{proposal.text} no longer leads to {proposal.real}"
    if os.readlink(f"/proc/self/fd/{directory}") != where:
        return f"the directory {where} was moved"
    try:
        current = _read_at(directory, name)
    except OSError as exc:
        return f"{proposal.real} cannot be read back ({exc.strerror or exc})"
    if proposal.old_digest is None:
        return f"{proposal.real} was created meanwhile" if current is not None else ""
    if current is None:
        return f"{proposal.real} was removed"
    if current.digest != proposal.old_digest:
        return f"{proposal.real} changed after the diff was computed"
    return ""


def apply(proposal: Proposal) -> str:
    """Write ``proposal`` if the file is still as shown (see the module docstring).
    Returns ``""`` when applied, else why not (nothing was changed). Blocking."""
    where, name = posixpath.split(proposal.real)
    try:
        directory = os.open(where, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        return f"the directory {where} cannot be opened ({exc.strerror or exc})"
    try:
        why = _changed(proposal, directory, name)
        if why:
            return why
        temp = f".{name}.agentrio-{secrets.token_hex(4)}.tmp"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(temp, flags, 0o600, dir_fd=directory)
        try:
            try:
                view = memoryview(proposal.new)
                while view:
                    view = view[os.write(fd, view) :]
                os.fchmod(fd, proposal.mode)
                os.fsync(fd)
            finally:
                os.close(fd)
            if proposal.old_digest is None:
                os.link(temp, name, src_dir_fd=directory, dst_dir_fd=directory)
            else:
                os.replace(temp, name, src_dir_fd=directory, dst_dir_fd=directory)
        except FileExistsError:
            return f"{proposal.real} was created meanwhile"
        finally:
            try:
                os.unlink(temp, dir_fd=directory)
            except FileNotFoundError:
                pass
        os.fsync(directory)
    except OSError as exc:
        return f"{proposal.real} could not be written ({exc.strerror or exc})"
    finally:
        os.close(directory)
    return ""
