"""Atomic writes: a file via a temp file renamed into place; an output folder staged beside
and swapped in whole. Both are staged in a *staging folder* of this process beside what
they replace, which the next staging into the same folder removes if its writer is gone.

A staging folder is a hidden folder named ``.NAME-RANDOM.edgetwin`` (NAME: the target's,
cut to 50 characters) holding a file ``lock``, on which its writer holds an exclusive
flock from just after the folder is made until it is removed. The kernel releases a flock
when the last descriptor of it closes, so when the writer dies, however it dies (SIGKILL,
a crash; a machine's crash ends them all), and never while it lives: a pid, even with the
process's start time, can be reused or come from another pid namespace (a container
sharing the folder), a lock cannot. A child forked from the writer closes its copies of
the lock's descriptors (``os.register_at_fork``; the writer's lock stays held), so that
the lock is the writer's alone: a plan's pool workers, orphaned and blocked for good when
the plan is killed, do not keep its staging folder live. The lock file also names the
machine, and is made under another name and renamed to ``lock`` once locked, so that no
other process ever sees it unlocked while its writer lives.

Before a process makes a staging folder it removes those in the same folder whose writer
is gone (``remove_stale_staging``): a folder (not a link) whose name has that form and
which holds a ``lock`` file (a regular file, not a link) naming this machine, whose lock
it can take. A publish killed between its two renames is undone first: the old folder set
aside in it goes back to its name, if that is still free. Anything else is left alone:
a staging folder whose writer lives, one made on another machine (a network file system
whose locks do not cross machines would show its live writer's lock free), one without a
lock file (an older edgetwin's ``.NAME-RANDOM``, whose name a user's folder could have and
which says nothing of its writer; or one killed in the instant between its making and its
lock, or where the file system has no flock), and anything that is not a staging folder.
What it removed is logged (logger ``edgetwin.atomic``, level WARNING: nothing to fix, worth
knowing), once per folder cleaned: the command line prints it on stderr, and Python shows
it to an API caller on stderr unless logging is set up otherwise.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager, suppress
from pathlib import Path

from edgetwin.errors import FORCE_OPTION, OUT_OPTION, InputError, raise_if_stop_asked
from edgetwin.number_text import counted
from edgetwin.output_folder import output_kind

STAGING_SUFFIX = ".edgetwin"  # a staging folder's name: .NAME-RANDOM.edgetwin
_STAGING_NAME = re.compile(rf"\..*-[a-z0-9_]+{re.escape(STAGING_SUFFIX)}", re.DOTALL)
_NAME_CHARS = 50  # of the target's name in a staging folder's (a name has at most 255 bytes)
_LOCK = "lock"  # in a staging folder: flocked by its writer; this machine's name, its pid
_LOCKING = "locking"  # the lock file before it is locked
_NEW = "new"  # in a staging folder: the folder that publish_folder puts in place
_ASIDE = "old"  # in a staging folder: holds the folder publish_folder replaces, until removed
_GONE = "gone"  # in a staging folder: the folder remove_whole removes
_HELD: set[int] = set()  # this process's descriptors of its staging folders' locks
_LOG = logging.getLogger(__name__)  # what remove_stale_staging removed


def _close_inherited_locks() -> None:
    """In a child just forked: close its copies of the parent's lock descriptors (which
    leaves the parent's locks held: a flock goes with the last descriptor of it)."""
    for fd in _HELD:
        with suppress(OSError):
            os.close(fd)
    _HELD.clear()


