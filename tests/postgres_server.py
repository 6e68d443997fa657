"""A throwaway PostgreSQL server for tests: Debian's `postgresql` binaries, a cluster in a temporary
folder, reachable only through a Unix socket there, removed afterwards. PostgreSQL refuses to run as
root, so as root the cluster belongs to the `postgres` user."""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import subprocess
import tempfile

DATABASE = "tfdqn"
PORT = 5439


def _bindir() -> str | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return os.path.dirname(found[-1]) if found else None


def available() -> bool:
    return _bindir() is not None


@contextlib.contextmanager
def postgres_server():
    """Yields the URL (`postgresql://postgres@/tfdqn?host=SOCKET_DIR&port=PORT`) of a new, empty database."""
    bindir = _bindir()
    folder = tempfile.mkdtemp(prefix="tfdqn-pg-")
    as_user = []
    if os.geteuid() == 0:
        user = pwd.getpwnam("postgres")
        os.chown(folder, user.pw_uid, user.pw_gid)
        as_user = ["runuser", "-u", "postgres", "--"]
    data = os.path.join(folder, "data")

    def run(*command: str) -> None:
        subprocess.run([*as_user, *command], check=True, capture_output=True, timeout=120)

    try:
        run(f"{bindir}/initdb", "-D", data, "-U", "postgres", "--auth=trust")
        run(f"{bindir}/pg_ctl", "-D", data, "-l", os.path.join(folder, "log"), "-w", "-o",
            f"-k {folder} -p {PORT} -c listen_addresses=''", "start")
        try:
            run(f"{bindir}/createdb", "-h", folder, "-p", str(PORT), "-U", "postgres", DATABASE)
            yield f"postgresql://postgres@/{DATABASE}?host={folder}&port={PORT}"
        finally:
            run(f"{bindir}/pg_ctl", "-D", data, "-m", "immediate", "-w", "stop")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
