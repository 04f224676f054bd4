"""The deployment's two services from Debian's packages, each in a folder of its own on a free loopback port:
PostgreSQL (package `postgresql`) as Airflow's metadata database and Redis (package `redis-server`) as Celery's
broker. Nothing here touches the system's own instances (their data folders, sockets, ports or services).

- PostgreSQL: `initdb` once into `FOLDER/data` (a user `airflow` whose password is the deployment's, password
  logins only), then `postgres` in the foreground, listening on 127.0.0.1 and on a Unix socket in `FOLDER`.
  The server refuses to run as root: under root it runs as the `postgres` user the package creates (through
  util-linux's `setpriv`, which execs it, so that stopping the command stops the server itself), and the folder
  is handed to that user, who must be able to enter the home's parent folders.
- Redis: `redis-server FOLDER/redis.conf` in the foreground, 127.0.0.1 only, with the deployment's password and
  no persistence (a broker's queue is rebuilt by Airflow's scheduler, which re-queues what it finds stuck).

Reads the binaries (`postgres`, `initdb`, `pg_isready`, `psql`, `createdb`: on PATH, else Debian's
`/usr/lib/postgresql/<version>/bin`; `redis-server` on PATH). Writes only under the given folders. Secrets
never go on a command line: `initdb` reads the password from a file of mode 0600, removed right after, Redis
from its configuration file (0600), and the clients get it through their environment.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
from pathlib import Path

from citeflow.errors import CiteflowError

DEBIAN_POSTGRES = Path("/usr/lib/postgresql")
DB_USER = "airflow"
DB_NAME = "airflow"
# Under root, PostgreSQL runs as the user Debian's package creates.
POSTGRES_SYSTEM_USER = "postgres"
# Memory for a small machine (Airflow's components hold a few connections each).
POSTGRES_SETTINGS = ("shared_buffers=64MB", "max_connections=100", "work_mem=4MB")
INSTALL_HINT = "apt-get install postgresql redis-server"


def postgres_bin(name: str) -> str:
    """A PostgreSQL program: on PATH, else in the newest of Debian's versioned folders (Debian puts only the
    clients on PATH)."""
    found = shutil.which(name)
    if found:
        return found
    folders = [p for p in DEBIAN_POSTGRES.glob("*/bin") if (p / name).is_file()]
    if not folders:
        raise CiteflowError(f"no PostgreSQL program {name} on PATH or under {DEBIAN_POSTGRES} ({INSTALL_HINT})")
    newest = max(folders, key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0)
    return str(newest / name)


def redis_bin() -> str:
    found = shutil.which("redis-server")
    if not found:
        raise CiteflowError(f"no redis-server on PATH ({INSTALL_HINT})")
    return found


def server_user() -> pwd.struct_passwd | None:
    """The user PostgreSQL runs as: None (this user) unless this is root, then `postgres`."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam(POSTGRES_SYSTEM_USER)
    except KeyError:
        raise CiteflowError(
            f"PostgreSQL refuses to run as root and there is no user {POSTGRES_SYSTEM_USER} ({INSTALL_HINT})"
        ) from None


