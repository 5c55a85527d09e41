"""brokered-shell safe-delete for Python, loaded at start-up through PYTHONPATH.

Wraps os.remove, os.unlink, os.rmdir and shutil.rmtree (and so pathlib's unlink/rmdir,
which call them) so every delete first goes through the safe-delete client
(`node broker-delete.cjs`):

  client exit 0 -> the call returns normally (the path is in the trash)
  client exit 1 -> PermissionError(EACCES) when denied or when the broker failed, else
                   the OSError Python itself would raise (FileNotFoundError, ...);
                   the file stays
  client exit 2 -> broker unreachable: the client runs again with --local (the
                   freedesktop trash; never a permanent delete)

node is $BROKERED_SHELL_NODE, else `node` on PATH; the client is
$BROKERED_SHELL_SAFE_DELETE_CLIENT, else ../broker-delete.cjs next to this directory.
Once loaded the wrappers are always active: without BROKERED_SHELL_SOCKET the client
answers 2 and the local trash is used (see README.md for why).

Another sitecustomize further along sys.path (a distribution's) still runs after this one.
"""

import errno as _errno
import functools as _functools
import os as _os
import shutil as _shutil
import sys as _sys

_GUARD = "BROKERED_SHELL_SAFE_DELETE_IN_CLIENT"
_HERE = _os.path.dirname(_os.path.abspath(__file__))


def _client():
    return _os.environ.get("BROKERED_SHELL_SAFE_DELETE_CLIENT") or _os.path.join(_os.path.dirname(_HERE), "broker-delete.cjs")


def _node():
    configured = _os.environ.get("BROKERED_SHELL_NODE")
    if configured:
        return configured
    return _shutil.which("node")


def _absolute(path, dir_fd):
    """Absolute against dir_fd or the cwd, not resolved (the broker resolves)."""
    if path.startswith("/"):
        return path
    if dir_fd is not None:
        base = _os.readlink("/proc/self/fd/%d" % dir_fd)
    else:
        base = _os.getcwd()
    return base.rstrip("/") + "/" + path


def _run_client(node, flags, absolute):
    # Imported on the first delete, not at every interpreter start.
    import json as _json
    import subprocess as _subprocess

    env = dict(_os.environ)
    env[_GUARD] = "1"
    completed = _subprocess.run(
        [node, _client(), "--json"] + flags + ["--", absolute],
        env=env,
        stdin=_subprocess.DEVNULL,
        stdout=_subprocess.PIPE,
        stderr=_subprocess.PIPE,
    )
    if completed.stderr:
        # Through sys.stderr, so a program that redirects it sees the reason too.
        try:
            _sys.stderr.write(_os.fsdecode(completed.stderr))
            _sys.stderr.flush()
        except Exception:
            pass
    report = {}
    for line in completed.stdout.decode("utf-8", "replace").splitlines():
        if line.strip():
            try:
                report = _json.loads(line)
            except ValueError:
                pass
    return completed.returncode, report


def _safe_delete(path, flags, dir_fd=None):
    """Returns None on success, else the OSError to raise."""
    given = _os.fsdecode(_os.fspath(path))
    absolute = _absolute(given, dir_fd)
    node = _node()
    if not node:
        return PermissionError(
            _errno.EACCES,
            "Permission denied (brokered-shell: the safe-delete client cannot run: node not found; set BROKERED_SHELL_NODE)",
            path,
        )
    try:
        status, report = _run_client(node, flags, absolute)
        if status == 2:
            status, report = _run_client(node, ["--local"] + flags, absolute)
    except OSError as error:
        return PermissionError(_errno.EACCES, "Permission denied (brokered-shell: the safe-delete client cannot run: %s)" % error, path)
    if status == 0:
        return None
    code = report.get("errno")
    if status == 1 and report.get("outcome") == "failed" and code and not report.get("timeout"):
        number = getattr(_errno, code, None)
        if isinstance(number, int):
            message = _os.strerror(number)
            if report.get("via") != "check" and report.get("error"):
                message = "%s (brokered-shell: %s)" % (message, report["error"])
            # OSError picks the subclass itself (FileNotFoundError, IsADirectoryError, ...).
            return OSError(number, message, path)
    reason = report.get("error") or ("the safe-delete client ended with status %s" % status)
    return PermissionError(_errno.EACCES, "Permission denied (brokered-shell: %s)" % reason, path)


_original_remove = _os.remove
_original_unlink = _os.unlink
_original_rmdir = _os.rmdir
_original_rmtree = _shutil.rmtree


