#!/usr/bin/env python3
"""Static server for the browser bench (web/bench.html) without Node, plus the two POST endpoints
the page reports to: /adapter (the WebGPU adapter the page got) and /result (the bench JSON).

  /          web/                    (page, JS API, worker)
  /build/    --wasm-dir              (build-wasm/web: wgllm.js + wgllm.wasm)
  /models/   --models-dir            (GGUF files)
  /text/moby-dick.txt  --text        (prompt text, as the native `wgllm bench` uses)

Each POST is written to --out (adapter.json, result.json) and echoed on stdout; with
--exit-after-result the server stops once result.json is written.
Usage: python3 tools/device/browser/serve_bench.py --port 8765 --wasm-dir build-wasm/web
         --models-dir ~/.cache/wgllm/models --out /tmp/bench [--text FILE] [--exit-after-result]
"""
import argparse, http.server, json, os, sys, threading

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
MIME = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
        ".mjs": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8",
        ".wasm": "application/wasm", ".json": "application/json", ".gguf": "application/octet-stream",
        ".txt": "text/plain; charset=utf-8", ".md": "text/plain; charset=utf-8", ".png": "image/png"}


def make_handler(opt, done):
    roots = [("/build/", opt.wasm_dir), ("/models/", opt.models_dir), ("/", os.path.join(ROOT, "web"))]

    class H(http.server.BaseHTTPRequestHandler):
        def log_message(self, fmt, *args):
            if opt.verbose:
                sys.stderr.write("[serve_bench] " + fmt % args + "\n")

        def resolve(self):
            path = self.path.split("?", 1)[0]
            if path == "/text/moby-dick.txt" and opt.text:
                return opt.text
            for prefix, root in roots:
                if path.startswith(prefix):
                    rel = path[len(prefix):] or "index.html"
                    p = os.path.realpath(os.path.join(root, rel))
                    base = os.path.realpath(root)
                    if p != base and not p.startswith(base + os.sep):
                        return None
                    if os.path.isdir(p):
                        p = os.path.join(p, "index.html")
                    return p if os.path.isfile(p) and "node_modules" not in p.split(os.sep) else None
            return None

        def head_or_get(self, body):
            p = self.resolve()
            if not p:
                self.send_response(404)
                self.send_header("content-type", "text/plain")
                self.end_headers()
                if body:
                    self.wfile.write(b"not found\n")
                return
            size = os.path.getsize(p)
            self.send_response(200)
            self.send_header("content-type", MIME.get(os.path.splitext(p)[1], "application/octet-stream"))
            self.send_header("content-length", str(size))
            self.send_header("cache-control", "no-cache")
            self.end_headers()
            if body:
                with open(p, "rb") as f:
                    while True:
                        b = f.read(1 << 20)
                        if not b:
                            break
                        self.wfile.write(b)

        def do_HEAD(self):
            self.head_or_get(False)

        def do_GET(self):
            try:
                self.head_or_get(True)
            except (BrokenPipeError, ConnectionResetError):
                pass

        def do_POST(self):
            name = {"/adapter": "adapter.json", "/result": "result.json"}.get(self.path)
            n = int(self.headers.get("content-length") or 0)
            data = self.rfile.read(n)
            if not name:
                self.send_response(404)
                self.end_headers()
                return
            try:
                obj = json.loads(data)
            except ValueError:
                obj = {"error": "the page posted invalid JSON", "raw": data.decode("utf-8", "replace")}
            os.makedirs(opt.out, exist_ok=True)
            with open(os.path.join(opt.out, name), "w") as f:
                json.dump(obj, f, indent=1)
            print(f"[serve_bench] {name}: {json.dumps(obj)[:4000]}", flush=True)
            self.send_response(204)
            self.end_headers()
            if name == "result.json" and opt.exit_after_result:
                done.set()

    return H


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--port", type=int, default=8765)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--wasm-dir", default=os.path.join(ROOT, "build-wasm", "web"))
    ap.add_argument("--models-dir", default=os.path.join(os.environ.get("WGLLM_CACHE", os.path.expanduser("~/.cache/wgllm")), "models"))
    ap.add_argument("--text", default="")
    ap.add_argument("--out", default="/tmp/wgllm-bench")
    ap.add_argument("--exit-after-result", action="store_true")
    ap.add_argument("--verbose", action="store_true")
    opt = ap.parse_args()
    done = threading.Event()
    srv = http.server.ThreadingHTTPServer((opt.host, opt.port), make_handler(opt, done))
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    print(f"[serve_bench] http://{opt.host}:{srv.server_address[1]}/ (wasm {opt.wasm_dir}, models {opt.models_dir}, out {opt.out})", flush=True)
    try:
        while not done.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    srv.shutdown()


if __name__ == "__main__":
    main()