os.register_at_fork(after_in_child=_close_inherited_locks)


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that readers see the old file or the whole new one."""
    write_texts_together({path: text})


def write_texts_together(texts: Mapping[Path, str]) -> None:
    """Write every file of ``texts`` (path -> text), each atomically, and all or none: each
    goes to a temp file in a staging folder beside it first, and only once all are written
    are they renamed into place (a failed write leaves every old file as it was)."""
    for path in texts:
        if output_kind(path) not in (None, "file"):
            raise InputError(path, None, "exists and is not a regular file")
    with ExitStack() as staged:
        folders: dict[Path, Path] = {}  # a staging folder in each folder written into
        temps: dict[Path, Path] = {}
        for path, text in texts.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            if path.parent not in folders:
                folders[path.parent] = staged.enter_context(_staging_folder(path))
            temps[path] = folders[path.parent] / str(len(temps))
            with temps[path].open("x", encoding="utf-8", newline="") as handle:
                handle.write(text)
            os.chmod(temps[path], 0o644)
        raise_if_stop_asked()  # a stop asked for publishes nothing, even if its interrupt was lost
        for path, tmp in temps.items():
            os.replace(tmp, path)


@contextmanager
def _staging_folder(beside: Path) -> Iterator[Path]:
    """A new staging folder in the folder of ``beside`` (which must exist), held by this
    process until the block ends, then removed with whatever it holds; the stale staging
    folders there are removed first (``remove_stale_staging``)."""
    remove_stale_staging(beside.parent)
    name = f".{beside.name[:_NAME_CHARS]}-"
    folder = Path(tempfile.mkdtemp(prefix=name, suffix=STAGING_SUFFIX, dir=beside.parent))
    held = None
    try:
        held = _hold(folder)
        yield folder
    finally:
        _clear(folder)
        if held is not None:
            _HELD.discard(held)
            os.close(held)


@contextmanager
def staged_folder(out: Path) -> Iterator[Path]:
    """A new empty folder (mode 0o755, as its files) to fill and ``publish_folder`` as
    ``out``; its parent is a staging folder beside ``out`` (``_staging_folder``), removed at
    the end with whatever it still holds."""
    with _staging_folder(out) as staging:
        new = staging / _NEW
        new.mkdir()
        new.chmod(0o755)  # mkdir's mode is cut by the umask
        yield new


def remove_whole(folder: Path) -> None:
    """Remove ``folder`` at once as others see it: renamed into a staging folder beside it
    (one rename), which is then removed with it; a process killed meanwhile leaves that
    staging folder to the next command, never ``folder`` half-removed (some of its files
    gone, the others looking like a whole output)."""
    with _staging_folder(folder) as staging:
        folder.rename(staging / _GONE)


def remove_stale_staging(parent: Path) -> list[Path]:
    """Remove the staging folders in ``parent`` whose writer is gone (the module's docstring
    says which those are, and what is left alone), and log how many; the ones removed."""
    try:
        with os.scandir(parent) as entries:
            found = [
                Path(entry.path)
                for entry in entries
                if _STAGING_NAME.fullmatch(entry.name) and entry.is_dir(follow_symlinks=False)
            ]
    except OSError:
        return []
    removed = [folder for folder in found if _removed_if_stale(folder)]
    if removed:
        _LOG.warning("%s", removed_note(len(removed), parent))
    return removed


def removed_note(count: int, parent: Path) -> str:
    """What ``remove_stale_staging`` says it removed: ``removed 2 folders left by killed
    edgetwin commands in DIR``."""
    killed = "a killed edgetwin command" if count == 1 else "killed edgetwin commands"
    return f"removed {counted(count, 'folder')} left by {killed} in {parent}"


def _hold(folder: Path) -> int | None:
    """A descriptor holding the flock of ``folder``'s lock file, which names this machine
    and process; None where the file system has no flock (then ``folder`` is left if this
    process is killed)."""
    locking = folder / _LOCKING
    fd = os.open(locking, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.write(fd, f"{_machine()}\n{os.getpid()}\n".encode())
    except OSError:
        os.close(fd)
        locking.unlink()
        return None
    _HELD.add(fd)
    try:
        locking.rename(folder / _LOCK)  # locked before any other process can see it
    except BaseException:
        _HELD.discard(fd)
        os.close(fd)
        raise
    return fd


def _removed_if_stale(folder: Path) -> bool:
    """Remove the staging folder ``folder`` if its writer is gone: its lock file names this
    machine and its lock is free (it is taken for the removal); whether it was removed."""
    lock = folder / _LOCK
    try:  # not O_RDONLY: an exclusive lock on NFS needs a descriptor that may write
        fd = os.open(lock, os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return False  # no lock file: not a staging folder whose writer's end can be told
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # BlockingIOError while it lives
        held = os.fstat(fd)
        if not stat.S_ISREG(held.st_mode) or not os.path.samestat(held, os.lstat(lock)):
            return False  # not a lock file, or removed (by its writer at its end) meanwhile
        if os.read(fd, 4096).decode(errors="replace").split("\n")[0] != _machine():
            return False
        _put_back(folder)
        _clear(folder)
    except OSError:
        return False
    finally:
        os.close(fd)
    return not os.path.lexists(folder)


def _put_back(folder: Path) -> None:
    """Undo a publish that was killed between its two renames: the folder it set aside in
    ``folder`` goes back to its name, if that is still free (its new folder is removed)."""
    aside = folder / _ASIDE
    if not aside.is_dir() or aside.is_symlink():
        return
    for old in aside.iterdir():
        if not os.path.lexists(folder.parent / old.name):
            old.rename(folder.parent / old.name)


def _clear(folder: Path) -> None:
    """Remove the staging folder ``folder``, its lock file last: one that keeps anything
    (a file it cannot remove) keeps its lock file, so that a later cleaner still knows it."""
    try:
        with os.scandir(folder) as entries:
            held = [entry for entry in entries if entry.name != _LOCK]
    except OSError:
        return
    for entry in held:
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path, ignore_errors=True)
        else:
            with suppress(OSError):
                os.unlink(entry.path)
    with suppress(OSError):
        if os.listdir(folder) == [_LOCK]:
            os.unlink(folder / _LOCK)
        folder.rmdir()


def _machine() -> str:
    """This machine's name, as a lock file records it."""
    return os.uname().nodename