def as_server_user(command: list[str]) -> list[str]:
    """`command` run as PostgreSQL's user: itself, or (under root) through setpriv, which execs it."""
    user = server_user()
    if user is None:
        return command
    setpriv = shutil.which("setpriv")
    if not setpriv:
        raise CiteflowError("running PostgreSQL as root's stand-in needs setpriv (Debian's util-linux)")
    return [setpriv, f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--init-groups", "--", *command]


def _hand_over(folder: Path) -> None:
    """Give `folder` (and what is in it) to PostgreSQL's user, and check that user can reach it."""
    user = server_user()
    if user is None:
        return
    for path in [folder, *folder.rglob("*")]:
        os.chown(path, user.pw_uid, user.pw_gid, follow_symlinks=False)
    probe = subprocess.run(as_server_user(["test", "-w", str(folder)]), capture_output=True)
    if probe.returncode != 0:
        raise CiteflowError(
            f"PostgreSQL runs as user {user.pw_name} (it refuses root), who cannot enter {folder}: pick a home "
            "whose parent folders other users may enter (mode o+x), e.g. under /srv or /tmp"
        )


def init_postgres(folder: Path, password: str) -> None:
    """`initdb` into `folder/data` once: user `airflow` with `password`, password logins only (scram-sha-256)."""
    data = folder / "data"
    if (data / "PG_VERSION").is_file():
        return
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o700)
    if data.exists():  # a half-made folder of an initdb that was interrupted
        shutil.rmtree(data)
    pwfile = folder / ".initdb-password"
    fd = os.open(pwfile, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(password + "\n")
    try:
        _hand_over(folder)
        command = [postgres_bin("initdb"), "-D", str(data), "-U", DB_USER, "--pwfile", str(pwfile)]
        command += ["--auth=scram-sha-256", "-E", "UTF8", "--locale=C", "--no-instructions"]
        done = subprocess.run(as_server_user(command), capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise CiteflowError(f"initdb failed in {data}: {(done.stdout + done.stderr).strip()[-1500:]}")
    finally:
        pwfile.unlink(missing_ok=True)


def postgres_command(folder: Path, port: int) -> list[str]:
    """The server in the foreground on 127.0.0.1:`port`, its Unix socket in `folder` (not the system's)."""
    _hand_over(folder)  # a folder copied or restored by root since
    command = [postgres_bin("postgres"), "-D", str(folder / "data"), "-p", str(port)]
    command += ["-c", "listen_addresses=127.0.0.1", "-c", f"unix_socket_directories={folder}"]
    for setting in POSTGRES_SETTINGS:
        command += ["-c", setting]
    return as_server_user(command)


def _client_env(password: str) -> dict[str, str]:
    return {**os.environ, "PGPASSWORD": password, "PGCONNECT_TIMEOUT": "5"}


def postgres_ready(port: int, password: str) -> bool:
    """Whether the server takes logins of the deployment's user now."""
    command = [postgres_bin("psql"), "-h", "127.0.0.1", "-p", str(port), "-U", DB_USER, "-d", "postgres"]
    done = subprocess.run(
        [*command, "-tAc", "select 1"], env=_client_env(password), capture_output=True, text=True, timeout=30
    )
    return done.returncode == 0 and done.stdout.strip() == "1"


def create_database(port: int, password: str) -> None:
    """The database `airflow`, unless it exists."""
    query = [postgres_bin("psql"), "-h", "127.0.0.1", "-p", str(port), "-U", DB_USER, "-d", "postgres", "-tAc"]
    env = _client_env(password)
    exists = f"select 1 from pg_database where datname = '{DB_NAME}'"
    found = subprocess.run([*query, exists], env=env, capture_output=True, text=True, timeout=30)
    if found.returncode == 0 and found.stdout.strip() == "1":
        return
    made = subprocess.run(
        [postgres_bin("createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", DB_USER, DB_NAME],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    if made.returncode != 0:
        raise CiteflowError(f"createdb {DB_NAME} failed: {(made.stdout + made.stderr).strip()[-800:]}")


def database_url(port: int, password: str, driver: str = "postgresql+psycopg") -> str:
    """SQLAlchemy's URL of the metadata database."""
    return f"{driver}://{DB_USER}:{password}@127.0.0.1:{port}/{DB_NAME}"


def redis_command(folder: Path, port: int, password: str) -> list[str]:
    """`redis-server` in the foreground on 127.0.0.1:`port`, its configuration (with the password) in a file
    of mode 0600 in `folder`, no snapshots or append-only file."""
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o700)
    conf = folder / "redis.conf"
    lines = [
        f"port {port}",
        "bind 127.0.0.1",
        "protected-mode yes",
        f'requirepass "{password}"',
        f'dir "{folder}"',
        'save ""',
        "appendonly no",
        "daemonize no",
        'logfile ""',
        # a broker must never drop a queued message to make room
        "maxmemory-policy noeviction",
    ]
    fd = os.open(conf, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write("\n".join(lines) + "\n")
    return [redis_bin(), str(conf)]


def redis_ready(port: int, password: str) -> bool:
    """Whether Redis answers PING after AUTH with the deployment's password."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            sock.sendall(f"AUTH {password}\r\nPING\r\n".encode())
            answer = b""
            while answer.count(b"\r\n") < 2:
                chunk = sock.recv(256)
                if not chunk:
                    break
                answer += chunk
    except OSError:
        return False
    return answer == b"+OK\r\n+PONG\r\n"


def broker_url(port: int, password: str) -> str:
    return f"redis://:{password}@127.0.0.1:{port}/0"
