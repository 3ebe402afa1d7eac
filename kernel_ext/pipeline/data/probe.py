"""Runtime probe for the generated FastAPI backend (written by besser-jupyter-agent).

    python .besser_probe.py up [--port 8765]     boot the backend detached (log in .besser_probe/server.log)
    python .besser_probe.py routes               list the routes the app serves
    python .besser_probe.py req METHOD PATH [-H 'Name: value'] [--json '{...}']
    python .besser_probe.py log [--lines 40]     the tail of the server log
    python .besser_probe.py down                 stop the server this probe started (and nothing else)

``routes`` and ``req`` reach the server ``up`` started; when it is not running (the run's shell
session was restarted in between, which ends its processes), they start their own first on the
last port used. Header values are sent but never printed. ``down`` stops a process only when its command line
carries this probe's marker, so it cannot kill anything it did not start.
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
STATE = os.path.join(HERE, ".besser_probe")
MARKER = "--besser-probe-server"
BACKEND = os.path.join(HERE, "backend")


def _state(name):
    os.makedirs(STATE, exist_ok=True)
    return os.path.join(STATE, name)


def _port():
    try:
        with open(_state("port")) as handle:
            return int(handle.read().strip())
    except (OSError, ValueError):
        return 8765


def up(args):
    if _running_pid():
        print(f"already up on port {_port()}")
        return 0
    code = (
        "import sys, uvicorn; sys.argv = sys.argv[:1]; sys.path.insert(0, '.'); "
        f"uvicorn.run('main_api:app', host='127.0.0.1', port={args.port}, log_level='info')"
    )
    log = open(_state("server.log"), "ab")  # noqa: SIM115 - handed to the detached server, which outlives this script
    proc = subprocess.Popen([sys.executable, "-c", code, MARKER], cwd=BACKEND, stdout=log, stderr=log, start_new_session=True)
    with open(_state("pid"), "w") as handle:
        handle.write(str(proc.pid))
    with open(_state("port"), "w") as handle:
        handle.write(str(args.port))
    for _ in range(100):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{args.port}/openapi.json", timeout=0.5).read()
            print(f"up on port {args.port} (pid {proc.pid})")
            return 0
        except (urllib.error.URLError, OSError):
            if proc.poll() is not None:
                print(f"the server exited with code {proc.returncode}; see: python .besser_probe.py log")
                return 1
            time.sleep(0.2)
    print("the server did not answer within 20 s; see: python .besser_probe.py log")
    return 1


def _ensure_up():
    """Start the server when this probe's own is not running (a restarted session ended it)."""
    if _running_pid():
        return 0
    print("the server is not running (was the session restarted?); starting it")
    return up(argparse.Namespace(port=_port()))


def routes(args):
    if _ensure_up():
        return 1
    spec = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{_port()}/openapi.json", timeout=5).read())
    for path, methods in sorted(spec.get("paths", {}).items()):
        print(f"{' '.join(m.upper() for m in sorted(methods)):24} {path}")
    return 0


def req(args):
    if _ensure_up():
        return 1
    headers = {"Content-Type": "application/json"}
    for item in args.header or []:
        name, _, value = item.partition(":")
        headers[name.strip()] = value.strip()
    data = args.json.encode() if args.json is not None else None
    request = urllib.request.Request(f"http://127.0.0.1:{_port()}{args.path}", data=data, method=args.method.upper(), headers=headers)
    try:
        response = urllib.request.urlopen(request, timeout=30)
        status, body = response.status, response.read()
    except urllib.error.HTTPError as error:
        status, body = error.code, error.read()
    shown = ", ".join(f"{name}: <{len(value)} chars>" for name, value in headers.items() if name != "Content-Type")
    print(f"{args.method.upper()} {args.path} -> {status}" + (f" (sent headers {shown})" if shown else ""))
    print(body.decode("utf-8", "replace")[:4000])
    return 0 if status < 500 else 1


def log(args):
    try:
        with open(_state("server.log"), "rb") as handle:
            lines = handle.read().decode("utf-8", "replace").splitlines()
    except OSError:
        print("no server log yet")
        return 1
    print("\n".join(lines[-args.lines:]))
    return 0


def down(args):
    pid = _running_pid()
    if not pid:
        print("not running")
        return 0
    os.killpg(pid, signal.SIGTERM)
    for _ in range(50):
        if not _running_pid():
            break
        time.sleep(0.1)
    else:
        os.killpg(pid, signal.SIGKILL)
    print(f"stopped pid {pid}")
    return 0


def _running_pid():
    """The probe's own server pid, only if that process is alive and carries the marker."""
    try:
        with open(_state("pid")) as handle:
            pid = int(handle.read().strip())
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            command = handle.read().split(b"\0")
    except (OSError, ValueError):
        return None
    return pid if MARKER.encode() in command else None


def main():
    parser = argparse.ArgumentParser(prog=".besser_probe.py")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("up")
    p.add_argument("--port", type=int, default=8765)
    sub.add_parser("routes")
    p = sub.add_parser("req")
    p.add_argument("method")
    p.add_argument("path")
    p.add_argument("-H", "--header", action="append")
    p.add_argument("--json")
    p = sub.add_parser("log")
    p.add_argument("--lines", type=int, default=40)
    sub.add_parser("down")
    args = parser.parse_args()
    return {"up": up, "routes": routes, "req": req, "log": log, "down": down}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