def _usable_path(path):
    """A path we can hand to the client; anything else goes to the original function,
    which raises its usual TypeError/ValueError without deleting anything."""
    if isinstance(path, int):
        return False
    try:
        value = _os.fspath(path)
    except TypeError:
        return False
    if isinstance(value, str):
        return "\0" not in value
    if isinstance(value, bytes):
        return b"\0" not in value
    return False


def _wrap_file_delete(original):
    @_functools.wraps(original)
    def wrapper(path, *, dir_fd=None):
        if not _usable_path(path):
            return original(path, dir_fd=dir_fd)
        error = _safe_delete(path, [], dir_fd)
        if error is not None:
            raise error

    return wrapper


@_functools.wraps(_original_rmdir)
def _rmdir(path, *, dir_fd=None):
    if not _usable_path(path):
        return _original_rmdir(path, dir_fd=dir_fd)
    error = _safe_delete(path, ["--rmdir"], dir_fd)
    if error is not None:
        raise error


_rmtree_signature = []


def _signature_of_rmtree():
    # inspect is slow to import: only on the first rmtree.
    if not _rmtree_signature:
        import inspect

        try:
            _rmtree_signature.append(inspect.signature(_original_rmtree))
        except (TypeError, ValueError):
            _rmtree_signature.append(None)
    return _rmtree_signature[0]


@_functools.wraps(_original_rmtree)
def _rmtree(*args, **kwargs):
    # Same arguments as this Python's own rmtree (onerror, onexc, dir_fd vary by version).
    signature = _signature_of_rmtree()
    if signature is not None:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        arguments = bound.arguments
    else:
        arguments = dict(zip(("path", "ignore_errors", "onerror"), args))
        arguments.update(kwargs)
    path = arguments.get("path")
    ignore_errors = arguments.get("ignore_errors", False)
    onerror = arguments.get("onerror")
    onexc = arguments.get("onexc")
    dir_fd = arguments.get("dir_fd")

    def handle(function, error):
        if ignore_errors:
            return
        if onexc is not None:
            onexc(function, path, error)
        elif onerror is not None:
            try:
                raise error
            except OSError:
                onerror(function, path, _sys.exc_info())
        else:
            raise error

    if not _usable_path(path):
        return _original_rmtree(*args, **kwargs)
    given = _os.fsdecode(_os.fspath(path))
    absolute = _absolute(given, dir_fd)
    if _os.path.islink(absolute):
        # rmtree never follows a link at the top; it refuses, as the original does.
        try:
            raise OSError("Cannot call rmtree on a symbolic link")
        except OSError as error:
            return handle(_os.path.islink, error)
    error = _safe_delete(path, ["--rmdir", "--recursive"], dir_fd)
    if error is not None:
        function = _os.lstat if isinstance(error, FileNotFoundError) else _os.rmdir
        return handle(function, error)


if hasattr(_original_rmtree, "avoids_symlink_attacks"):
    _rmtree.avoids_symlink_attacks = _original_rmtree.avoids_symlink_attacks


def _install():
    if _os.environ.get(_GUARD) == "1" or getattr(_os, "_brokered_shell_safe_delete", False):
        return
    _os.remove = _wrap_file_delete(_original_remove)
    _os.unlink = _wrap_file_delete(_original_unlink)
    _os.rmdir = _rmdir
    _shutil.rmtree = _rmtree
    _os._brokered_shell_safe_delete = True
    _rebind_early_imports()


def _rebind_early_imports():
    """A module imported before this file (a .pth file may import tempfile) can hold the
    original functions as default arguments; point those at the wrappers too."""
    swap = {id(_original_unlink): _os.unlink, id(_original_remove): _os.remove, id(_original_rmdir): _os.rmdir}
    tempfile = _sys.modules.get("tempfile")
    closer = getattr(tempfile, "_TemporaryFileCloser", None) if tempfile is not None else None
    for holder in (closer,):
        if holder is None:
            continue
        for value in vars(holder).values():
            function = getattr(value, "__func__", value)
            defaults = getattr(function, "__defaults__", None)
            if defaults and any(id(item) in swap for item in defaults):
                function.__defaults__ = tuple(swap.get(id(item), item) for item in defaults)


def _chain_next_sitecustomize():
    """Run the sitecustomize this file shadows, if there is one further along sys.path."""
    import importlib.machinery
    import importlib.util

    later = [entry for entry in _sys.path if _os.path.abspath(entry or ".") != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", later)
    if spec is None or spec.origin is None or _os.path.dirname(_os.path.abspath(spec.origin)) == _HERE:
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


_install()
try:
    _chain_next_sitecustomize()
except Exception as _error:  # a broken foreign sitecustomize must not stop Python
    _sys.stderr.write("brokered-shell safe-delete: the next sitecustomize failed: %s\n" % (_error,))