def publish_folder(staging: Path, out: Path, replace: bool = True) -> None:
    """Put the finished folder ``staging`` (one of ``staged_folder``) in place of ``out``
    (which goes, whole): ``out`` is renamed aside into ``staging``'s staging folder,
    ``staging`` renamed in, the old one removed. All sit in ``out``'s folder, so each
    rename is atomic; if the second fails, the old folder is put back, and if this process
    is killed between the two, the next cleaner of its staging folder puts it back.

    Without ``replace``, ``out`` must still be absent or an empty folder (or a link, which
    is replaced, as ``check_out_folder`` allowed): a command that filled it meanwhile
    (two runs started with the same new ``--out``) keeps its output, and this one is an
    InputError. An ``out`` the system will not rename (an immutable folder, another user's
    in a sticky folder) is an InputError too, ``out`` left as it was. After a stop was
    asked for (``stop_asked``) nothing is published: a KeyboardInterrupt."""
    if not _STAGING_NAME.fullmatch(staging.parent.name):
        raise ValueError(f"{staging} is not a folder of staged_folder")
    raise_if_stop_asked()
    try:
        _swap_in(staging, out, replace)
    except OSError as exc:
        if exc.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR) and not replace:
            problem = (
                f"{OUT_OPTION} was filled by another command while this one ran; this run's "
                f"output was not kept (pass {FORCE_OPTION} to replace it)"
            )
        else:
            problem = f"cannot replace it: {exc.strerror or exc}; this run's output was not kept"
        raise InputError(out, None, problem) from None


def _swap_in(staging: Path, out: Path, replace: bool) -> None:
    """``publish_folder``'s renames; an OSError leaves ``out`` as it was and nothing aside."""
    if not replace and not out.is_symlink():
        staging.rename(out)  # atomic; refused by the kernel if out holds anything
        return
    if not os.path.lexists(out):
        staging.rename(out)
        return
    aside = staging.parent / _ASIDE
    aside.mkdir()
    try:
        out.rename(aside / out.name)
    except BaseException:
        aside.rmdir()
        raise
    try:
        staging.rename(out)
    except BaseException:
        (aside / out.name).rename(out)
        aside.rmdir()
        raise
    shutil.rmtree(aside, ignore_errors=True)
